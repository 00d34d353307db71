# ---
# jupyter:
#   accelerator: GPU
#   colab:
#     gpuType: T4
#     provenance: []
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 13 · Your own data: Drive, a zip on local disk, ImageFolder and fine-tuning
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/13_own_data.ipynb)
# [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/colab-gpu-course/pytorch-gpus-colab/blob/main/notebooks/13_own_data.ipynb)
#
# **What you will learn**
# - to get a folder of your own photos into a Colab or Kaggle runtime without the GPU waiting on
#   Google Drive: one archive copied to local disk and extracted, measured against reading the
#   files one by one;
# - to load class folders with `ImageFolder`, turn phone photos upright, split every class the
#   same way on every run, and augment them with lesson 05's v2 transforms, in plain torchvision;
# - to write a `Dataset` for the other common layout: one folder of images and a CSV of labels;
# - to fine-tune a pretrained torchvision model: a new head trained on a frozen backbone, then
#   every layer at a lower learning rate, in channels_last and lesson 06's precision, with
#   checkpoints on Drive so that a disconnect costs at most one epoch;
# - to use the model: `model.eval()` and `torch.inference_mode()`, one image and a batch, and the
#   weights saved and loaded again;
# - going further (optional): where JPEG decoding runs, CPU workers or the GPU, measured.
#
# **Time:** 55 minutes. **Prerequisites:** lessons 03 (`fit`, checkpoints), 05 (loaders and
# v2 transforms) and 06 (mixed precision).
#
# The words host, device, kernel, CUDA, cuBLAS, cuDNN and compute capability: [lesson 01's
# glossary](01_enable_gpu_runtime.ipynb).

# %%
# @title Setup: colab_gpu 0.52.0, the course's package (installed where missing; never torch)
# On Kaggle, turn on Settings > Internet first. PyPI first, else the course's git tag of this release.
import importlib
import subprocess
import sys
import tempfile
from importlib import metadata

COLAB_GPU = "0.52.0"
TORCH_FLOOR = "2.7"  # the oldest torch the course is tested on
SOURCES = [f"colab-gpu=={COLAB_GPU}", f"git+https://github.com/colab-gpu-course/pytorch-gpus-colab@v{COLAB_GPU}"]
try:
    from colab_gpu import __version__ as found
except ImportError:
    found = None
everything = {d.metadata["Name"]: d.version for d in metadata.distributions()}
runtime = {name: everything[name] for name in ("torch", "torchvision") if name in everything}  # kept as they are
torch_found = runtime.get("torch")
if torch_found and [int(n) for n in torch_found.split(".")[:2]] < [int(n) for n in TORCH_FLOOR.split(".")]:
    raise RuntimeError(f"This runtime has torch {torch_found}; the course needs torch {TORCH_FLOOR} or newer, and "
                       "the setup cell never replaces a runtime's torch. Colab: Runtime > Change runtime type > "
                       "Runtime version: Latest. Elsewhere: install a newer torch with its torchvision (pytorch.org).")
source = None
if found != COLAB_GPU:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as keep:  # pip's constraints file
        keep.write("".join(f"{name}=={version}\n" for name, version in runtime.items()))
    errors = []
    for source in SOURCES:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", keep.name, source],
                             capture_output=True, text=True)
        if pip.returncode == 0:
            break
        errors.append(f"{source}: {pip.stderr.strip()[-800:]}")
    else:
        raise RuntimeError(f"pip could not install colab_gpu {COLAB_GPU} beside this runtime's {runtime}, which it "
                           "keeps (is this runtime online? On Kaggle: Settings > Internet):\n" + "\n".join(errors))
    for name in [m for m in sys.modules if m.partition(".")[0] == "colab_gpu"]:
        del sys.modules[name]  # another version was imported above: the import below loads this one
    importlib.invalidate_caches()
print(f"colab_gpu {COLAB_GPU}:", "already installed" if source is None else f"installed from {source}")

# %%
import torch

import colab_gpu as cg

# The course's error explainer: after an error its atlas knows (lesson 09), the cause and the fix.
# %load_ext colab_gpu

device = cg.get_device()
on_gpu = device.type == "cuda"
print(f"PyTorch {torch.__version__}, computing on: {device}")

