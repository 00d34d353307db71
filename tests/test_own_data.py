"""Lesson 13: your own images (archives, image folders, the split, JPEG decoding) and fine-tuning helpers."""

import io
import pickle
import socket
import sys
import tarfile
import types
import urllib.error
import zipfile
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageOps
from torch import nn
from torchvision.transforms.v2.functional import pil_to_tensor

import colab_gpu as cg
from colab_gpu import bench
from colab_gpu.bench import pipelines
from colab_gpu.checks.core import HINT
from colab_gpu.data import archives, image_folders

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return cg.write_image_folder(tmp_path_factory.mktemp("data") / "shapes", per_class=6, size=32)


def zipped(folder, target, extra: dict[str, bytes] | None = None):
    """A zip of ``folder`` (as its top folder) plus ``extra`` members, the way a Mac or a script makes one."""
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.rglob("*")):
            archive.write(path, f"{folder.name}/{path.relative_to(folder)}")
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return target


def test_write_image_folder_writes_real_jpegs_per_class_the_same_every_time(shapes, tmp_path):
    assert sorted(p.name for p in shapes.iterdir()) == list(cg.data.datasets.SHAPES)
    files = sorted(shapes.rglob("*.jpg"))
    assert len(files) == 18
    with Image.open(files[0]) as picture:
        assert picture.format == "JPEG" and picture.size == (32, 32) and picture.mode == "RGB"
    again = cg.write_image_folder(tmp_path / "again", per_class=6, size=32)
    assert all(a.read_bytes() == (again / a.relative_to(shapes)).read_bytes() for a in files)
    with pytest.raises(ValueError, match="per_class >= 2"):
        cg.write_image_folder(tmp_path / "x", per_class=1)


def test_copy_and_extract_returns_the_class_folders_without_mac_litter(shapes, tmp_path):
    archive = zipped(
        shapes, tmp_path / "my_photos.zip", {"__MACOSX/shapes/._0000.jpg": b"x", "shapes/circle/.DS_Store": b"x"}
    )
    root = cg.copy_and_extract(archive, tmp_path / "local")
    assert root == tmp_path / "local" / "my_photos" / "shapes"
    assert sorted(p.name for p in root.iterdir()) == list(cg.data.datasets.SHAPES)
    assert not (tmp_path / "local" / "my_photos" / "__MACOSX").exists() and not (root / "circle" / ".DS_Store").exists()
    assert cg.time_file_reads(root).bytes == cg.time_file_reads(shapes).bytes
    assert [p.name for p in (tmp_path / "local").iterdir()] == ["my_photos"]  # no scratch folder left behind


def test_copy_and_extract_skips_an_archive_it_extracted_and_redoes_a_changed_one(shapes, tmp_path, monkeypatch):
    archive = zipped(shapes, tmp_path / "shapes.zip")
    root = cg.copy_and_extract(archive, tmp_path / "local")
    monkeypatch.setattr(archives, "_copy", lambda *args: pytest.fail("copied an archive that was extracted"))
    assert cg.copy_and_extract(archive, tmp_path / "local") == root
    monkeypatch.undo()
    (root / "circle" / "0000.jpg").unlink()
    zipped(shapes, archive, {"shapes/notes.txt": b"new version"})  # same name, other content
    root = cg.copy_and_extract(archive, tmp_path / "local")
    assert (root / "notes.txt").exists() and (root / "circle" / "0000.jpg").exists()