# %% [markdown]
# ## 1. Your images, as one folder per class
#
# `ImageFolder` reads the layout most photo collections already have: one folder per class,
# the images inside, any names. Zip the top folder on your computer and upload the one archive
# to Google Drive:
#
# ```
# my_photos.zip
# └── my_photos/
#     ├── cats/    0001.jpg  0002.jpg ...
#     └── dogs/    0001.jpg  img_2231.jpeg ...
# ```
#
# Set `MY_ARCHIVE` to its path below (on Colab, Drive is mounted at `/content/drive` by the next
# cell, which asks for your permission once) and the whole lesson runs on your images. Left at
# `None`, it trains on a stand-in: real JPEG photos with a circle, a square or a triangle drawn in,
# one folder per shape, and a zip of them beside it. The lesson writes the stand-in once (on Drive
# when it is mounted; a later session finds it there) and measures it in section 2 in any case.
#
# On Kaggle, attach a data set with "Add Input": it appears, already extracted, under
# `/kaggle/input/<name>/`, on the machine's disk and read-only. Set `MY_FOLDER` to the folder that
# holds its class folders instead: there is nothing to copy. (A folder of class folders already on
# any machine's own disk works the same way.) Checkpoints go to `/kaggle/working/`, which Kaggle
# keeps with the notebook's output. Many Kaggle data sets come in the other common layout, one
# folder of images and a CSV file of labels: this lesson's exercise writes the `Dataset` for it.

# %%
import os
import shutil
import sys
import time
from pathlib import Path

MY_ARCHIVE = None  # your data: a .zip or .tar.gz of class folders, e.g. "/content/drive/MyDrive/my_photos.zip"
MY_FOLDER = None  # or a folder of class folders on this machine's disk, e.g. "/kaggle/input/<name>/<folder>"

on_colab = "google.colab" in sys.modules  # imported by every Colab runtime
on_kaggle = "KAGGLE_KERNEL_RUN_TYPE" in os.environ  # set in every Kaggle notebook
if on_colab:
    from google.colab import drive

    try:
        drive.mount("/content/drive")
    except Exception as err:  # permission refused, or no answer: the lesson goes on without Drive
        print(f"Drive is not mounted ({type(err).__name__}: {err}): files and checkpoints stay on this runtime's "
              "disk and go with it. Rerun this cell to mount Drive.")
if on_kaggle:
    print("data sets attached to this notebook:", sorted(p.name for p in Path("/kaggle/input").iterdir()))
my_drive = Path("/content/drive/MyDrive")
on_drive = my_drive.is_dir()
size = 224 if on_gpu else 64  # pixels: the pretrained weights' 224 on a GPU, 64 to keep a CPU runtime quick
source = (my_drive / "colab_gpu" / "lesson13" if on_drive else Path("lesson13_source")) / f"{size}px"

standin, standin_zip = source / "shapes", source / "shapes.zip"
written_now = not (standin_zip.is_file() and standin.is_dir())
if written_now:  # once: a later session reads these files from Drive itself, not from this session's cache
    cg.write_image_folder(standin, per_class=100 if on_gpu else 40, size=size)
    partial = shutil.make_archive(str(source / ".shapes"), "zip", root_dir=source, base_dir="shapes")
    Path(partial).rename(standin_zip)  # the zip is whole or absent, even after a disconnect
archive = Path(MY_ARCHIVE or standin_zip)
print(f"stand-in images in {standin}/ and {standin_zip.name} ({'written now' if written_now else 'found'}); "
      f"this lesson trains on {MY_FOLDER or archive}")

# %% [markdown]
# ## 2. Why not train from Drive: one archive on local disk
#
# A mounted Drive looks like a folder, but opening a file there that this runtime has not read
# yet is a request to Google's servers. An epoch over 10,000 photos opens 10,000 files, and
# the GPU waits for each. One archive is one large read: copy it to the runtime's own disk (`/content` on Colab),
# extract it there, and every epoch reads local files. By hand, that is two lines of the standard
# library: `shutil.copy`, then `shutil.unpack_archive` (zipfile and tarfile underneath, for a `.zip`
# or a `.tar.gz`). `cg.copy_and_extract` does the same with progress bars, skips both steps when
# this archive was extracted there already, leaves out a Mac's `__MACOSX`, and returns the folder
# that holds the classes (a zip of a folder has one folder more).
#
# The next cell measures the three steps on this runtime. On Colab with Drive mounted, the first
# line is Drive. In the session that wrote the stand-in, Drive still holds its files in a local
# cache and the line flatters Drive; in a later session (Runtime > Disconnect and delete runtime,
# then Run all) it measures Drive itself, and so does `cg.time_file_reads("/content/drive/MyDrive/<a
# folder of yours>")` on any folder this runtime has not read yet. Without Drive, every line is this
# machine's disk, warm in the operating system's cache: the cost of opening a file, without a network.

# %%
# The runtime's own disk, gone with the session: /content on Colab; on Kaggle /kaggle/temp (what you write
# to /kaggle/working is kept as the notebook's output); here, a folder beside the notebook.
local = Path("/content/data") if on_colab else Path("/kaggle/temp") if on_kaggle else Path("lesson13_local")
file_by_file = cg.time_file_reads(standin)
one_file = cg.time_file_reads(standin_zip)

by_hand = local / "by_hand"  # the stand-in's zip, by hand: one large read, then extracted on this disk
by_hand.mkdir(parents=True, exist_ok=True)
copied = shutil.copy(standin_zip, by_hand / standin_zip.name)
shutil.unpack_archive(copied, by_hand)
print(f"by hand: {standin_zip.name} copied and unpacked into {by_hand}: {sorted(p.name for p in by_hand.iterdir())}")

start = time.perf_counter()
extracted = cg.copy_and_extract(archive, local)
extract_s = time.perf_counter() - start
local_reads = cg.time_file_reads(extracted)

where = "Google Drive" if on_drive else "this machine's disk (no Drive here)"
print(f"stand-in, file by file from {where}: {file_by_file}")
print(f"the same images as one zip:  {one_file}")
print(f"copy + extract {archive.name} to {local}: {extract_s:.2f} s -> {extracted}")
print(f"then file by file from the local copy: {local_reads}")
print(f"per file: {1e6 * file_by_file.seconds / file_by_file.files:,.0f} µs from {where}, "
      f"{1e6 * local_reads.seconds / local_reads.files:,.0f} µs from the local copy")
if not on_drive:
    print("Drive's own figure needs Colab with Drive mounted: there the first line reads from Drive.")
elif written_now:
    print("Drive is serving files this session wrote from its cache: run the lesson again in a new session "
          "to measure Drive itself.")
if archive == standin_zip:  # the copy holds every byte of every image
    assert (local_reads.files, local_reads.bytes) == (file_by_file.files, file_by_file.bytes)
data_root = Path(MY_FOLDER) if MY_FOLDER else extracted  # a folder on this machine's disk needs no copy

# %% [markdown]
# **Phone photos: shrink them once, after extracting.** A 12-megapixel JPEG costs about 230 ms
# to decode and augment on one core (measured on the course's CPU runner with a synthetic
# 4000x3000 JPEG, against 3 ms at 512x384): Colab's 2 vCPUs would prepare fewer than ten such
# photos a second, and the GPU would wait for them most of every epoch. So shrink the extracted
# copy once, to about twice the training size: `Image.draft` asks the JPEG decoder for a reduced
# size directly (1/2, 1/4 or 1/8), then `thumbnail` brings the longest side down, after
# `exif_transpose` has turned the photo upright.
# It rewrites the files in place, so it runs on the extracted copy only, never on a folder of
# yours (`MY_FOLDER`: copy it first). The stand-in's images are already small: nothing changes.

# %%
from PIL import Image, ImageOps


def shrink_photos(root, longest=512):
    """Turn every image under ``root`` upright and shrink its longest side to ``longest`` pixels, in place."""
    shrunk = 0
    for path in sorted(Path(root).rglob("*")):
        if path.suffix.lower() not in (".jpg", ".jpeg", ".png") or path.name.startswith("."):
            continue
        with Image.open(path) as image:
            if max(image.size) <= longest:
                continue
            image.draft("RGB", (longest, longest))  # JPEG: decode at a fraction of the size, much faster
            small = ImageOps.exif_transpose(image).convert("RGB")
        small.thumbnail((longest, longest))
        small.save(path)
        shrunk += 1
    return shrunk


if data_root == extracted:  # the copy this lesson extracted; your originals stay in the archive
    print(f"{shrink_photos(data_root, longest=2 * size)} image(s) shrunk to at most {2 * size} pixels")
else:
    print(f"{data_root} is your own folder: not shrunk in place (shrink a copy of it)")