def test_an_interrupted_extraction_leaves_no_half_tree(shapes, tmp_path, monkeypatch):
    archive = zipped(shapes, tmp_path / "shapes.zip")

    def disconnect(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(archives, "_extract", disconnect)
    with pytest.raises(KeyboardInterrupt):
        cg.copy_and_extract(archive, tmp_path / "local")
    assert list((tmp_path / "local").iterdir()) == []


def test_copy_and_extract_reads_tar_gz_and_keeps_members_inside(shapes, tmp_path):
    archive = tmp_path / "shapes.tar.gz"
    with tarfile.open(archive, "w:gz") as tarred:
        tarred.add(shapes, arcname="shapes")
    assert sorted(p.name for p in cg.copy_and_extract(archive, tmp_path / "a").iterdir()) == list(
        cg.data.datasets.SHAPES
    )
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tarred:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tarred.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(Exception, match="outside|escaped"):
        cg.copy_and_extract(evil, tmp_path / "b" / "deep")
    assert not list(tmp_path.rglob("escaped.txt"))


def test_copy_and_extract_says_what_is_wrong_with_the_archive(tmp_path):
    (tmp_path / "photos.zip.part").write_bytes(b"partial")
    with pytest.raises(FileNotFoundError, match=r"No archive at .*photos.zip.*photos.zip.part.*mount Drive"):
        cg.copy_and_extract(tmp_path / "photos.zip", tmp_path / "local")
    with pytest.raises(ValueError, match="not a .zip or .tar"):
        cg.copy_and_extract(tmp_path / "photos.zip.part", tmp_path / "local")
    assert archives.archive_name("a/my_photos.tar.gz") == "my_photos" and archives.archive_name("b.zip") == "b"


def test_time_file_reads_counts_files_and_bytes(shapes, tmp_path):
    reads = cg.time_file_reads(shapes)
    assert reads.files == 18 and reads.bytes == sum(p.stat().st_size for p in shapes.rglob("*.jpg"))
    assert reads.files_per_s > 0 and "18 files" in str(reads)
    assert cg.time_file_reads(shapes, limit=5).files == 5
    assert cg.time_file_reads(next(shapes.rglob("*.jpg"))).files == 1
    (shapes / ".DS_Store").write_bytes(b"Finder")  # hidden files are not the data set's
    try:
        assert cg.time_file_reads(shapes).files == 18
    finally:
        (shapes / ".DS_Store").unlink()
    with pytest.raises(FileNotFoundError, match="Nothing at"):
        cg.time_file_reads(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no files"):
        cg.time_file_reads(tmp_path / "empty")


def test_split_indices_are_stratified_disjoint_and_reproducible():
    targets = [0] * 10 + [1] * 5 + [2] * 2
    train, val = image_folders.split_indices(targets, 0.2, seed=0)
    assert sorted(train + val) == list(range(17))
    assert [sum(targets[i] == c for i in val) for c in range(3)] == [2, 1, 1]  # every class, at least one
    assert image_folders.split_indices(targets, 0.2, seed=0) == (train, val)
    assert image_folders.split_indices(targets, 0.2, seed=1) != (train, val)
    with pytest.raises(ValueError, match="class 1 has 1 image"):
        image_folders.split_indices([0, 0, 1], 0.5, seed=0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        image_folders.split_indices(targets, 20, seed=0)


def test_split_image_folder_gives_each_part_its_transform_and_skips_hidden_folders(shapes):
    (shapes / ".ipynb_checkpoints").mkdir(exist_ok=True)
    try:
        split = cg.split_image_folder(shapes, lambda image: "train", lambda image: "val", val_fraction=0.5)
    finally:
        (shapes / ".ipynb_checkpoints").rmdir()
    assert split.classes == list(cg.data.datasets.SHAPES) and (len(split.train), len(split.val)) == (9, 9)
    assert split.train[0][0] == "train" and split.val[0][0] == "val"
    assert not set(split.train.indices) & set(split.val.indices)
    assert "3 classes" in str(split)


def test_split_image_folder_pickles_for_spawned_workers(shapes):
    # spawn and forkserver (macOS, Windows, Python 3.14) send the data set to each DataLoader worker by pickle
    split = cg.split_image_folder(shapes, val_fraction=0.5)
    again = pickle.loads(pickle.dumps(split.train))
    assert type(again.dataset).__name__ == "VisibleImageFolder" and again.indices == split.train.indices
    assert again[0][0].size == split.train[0][0].size


def test_images_are_loaded_upright_as_their_exif_tag_says(tmp_path):
    folder = tmp_path / "photos"
    (folder / "portrait").mkdir(parents=True)
    (folder / "landscape").mkdir()
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: the camera was turned, show the stored image rotated by 90 degrees
    for name in ("a", "b"):
        Image.new("RGB", (40, 20), "red").save(folder / "portrait" / f"{name}.jpg", exif=exif)
        Image.new("RGB", (40, 20), "blue").save(folder / "landscape" / f"{name}.jpg")
    split = cg.split_image_folder(folder, val_fraction=0.5)
    sizes = {split.classes[label]: image.size for image, label in [*split.train, *split.val]}
    assert sizes == {"portrait": (20, 40), "landscape": (40, 20)}  # PIL's (width, height)
    decoded = cg.decode_jpegs([archives.read_bytes(folder / "portrait" / "a.jpg")], "cpu")[0]
    assert decoded.shape == (3, 40, 20)  # decoded upright too: (channels, height, width)


#: Orientations whose stored image is turned: 6 and 8 (a phone held upright, either way) give the same shape, so only
#: the content tells them apart.
MARKED_ORIENTATIONS = (1, 3, 6, 8)
_STORED_AS = {  # how a camera stores an upright image under each orientation tag (the inverse of the tag's turn)
    1: lambda image: image,
    3: lambda image: image.rot90(2, (-2, -1)),
    6: lambda image: image.rot90(1, (-2, -1)),
    8: lambda image: image.rot90(-1, (-2, -1)),
}


def marked_photo(orientation: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the upright image, its JPEG stored turned with EXIF ``orientation``): 32 px high, 16 wide, grey with a red
    top-left corner, in flat 8 px blocks at full colour resolution, so that the JPEG decodes to nearly its pixels."""
    upright = torch.full((3, 32, 16), 128, dtype=torch.uint8)
    upright[:, :8, :8] = torch.tensor([220, 30, 30], dtype=torch.uint8)[:, None, None]
    exif = Image.Exif()
    exif[image_folders.EXIF_ORIENTATION] = orientation
    stored = Image.fromarray(_STORED_AS[orientation](upright).permute(1, 2, 0).numpy())
    buffer = io.BytesIO()
    stored.save(buffer, "JPEG", quality=95, subsampling=0, exif=exif)
    return upright, torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def full_colour_jpeg(path: Path) -> torch.Tensor:
    """The JPEG at ``path`` encoded again at 4:4:4 (no chroma subsampling), as bytes."""
    buffer = io.BytesIO()
    with Image.open(path) as picture:
        picture.save(buffer, "JPEG", quality=95, subsampling=0)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def mean_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.cpu().int() - b.cpu().int()).abs().float().mean().item()


@pytest.mark.parametrize("orientation", MARKED_ORIENTATIONS)
def test_photos_are_decoded_upright_by_content_not_only_by_shape(orientation, tmp_path):
    upright, data = marked_photo(orientation)
    (tmp_path / "photo.jpg").write_bytes(data.numpy().tobytes())
    decoded = cg.decode_jpegs([data], "cpu")[0]
    loaded = pil_to_tensor(image_folders.load_upright(str(tmp_path / "photo.jpg")))
    for image in (decoded, loaded):  # the CPU decoder and the PIL loader: the red corner back at the top left
        assert image.shape == upright.shape and mean_difference(image, upright) < 1
    half_turn = upright.rot90(2, (-2, -1))  # what 6 read as 8 (or 3 as 1) gives: the same shape
    assert mean_difference(half_turn, upright) > 20  # and this check would see it


@pytest.mark.parametrize("orientation", range(1, 9))
def test_turn_upright_turns_as_pillow_does(orientation, tmp_path):
    pixels = torch.randint(0, 256, (3, 4, 6), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    exif = Image.Exif()
    exif[image_folders.EXIF_ORIENTATION] = orientation
    path = tmp_path / "photo.png"  # lossless, so the two turns must agree exactly
    Image.fromarray(pixels.permute(1, 2, 0).numpy()).save(path, exif=exif)
    with Image.open(path) as picture:
        expected = pil_to_tensor(ImageOps.exif_transpose(picture))
    assert torch.equal(image_folders.turn_upright(pixels, orientation), expected)


def test_exif_orientation_reads_the_tag_or_says_1(tmp_path):
    exif = Image.Exif()
    exif[image_folders.EXIF_ORIENTATION] = 8
    Image.new("RGB", (8, 8)).save(tmp_path / "turned.jpg", exif=exif)
    Image.new("RGB", (8, 8)).save(tmp_path / "plain.jpg")
    assert image_folders.exif_orientation(archives.read_bytes(tmp_path / "turned.jpg")) == 8
    assert image_folders.exif_orientation(archives.read_bytes(tmp_path / "plain.jpg")) == 1


def test_the_fingerprint_changes_with_the_data_only(shapes, tmp_path):
    import shutil

    copy = shutil.copytree(shapes, tmp_path / "copy")
    first = cg.split_image_folder(copy).fingerprint
    assert len(first) == 8 and cg.split_image_folder(copy).fingerprint == first
    assert cg.split_image_folder(copy, seed=1).fingerprint != first  # another split: another run
    assert cg.split_image_folder(shapes).fingerprint == first  # the same files elsewhere: the same data
    shutil.copy(copy / "circle" / "0000.jpg", copy / "circle" / "extra.jpg")
    assert cg.split_image_folder(copy).fingerprint != first


def test_split_image_folder_says_where_the_class_folders_are_not(tmp_path):
    with pytest.raises(FileNotFoundError, match="No folder at"):
        cg.split_image_folder(tmp_path / "missing")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"No class folders .*a.jpg.*root/<class>/<image>"):
        cg.split_image_folder(tmp_path / "flat")


def test_decode_jpegs_matches_pillow_on_the_cpu(shapes):
    path = next(shapes.rglob("*.jpg"))
    decoded = cg.decode_jpegs([archives.read_bytes(path)] * 2, "cpu")
    with Image.open(path) as picture:
        pillow = pil_to_tensor(picture.convert("RGB"))
    assert len(decoded) == 2 and decoded[0].dtype == torch.uint8 and decoded[0].shape == (3, 32, 32)
    assert (decoded[0].int() - pillow.int()).abs().float().mean() < 2  # two libjpeg builds: near, maybe not equal
    with pytest.raises(ValueError, match="no images"):
        cg.decode_jpegs([], "cpu")


def test_decode_jpegs_prefers_torchcodec_and_passes_the_device(monkeypatch, fake_gpus):
    fake_gpus()
    calls = []
    decoders = types.ModuleType("torchcodec.decoders")
    decoders.decode_jpeg = lambda data, *, mode, device: calls.append((len(data), mode, device)) or ["image"]
    monkeypatch.setitem(sys.modules, "torchcodec", types.ModuleType("torchcodec"))
    monkeypatch.setitem(sys.modules, "torchcodec.decoders", decoders)
    jpeg_start = torch.tensor([0xFF, 0xD8, 0xFF, 0xE0], dtype=torch.uint8)  # what every JPEG file starts with
    assert cg.decode_jpegs([jpeg_start] * 3, "cuda") == ["image"]
    assert calls == [(3, "RGB", torch.device("cuda", 0))]  # one call for the whole list: nvJPEG decodes it at once


def test_decode_jpegs_falls_back_to_torchvision_when_torchcodec_does_not_load(monkeypatch, shapes):
    class Broken(types.ModuleType):
        def __getattr__(self, name):
            raise OSError("Could not load this library: libtorchcodec_image.so")

    monkeypatch.setitem(sys.modules, "torchcodec", types.ModuleType("torchcodec"))
    monkeypatch.setitem(sys.modules, "torchcodec.decoders", Broken("torchcodec.decoders"))
    assert cg.decode_jpegs([archives.read_bytes(next(shapes.rglob("*.jpg")))], "cpu")[0].shape == (3, 32, 32)


def test_load_pretrained_falls_back_to_random_weights_in_one_line(capsys):
    timeouts = []

    def offline(weights=None, num_classes=1000):
        timeouts.append(socket.getdefaulttimeout())
        if weights is not None:
            raise urllib.error.URLError("[Errno -2] Name or service not known")
        return nn.Linear(2, num_classes)

    previous = socket.getdefaulttimeout()
    model, pretrained = cg.load_pretrained(offline, "Weights.DEFAULT", num_classes=3)
    assert not pretrained and model.out_features == 3 and timeouts[0] == cg.data.downloads.DOWNLOAD_TIMEOUT_S
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no internet access" in out and "random weights" in out
    assert socket.getdefaulttimeout() == previous
    model, pretrained = cg.load_pretrained(lambda weights=None: nn.Linear(2, 2), "Weights.DEFAULT")
    assert pretrained and capsys.readouterr().out == ""


def test_offline_load_pretrained_asks_for_no_download_and_says_so_in_one_line(monkeypatch, tmp_path, capsys):
    from torchvision.models import ResNet18_Weights, resnet18

    def no_network(address, *args, **kwargs):
        raise OSError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(socket, "create_connection", no_network)  # offline: the probe and any download fail
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))  # nothing in torch's hub cache
    model, pretrained = cg.load_pretrained(resnet18, ResNet18_Weights.DEFAULT)
    out, err = capsys.readouterr()
    assert not pretrained and model.fc.out_features == 1000
    assert "Downloading" not in out + err and err == "" and out.count("\n") == 1  # no download started
    assert "ResNet18_Weights.IMAGENET1K_V1 could not be loaded (this runtime has no internet access)" in out
    assert "resnet18 starts from random weights here" in out


def test_offline_load_pretrained_still_loads_weights_in_torchs_hub_cache(monkeypatch, tmp_path, capsys):
    asked = []

    class Weights:
        url = "https://download.pytorch.org/models/tiny-0123abcd.pth"

    monkeypatch.setattr(cg.train.finetune, "host_reachable", lambda host, timeout_s=5.0: asked.append(host) or False)
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "tiny-0123abcd.pth").write_bytes(b"")  # downloaded in an earlier session
    model, pretrained = cg.load_pretrained(lambda weights=None: nn.Linear(2, 2), Weights)
    assert pretrained and asked == [] and capsys.readouterr().out == ""


def test_finetune_transforms_make_normalized_images_of_the_size(shapes):
    train, val = cg.train.finetune.finetune_transforms(24, flip=False)
    with Image.open(next(shapes.rglob("*.jpg"))) as picture:
        for transform in (train, val):
            image = transform(picture)
            assert image.dtype == torch.float32 and image.shape == (3, 24, 24) and image.min() < 0
    assert "Flip" not in repr(train) and "Flip" in repr(cg.train.finetune.finetune_transforms(24)[0])


def test_the_bench_row_times_a_finetuning_epoch_on_jpeg_files():
    row = pipelines.finetune_epoch_row(CPU)
    assert row.key == "finetune" and row.status == "ok" and row.unit == "images/s" and row.ratio > 0
    assert row.details["images"] == 93 and row.details["size"] == 64 and row.details["epoch_s"] > 0
    assert "finetune" in bench.EXPERIMENTS


def lesson_csv_classes() -> tuple[type, type]:
    """Lesson 13's exercise: the CsvImages it starts with and its worked solution, run from the lesson's cells."""
    import jupytext

    cells = jupytext.read(Path(__file__).resolve().parents[1] / "notebooks" / "13_own_data.py").cells
    solution = next(i for i, c in enumerate(cells) if "solution" in c.metadata.get("tags", []))
    helper = next(c.source for c in cells if "def upright_rgb(" in c.source)
    upright = helper[helper.index("def upright_rgb(") : helper.index("\n\n\ndef stratified_split")]
    classes = []
    for cell in (cells[solution - 1], cells[solution]):
        namespace = {"Path": Path, "Image": Image, "ImageOps": ImageOps}
        exec(compile(upright, "13_own_data.py", "exec"), namespace)
        exec(compile(cells[solution - 1].source, "13_own_data.py", "exec"), namespace)  # imports, starting class
        exec(compile(cell.source, "13_own_data.py", "exec"), namespace)
        classes.append(namespace["CsvImages"])
    return classes[0], classes[1]


def test_check_csv_dataset_fails_as_the_lesson_starts_and_passes_its_solution(capsys):
    starting, solved = lesson_csv_classes()
    assert not cg.checks.csv_dataset(starting)
    assert "len(dataset) is 0" in capsys.readouterr().out
    assert cg.checks.csv_dataset(solved)
    assert "upright, RGB" in capsys.readouterr().out


def test_check_csv_dataset_names_each_mistake(capsys):
    _, solved = lesson_csv_classes()

    class Sideways(solved):  # PIL's open alone: the EXIF tag ignored
        def __getitem__(self, index):
            file, label = self.rows[index]
            image = Image.open(self.image_dir / file).convert("RGB")
            return (self.transform(image) if self.transform else image), self.class_to_idx[label]

    class FourChannels(solved):  # upright, but the PNG keeps its alpha channel
        def __getitem__(self, index):
            file, label = self.rows[index]
            with Image.open(self.image_dir / file) as image:
                image = ImageOps.exif_transpose(image)
            return (self.transform(image) if self.transform else image), self.class_to_idx[label]

    class Unsorted(solved):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.classes = list(dict.fromkeys(label for _, label in self.rows))  # in order of appearance

    class NamesAsLabels(solved):
        def __getitem__(self, index):
            return super().__getitem__(index)[0], self.rows[index][1]

    class NoTransform(solved):
        def __getitem__(self, index):
            file, label = self.rows[index]
            return image_folders.load_upright(self.image_dir / file), self.class_to_idx[label]

    class TensorLabels(solved):  # a 0-d integer tensor label batches as well as an int: accepted (issue 51)
        def __getitem__(self, index):
            image, label = super().__getitem__(index)
            return image, torch.tensor(label)

    for wrong, hint in (
        (Sideways, "lying on its side"),
        (FourChannels, "4 channel(s)"),
        (Unsorted, "the label names sorted"),
        (NamesAsLabels, "index of"),
        (NoTransform, "apply self.transform to the image in __getitem__"),
        (solved.__init__, "pass your class"),
    ):
        assert not cg.checks.csv_dataset(wrong)
        out = capsys.readouterr().out
        assert HINT in out and hint in out, out
    assert cg.checks.csv_dataset(TensorLabels)


@pytest.mark.gpu
def test_gpu_decoding_matches_the_cpu_and_turns_photos_upright(shapes):
    device = cg.get_device("cuda")
    # 4:4:4: JPEG leaves how 4:2:0 colour is upsampled to the decoder, and nvJPEG and libjpeg-turbo differ there
    # (a mean of 4.3 on these sharp 32 px shapes); at full colour resolution they differ only in rounding
    photos = [full_colour_jpeg(path) for path in sorted(shapes.rglob("*.jpg"))[:8]]
    upright = {orientation: marked_photo(orientation) for orientation in MARKED_ORIENTATIONS}
    encoded = photos + [data for _, data in upright.values()]
    on_gpu, on_cpu = cg.decode_jpegs(encoded, device), cg.decode_jpegs(encoded, "cpu")
    assert all(image.device.type == "cuda" for image in on_gpu)
    for gpu, cpu in zip(on_gpu, on_cpu, strict=True):
        assert gpu.shape == cpu.shape and mean_difference(gpu, cpu) < 1.5
    for (original, _), gpu in zip(upright.values(), on_gpu[len(photos) :], strict=True):
        assert gpu.shape == original.shape and mean_difference(gpu, original) < 1  # upright by content


@pytest.mark.gpu
def test_the_bench_row_on_a_real_gpu():
    device = cg.get_device("cuda")
    row = pipelines.finetune_epoch_row(device)
    assert row.status == "ok" and row.details["size"] == 224 and row.details["precision"] in ("bf16", "fp16")