# %% [markdown]
# ## 3. `ImageFolder`, a split that stays the same, and v2 transforms
#
# Three things go wrong in most first attempts. `random_split` of one `ImageFolder` gives the
# validation part the training part's random augmentation (they share one data set, one
# transform); a split drawn from the global random state changes whenever an earlier cell draws
# one number more, so last week's validation images end up in this week's training set; and
# phones store portraits sideways, with an EXIF tag that `ImageFolder`'s default loader ignores.
# By hand, in plain torchvision: two `ImageFolder`s over the same files, one per transform, a
# loader that turns each photo upright (`ImageOps.exif_transpose`) and makes it RGB (a PNG with
# transparency has four channels, a grayscale photo one), and a split of every class by the same
# fraction with a generator of its own.
#
# The transforms are lesson 05's v2 ones, normalized the way the pretrained weights were trained
# (their `transforms()` says how). Training crops a random 50-100% of each image and mirrors it:
# right for photos of objects, wrong for text or digits (leave the flip out then). Validation
# resizes and takes the centre, the same every time.

# %%
from PIL import Image, ImageOps
from torch.utils.data import Subset
from torchvision.datasets import ImageFolder
from torchvision.models import ResNet18_Weights, resnet18
from torchvision.transforms import v2

weights = ResNet18_Weights.DEFAULT
preset = weights.transforms()  # what the weights were trained with: ImageNet's mean and std, 224 pixels
to_float = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(preset.mean, preset.std)]
train_transform = v2.Compose([v2.RandomResizedCrop(size, scale=(0.5, 1.0)), v2.RandomHorizontalFlip(), *to_float])
val_transform = v2.Compose([v2.Resize(size), v2.CenterCrop(size), *to_float])


def upright_rgb(path):
    """Open an image as ImageFolder does, then turn it upright as its EXIF tag says, in RGB."""
    with Image.open(path) as image:
        return ImageOps.exif_transpose(image).convert("RGB")


def stratified_split(targets, val_fraction, seed):
    """Indices for training and validation: the same fraction of every class, the same on every run."""
    generator = torch.Generator().manual_seed(seed)
    train, val = [], []
    for label in sorted(set(targets)):
        members = [i for i, target in enumerate(targets) if target == label]
        shuffled = [members[i] for i in torch.randperm(len(members), generator=generator).tolist()]
        n_val = round(len(members) * val_fraction)
        val += shuffled[:n_val]
        train += shuffled[n_val:]
    return sorted(train), sorted(val)


train_folder = ImageFolder(data_root, transform=train_transform, loader=upright_rgb)
val_folder = ImageFolder(data_root, transform=val_transform, loader=upright_rgb)
train_indices, val_indices = stratified_split(train_folder.targets, val_fraction=0.2, seed=0)
train_part, val_part = Subset(train_folder, train_indices), Subset(val_folder, val_indices)
print(f"by hand: {train_folder.classes}, {len(train_part)} training and {len(val_part)} validation images")
print("train:", train_transform)

# %% [markdown]
# `cg.split_image_folder(root, train_transform, val_transform, val_fraction, seed)` is this cell
# in one call, and adds three things your own data will need: hidden folders and `__MACOSX` are
# not classes (the common error below), a class with fewer than two images is a clear error, and
# `split.fingerprint` names the files and the split, for checkpoint names (section 5). The rest
# of the lesson uses it.

# %%
split = cg.split_image_folder(data_root, train_transform, val_transform, val_fraction=0.2, seed=0)
print(split)
assert split.val.indices == val_indices  # the same split as by hand
again = cg.split_image_folder(data_root, val_fraction=0.2, seed=0)
assert again.val.indices == split.val.indices and not set(split.val.indices) & set(split.train.indices)

# %%
import matplotlib.pyplot as plt

shown = [split.train[i] for i in range(0, len(split.train), max(1, len(split.train) // 8))][:8]
mean, std = torch.tensor(preset.mean), torch.tensor(preset.std)
cg.show_images(torch.stack([image for image, _ in shown]), [split.classes[label] for _, label in shown],
               mean=mean, std=std, title="training images, augmented")
plt.show()

# %% [markdown]
# ### Common error: a hidden folder taken for a class
#
# `ImageFolder` takes every folder under the root for a class, hidden ones included. Open an image
# in Jupyter's file browser and it may write `.ipynb_checkpoints` there; a zip made on a Mac holds
# `__MACOSX`. Either becomes a class without images, and `ImageFolder` stops. Shown on a scratch
# folder of two of your images (your own folder may be read-only, like Kaggle's inputs):

# %%
demo = local / "hidden_folder_demo"
shutil.rmtree(demo, ignore_errors=True)  # a fresh scratch folder on every run
(demo / split.classes[0]).mkdir(parents=True, exist_ok=True)
for n, path in enumerate([path for path, label in split.train.dataset.samples if label == 0][:2]):
    shutil.copy(path, demo / split.classes[0] / f"{n}{Path(path).suffix}")
(demo / ".ipynb_checkpoints").mkdir(exist_ok=True)  # what Jupyter leaves behind
with cg.shows_error(FileNotFoundError, match="Found no valid file for the classes .ipynb_checkpoints",
                    fix="delete the folder (shutil.rmtree), or load with cg.split_image_folder, which skips "
                        "hidden folders and __MACOSX"):
    ImageFolder(demo)
print(cg.split_image_folder(demo, val_fraction=0.5))

# %% [markdown]
# ## 4. A pretrained model and a new head
#
# ResNet-18 (11.7 million parameters) learned ImageNet's 1,000 classes; its layers before the
# last already turn a photo into 512 numbers that describe it. Replace the last layer, `fc`, by
# one with an output per class of yours. Where the weights cannot be downloaded (this course's
# CI, an offline laptop), `cg.load_pretrained` builds the same network with random weights and
# says so in one line: the code is the same, the accuracies are not fine-tuning's.
#
# `channels_last` (lesson 12) and the precision lesson 06 chooses for this hardware make the
# convolutions use the GPU's tensor cores. The loaders are lesson 05's: DataLoader workers decode
# and augment on the CPU cores while the GPU trains, into pinned memory; the cell measures how
# many images per second they deliver, the most a training epoch can get.

# %%
from torch import nn
from torch.utils.data import DataLoader

cg.seed_everything(0)  # the new head (and, offline, the random backbone) starts the same on every run
model, pretrained = cg.load_pretrained(resnet18, weights)
model.fc = nn.Linear(model.fc.in_features, len(split.classes))  # 512 features -> your classes
model = model.to(device, memory_format=torch.channels_last)
precision = cg.choose_precision(device)
print(f"ResNet-18, {'pretrained on ImageNet' if pretrained else 'random weights'}, "
      f"{sum(p.numel() for p in model.parameters()):,} parameters, head {model.fc}")
print(f"precision: {precision}")

workers = cg.suggest_num_workers().num_workers  # lesson 05: the cores this runtime has, minus one or so
batch_size = min(32, len(split.train))
options = {"num_workers": workers, "pin_memory": on_gpu, "persistent_workers": workers > 0}
train_loader = DataLoader(split.train, batch_size, shuffle=True, **options)
val_loader = DataLoader(split.val, min(batch_size, len(split.val)), **options)
cg.measure_loader(train_loader, device)  # the first epoch starts the workers
pipeline = cg.measure_loader(train_loader, device)
print(f"read + decode + augment + batch in {workers} DataLoader workers: {pipeline:,.0f} images/s")

# %% [markdown]
# ## 5. Train the head, the backbone frozen
#
# A new head starts random; its first gradients are large and, flowing back, would scramble the
# backbone's features. So first train the head alone: `requires_grad = False` on every other
# parameter. Autograd then skips the backbone's backward pass altogether (a step costs little
# more than a forward pass), and the optimizer gets the head's parameters only.
#
# `fit` writes a checkpoint after every epoch (lesson 03): on Colab with Drive mounted,
# `cg.default_checkpoint_dir` is on Drive, so after a disconnect "Run all" resumes where the last
# epoch ended, and a finished `fit` is not trained again (delete the files to start afresh). The
# file names carry the data's name, the image size, `split.fingerprint` (which changes when a
# class, a file name, a file's size or the split does) and whether the backbone was pretrained:
# a new version of your data starts afresh.
#
# **Predict first:** how many times more images per second will an epoch train with the backbone
# frozen than with every layer training (section 6)?

# %%
my_prediction = None  # your guess of the frozen epoch's speed-up, e.g. 2

# %%
for parameter in model.parameters():
    parameter.requires_grad = False  # the backbone keeps what ImageNet taught it
for parameter in model.fc.parameters():
    parameter.requires_grad = True
trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
print(f"training {trainable:,} of {sum(p.numel() for p in model.parameters()):,} parameters")
backbone_before = {name: p.detach().clone() for name, p in model.named_parameters() if not p.requires_grad}
running_mean_before = model.bn1.running_mean.clone()

checkpoints = cg.default_checkpoint_dir("lesson13_checkpoints")
data_name = Path(MY_FOLDER).name if MY_FOLDER else archive.name.split(".")[0]
# The GPU in the name too: a run resumed on another GPU would print the first GPU's images/s as this one's.
hardware = torch.cuda.get_device_name(device).replace(" ", "-") if on_gpu else "cpu"
name = f"{data_name}_{size}px_{split.fingerprint}_{hardware}" + ("" if pretrained else "_random")
head_optimizer = torch.optim.AdamW(model.fc.parameters(), lr=1e-3)
head_history = cg.fit(model, train_loader, val_loader, head_optimizer, device, epochs=3, precision=precision,
                      checkpoint=checkpoints / f"{name}_head.pt", progress=False)

# %%
unchanged = all(torch.equal(p, backbone_before[n]) for n, p in model.named_parameters() if n in backbone_before)
moved = (model.bn1.running_mean - running_mean_before).abs().max().item()
print(f"backbone weights unchanged: {unchanged}; batch norm's running mean moved by up to {moved:.3f}")
assert unchanged

# %% [markdown]
# Freezing stops gradients, not batch norm: in training mode its running statistics still follow
# your images (which usually helps; fast.ai's default even trains its weights). They are buffers,
# not parameters, and `requires_grad` does not touch them.
#
# ## 6. Unfreeze, with a lower learning rate for the backbone
#
# Now every layer trains, in two parameter groups: the backbone with a learning rate ten times
# smaller than the head's, so that it adapts to your images without forgetting what it knows.
# Compare the images per second with section 5's: the backward pass through the backbone, which
# freezing skipped, is most of a step. Where both are close to section 4's loader figure, the GPU
# is waiting on the data instead, and more workers or GPU decoding ("Going further") are the next step.

# %%
for parameter in model.parameters():
    parameter.requires_grad = True
backbone = [p for n, p in model.named_parameters() if not n.startswith("fc.")]
optimizer = torch.optim.AdamW([
    {"params": backbone, "lr": 1e-4},  # small steps: keep the features
    {"params": model.fc.parameters(), "lr": 1e-3},
])
history = cg.fit(model, train_loader, val_loader, optimizer, device, epochs=3, precision=precision,
                 checkpoint=checkpoints / f"{name}_finetune.pt", progress=False)
print(f"images/s per epoch: {head_history.last['samples_per_s']:,.0f} with the backbone frozen, "
      f"{history.last['samples_per_s']:,.0f} training every layer; the loader alone: {pipeline:,.0f}")
frozen_gain = head_history.last["samples_per_s"] / history.last["samples_per_s"]
cg.compare_with_references("13.frozen_epoch_gain", frozen_gain, device, prediction=my_prediction,
                           what="one fine-tuning epoch, backbone frozen vs every layer, speed-up",
                           workload={"data": data_name, "training images": len(split.train),
                                     "pixels": size, "weights": "pretrained" if pretrained else "random"})
print(f"validation accuracy: {head_history.last['test_acc']:.1%} with the head alone, "
      f"{history.last['test_acc']:.1%} after fine-tuning every layer "
      f"({'pretrained' if pretrained else 'random weights: download the weights for the real figures'})")
assert history.last["train_loss"] < head_history.rows[0]["train_loss"]  # six epochs of training brought the loss down

# %% [markdown]
# ## 7. Using the model: one image, a batch, the weights for later
#
# Two switches, every time you predict. `model.eval()` makes batch norm use its running
# statistics (and turns dropout off), so an image's answer does not depend on the other images
# in its batch. `torch.inference_mode()` records nothing for autograd: less memory, less time.
# Open your own image the way training saw its images: `ImageOps.exif_transpose` turns a phone's
# portrait upright, and `.convert("RGB")` gives three channels (a PNG with transparency has four, a
# grayscale photo one). (On Colab, `from google.colab import files; image_path =
# next(iter(files.upload()))` uploads one from your computer.)

# %%
image_path = split.val.dataset.samples[split.val.indices[0]][0]  # or the path of any photo of yours
model.eval()
with torch.inference_mode():
    image = val_transform(upright_rgb(image_path))  # as training saw its images: upright, RGB
    logits = model(image.unsqueeze(0).to(device))  # a batch of one
    probabilities = logits.softmax(dim=1)[0]
    batch = torch.stack([split.val[i][0] for i in range(min(8, len(split.val)))]).to(device)
    batch_logits = model(batch)
print(f"{Path(image_path).name}: {split.classes[probabilities.argmax()]} ({probabilities.max():.0%}); "
      f"true class: {Path(image_path).parent.name}")
# In eval mode an image's answer does not depend on its batch (to 3%: on a GPU another batch size may run other
# convolution algorithms, in TF32 on an A100, L4 or H100)
assert torch.allclose(logits[0], batch_logits[0], rtol=3e-2, atol=3e-2)
assert not logits.requires_grad and logits.is_inference()

predicted, truth = cg.predict(model, val_loader, device)
print(f"the whole validation set: {(predicted == truth).float().mean():.1%} right, {len(truth)} images")

# %% [markdown]
# Save the weights with the class names, written atomically (a disconnect during the write
# leaves the previous file whole). To use them later, build the same architecture, give it the
# same head, then load: in the other order, the head's shapes do not match.

# %%
weights_path = checkpoints / f"{name}_resnet18.pt"
cg.atomic_save({"model": model.state_dict(), "classes": split.classes}, weights_path)

saved = torch.load(weights_path, map_location="cpu")  # weights_only: tensors and a list of names
restored = resnet18(weights=None)
with cg.shows_error(RuntimeError, match="size mismatch for fc.weight",
                    fix="give the model your head first: restored.fc = nn.Linear(512, len(saved['classes']))"):
    restored.load_state_dict(saved["model"])
restored.fc = nn.Linear(restored.fc.in_features, len(saved["classes"]))
restored.load_state_dict(saved["model"])
restored = restored.to(device).eval()
with torch.inference_mode():
    assert torch.allclose(restored(image.unsqueeze(0).to(device)), logits, rtol=3e-2, atol=3e-2)
print(f"saved to {weights_path} ({weights_path.stat().st_size / 1e6:.0f} MB) and loaded again: same answers")

# %% [markdown]
# **Before you stop, on Colab with Drive.** Drive saves what you write in the background, so a
# checkpoint written a moment ago may not be on Drive yet: "a disconnect costs at most one
# epoch" holds once it is. At the end of a session, free the space the checkpoints take if you no
# longer need them (each holds the model, about 45 MB for ResNet-18, and the optimizer's state: a
# run leaves a few hundred MB), then make sure every write has reached Drive. In that order: the
# checkpoints live under the mount, so once Drive is unmounted they are out of reach.
#
# ```python
# from google.colab import drive
# shutil.rmtree(checkpoints)       # first, while Drive is mounted (keep the weights you saved)
# drive.flush_and_unmount()        # then: waits until every write has reached Drive, and unmounts it
# ```
#
# ## Exercise: a data set from a CSV file
#
# Many data sets, most of Kaggle's among them, are one folder of images and a CSV file of labels
# (`file,label`, with a header), not class folders. Write `CsvImages(csv_path, image_dir,
# transform=None)`, a `Dataset` that reads the CSV with Python's `csv` module, keeps the label
# names sorted in `self.classes` (ImageFolder's convention: class index `i` is `classes[i]`), and
# returns `(image, class index)`: the image opened with PIL, upright and RGB (section 3), then
# transformed when a transform is given. `cg.checks.csv_dataset(CsvImages)` writes a small CSV
# data set the way phones and tools save images (a portrait stored sideways with its EXIF tag, a
# PNG with transparency, a grayscale JPEG) and checks every item and a DataLoader batch.

# %%
import csv

from torch.utils.data import Dataset


class CsvImages(Dataset):
    """Images in one folder, their labels in a CSV file with the columns file and label."""

    def __init__(self, csv_path, image_dir, transform=None):
        self.image_dir, self.transform = Path(image_dir), transform
        self.rows = []  # (file name, label name), one per line of the CSV after its header
        self.classes = []

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        file, label = self.rows[index]
        return Image.open(self.image_dir / file), label


# %% tags=["solution"]
class CsvImages(Dataset):
    """Images in one folder, their labels in a CSV file with the columns file and label."""

    def __init__(self, csv_path, image_dir, transform=None):
        self.image_dir, self.transform = Path(image_dir), transform
        with open(csv_path, newline="") as file:
            self.rows = [(row["file"], row["label"]) for row in csv.DictReader(file)]
        self.classes = sorted({label for _, label in self.rows})
        self.class_to_idx = {name: index for index, name in enumerate(self.classes)}

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        file, label = self.rows[index]
        image = upright_rgb(self.image_dir / file)
        return (self.transform(image) if self.transform else image), self.class_to_idx[label]


# %%
cg.checks.csv_dataset(CsvImages)

# %% [markdown]
# ## Summary
#
# - Keep your images as one archive on Drive; `cg.copy_and_extract(archive, "/content/data")` puts
#   them on the runtime's disk once per session instead of a network request per file per epoch.
#   On Kaggle, `/kaggle/input` is already local.
# - Class folders: two `ImageFolder`s over the same files, one per transform, loaded upright and
#   RGB (`ImageOps.exif_transpose(image).convert("RGB")`), split by class with a seeded generator
#   of their own; `cg.split_image_folder(root, train_transform, val_transform, seed=0)` in one call,
#   hidden folders and `__MACOSX` left out. A CSV of labels: a `Dataset` of your own, ten lines.
# - Decode in DataLoader workers; on the GPU (`cg.decode_jpegs(files, "cuda")`, nvJPEG, upright)
#   when the CPU cannot keep up, measured first: a T4 still leaves part of the work to the CPU.
# - Fine-tune: load `weights=...DEFAULT`, replace the head, train it with the backbone frozen
#   (`requires_grad = False`), then every layer with a smaller learning rate for the backbone;
#   channels_last, lesson 06's precision, a checkpoint per epoch on Drive
#   (`drive.flush_and_unmount()` before you stop, so the last one is there).
# - Phone photos: shrink them once after extracting (`exif_transpose`, `Image.draft`,
#   `thumbnail`), or the CPU decoding them starves the GPU.
# - Predict with `model.eval()` and `torch.inference_mode()`; save `state_dict` with the class
#   names, and rebuild the head before loading.

# %% [markdown]
# ## Going further (optional): decoding in CPU workers or on the GPU
#
# Every epoch decodes every JPEG again. DataLoader workers (lesson 05) do it on the CPU cores, in
# parallel with the GPU's work; Colab has two cores. `torchvision.io.decode_jpeg(files,
# device="cuda")` decodes a list with nvJPEG on the GPU instead. (From torchvision 0.29 on,
# TorchCodec's `torchcodec.decoders.decode_jpeg` takes over with the same arguments, and also turns
# photos upright by their EXIF tag; `cg.decode_jpegs` uses whichever this runtime has, upright
# either way.) GPUs with a JPEG engine (A100, H100) decode the whole list in hardware; on a
# T4 the CPU still does a part of each image's work (the Huffman stage), image by image, so
# measure before you move decoding. It pays when the CPU cannot keep up, and only if the
# augmentation that follows runs on the GPU as well (lesson 12).
#
# The cell times decoding alone, on the files' bytes read once: in one CPU process, then on the
# GPU where there is one. Compare with section 4's figure for the whole pipeline (read, decode,
# crop, flip, normalize, batch) in DataLoader workers: per worker, that is fewer images per
# second than decoding alone, since decoding is only a part of each image's work.

# %%
# The files' bytes, read once, so that decoding alone is timed: each file a 1-D uint8 tensor, what
# the decoders take. Real JPEGs only, which start with the bytes FF D8 (a PNG may be named .jpg).
samples = [Path(path) for path, _ in split.train.dataset.samples][:128]
encoded = [torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8) for path in samples]
encoded = [data for data in encoded if data[:2].tolist() == [0xFF, 0xD8]]
chunks = [encoded[i:i + 32] for i in range(0, len(encoded), 32)]  # 32 at a time: a phone photo is 36 MB decoded


def decode_all(where):
    for chunk in chunks:
        cg.decode_jpegs(chunk, where)  # decoded and dropped: only the time counts


if encoded:
    first = cg.decode_jpegs(encoded[:1], device)[0]
    assert first.dtype == torch.uint8 and first.shape[0] == 3 and first.device.type == device.type  # RGB
    print(f"{len(encoded)} JPEG files (the first is {first.shape[2]}x{first.shape[1]} pixels), on {device}")
    on_cpu = cg.benchmark(lambda: decode_all("cpu"), device="cpu", warmup=1, repeat=3)
    print(f"decoding alone, one CPU process:     {len(encoded) / on_cpu.median:8,.0f} images/s")
    gpu_gain = None
    if on_gpu:
        on_device = cg.benchmark(lambda: decode_all(device), device=device, warmup=1, repeat=3)
        gpu_gain = on_cpu.median / on_device.median
        print(f"decoding alone, on the GPU (nvJPEG): {len(encoded) / on_device.median:8,.0f} images/s")
    else:
        print("decoding on the GPU needs a CUDA runtime: run this cell on Colab's T4 to compare")
    cg.compare_with_references("13.gpu_decode_gain", gpu_gain, device,
                               what="decoding JPEG files, GPU vs one CPU process, speed-up",
                               workload={"data": data_name, "JPEG files": len(encoded)})
else:
    print("no JPEG files among these images: the decoding comparison needs some")
