"""Data helpers: the real torchvision loading code on tiny files in the real on-disk formats."""

import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from torchvision.datasets import CIFAR10

import colab_gpu as cg
from colab_gpu.data import datasets as data
from colab_gpu.data import downloads


def write_idx(path, array: np.ndarray) -> None:
    """IDX format (MNIST/FashionMNIST): magic with dtype 0x08 (ubyte) and ndim, big-endian sizes."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def tiny_fashion(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 12), ("t10k", 5)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", np.arange(n) % 10)
    return tmp_path


@pytest.fixture
def tiny_cifar(tmp_path, monkeypatch):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    names = [name for name, _ in CIFAR10.train_list] + [name for name, _ in CIFAR10.test_list]
    for name in names:
        batch = {"data": rng.integers(0, 256, (4, 3072), dtype=np.uint8), "labels": [1, 2, 3, 9]}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": list(downloads.CIFAR10_CLASSES)}))
    # torchvision checks the real files' MD5 sums; tiny stand-ins cannot match them.
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda path, md5=None: True)
    return tmp_path


def test_fashion_mnist_from_real_format_files(tiny_fashion, capsys):
    ds = cg.load_fashion_mnist(tiny_fashion)
    assert not ds.fallback and ds.name == "FashionMNIST"
    assert ds.train_images.shape == (12, 1, 28, 28) and ds.train_images.dtype == torch.uint8
    assert ds.test_labels.tolist() == [0, 1, 2, 3, 4]
    assert ds.classes[9] == "Ankle boot"
    assert "FashionMNIST loaded from" in capsys.readouterr().out


def test_cifar10_from_real_format_files(tiny_cifar):
    ds = cg.load_cifar10(tiny_cifar)
    assert not ds.fallback and ds.image_shape == (3, 32, 32)
    assert len(ds.train_images) == 20 and len(ds.test_images) == 4
    assert ds.train_labels[:4].tolist() == [1, 2, 3, 9]


def test_offline_falls_back_to_digits_with_one_line(tmp_path, monkeypatch, capsys):
    def offline(*args, **kwargs):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\n<urlopen error no network>")

    monkeypatch.setattr(downloads, "_fashion_mnist", offline)
    ds = cg.load_fashion_mnist(tmp_path)
    assert ds.fallback and ds.image_shape == (1, 28, 28)
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        "FashionMNIST could not be downloaded (this runtime has no internet access), so this lesson uses a "
        "stand-in: scikit-learn's handwritten digits, resized to 1x28x28: the same code and steps, other accuracy "
        "figures."
    ]
    assert len(ds.train_images) + len(ds.test_images) == 1797  # a CPU runtime trains on a slice anyway


@pytest.mark.parametrize(
    ("load", "name", "sizes"),
    [("fashion_mnist", "FashionMNIST", (60_000, 10_000)), ("cifar10", "CIFAR-10", (50_000, 10_000))],
)
def test_an_offline_gpu_gets_a_stand_in_of_the_real_data_sets_size(tmp_path, monkeypatch, capsys, load, name, sizes):
    """Issue 50: the H100 runs trained lesson 04 on 1,437 images, where a T4 learner trains on 50,000."""

    def offline(*args, **kwargs):
        raise OSError("[Errno 101] Network is unreachable")

    monkeypatch.setattr(downloads, f"_{load}", offline)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    ds = getattr(cg, f"load_{load}")(tmp_path)
    assert ds.fallback and (len(ds.train_images), len(ds.test_images)) == sizes
    assert torch.equal(ds.train_images[1437], ds.train_images[0])  # the digits, repeated in order
    out = capsys.readouterr().out
    assert f"repeated to {name}'s size ({sizes[0]:,} training, {sizes[1]:,} test images)" in out
    assert f"repeated to {sizes[0]:,} training / {sizes[1]:,} test images" in ds.name


def test_a_maintainers_data_folder_is_used_without_a_download(tiny_cifar, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(downloads.DATA_ENV, str(tiny_cifar))
    assert cg.data_dir() == tiny_cifar
    assert not cg.load_cifar10().fallback
    monkeypatch.setenv(downloads.DATA_ENV, str(tmp_path / "empty"))
    ds = cg.load_cifar10()  # not there: the stand-in, and no download tried
    assert ds.fallback and f"it is not in COLAB_GPU_DATA={tmp_path / 'empty'}" in capsys.readouterr().out


def test_repeated_grows_train_and_test_and_keeps_a_large_enough_set():
    digits = data.load_digits(8, 1)
    grown = data.repeated(digits, 3000, 1000)
    assert (len(grown.train_images), len(grown.test_images)) == (3000, 1000)
    assert torch.equal(grown.test_labels[len(digits.test_labels)], digits.test_labels[0])
    assert data.repeated(digits, 10) is digits
    assert data.repeated(grown, 6000).name.count("repeated to") == 1


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            RuntimeError("Error downloading x.gz:\n<urlopen error [Errno -2] Name or service not known>"),
            "this runtime has no internet access",
        ),
        (OSError("[Errno 101] Network is unreachable"), "this runtime has no internet access"),
        (TimeoutError("timed out"), "the download timed out"),
        (RuntimeError("File not found or corrupted.\nMD5 mismatch"), "the download failed: MD5 mismatch"),
    ],
)
def test_download_problem_in_plain_words(error, said):
    assert downloads.download_problem(error) == said


def test_digits_fallback_is_the_real_data_set():
    ds = data.load_digits(image_size=32, channels=3)
    assert len(ds.train_images) + len(ds.test_images) == 1797
    assert ds.image_shape == (3, 32, 32) and set(ds.train_labels.tolist()) == set(range(10))
    assert torch.equal(ds.train_images[:, 0], ds.train_images[:, 2])  # grey repeated to RGB


def test_datasets_are_normalized_float():
    ds = data.load_digits(image_size=8, channels=1)
    train, test = ds.datasets()
    x, y = train.tensors
    assert x.dtype == torch.float32 and abs(x.mean().item()) < 1e-3 and abs(x.std().item() - 1) < 1e-2
    assert len(test) == len(ds.test_labels)


def test_limit_and_str():
    ds = data.load_digits(image_size=8, channels=1).limit(train=100, test=10)
    assert len(ds.train_images) == 100 and len(ds.test_labels) == 10
    assert "100 train / 10 test" in str(ds)


def test_bad_shapes_are_rejected():
    images = torch.zeros(4, 1, 8, 8, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"train labels must have shape \(4,\), got \(4, 1\)"):
        data.ImageData("x", images, torch.zeros(4, 1), images, torch.zeros(4), ("a", "b"))
    with pytest.raises(ValueError, match=r"test images must be uint8 \(N, C, H, W\), got torch.float32"):
        data.ImageData("x", images, torch.zeros(4), images.float(), torch.zeros(4), ("a", "b"))


def test_make_loaders():
    ds = data.load_digits(image_size=8, channels=1)
    train, test = cg.make_loaders(ds, 32, device="cpu")
    x, y = next(iter(train))
    assert x.shape == (32, 1, 8, 8) and y.shape == (32,) and not train.pin_memory
    assert test.batch_size >= 32
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        cg.make_loaders(ds, 0, device="cpu")


def test_loaders_pin_memory_for_gpu_training(fake_gpus):
    fake_gpus()
    train, _ = cg.make_loaders(data.load_digits(image_size=8, channels=1), 32, device="cuda")
    assert train.pin_memory


def test_seed_everything_makes_runs_repeatable():
    cg.seed_everything(3)
    a = (torch.rand(2), np.random.rand())
    g = cg.seed_everything(3)
    assert torch.equal(a[0], torch.rand(2)) and a[1] == np.random.rand()
    assert isinstance(g, torch.Generator)


def test_data_sets_go_to_drive_when_it_is_mounted(tmp_path, monkeypatch):
    data_module = downloads
    drive_data = tmp_path / "drive" / "MyDrive" / "colab_gpu" / "data"
    monkeypatch.setattr(data_module, "DRIVE_DATA", drive_data)
    assert cg.data_dir() == Path("data")  # no Drive mounted: beside the notebook, gone with the runtime
    (tmp_path / "drive" / "MyDrive").mkdir(parents=True)
    assert cg.data_dir() == drive_data  # mounted: one copy for every lesson and session

    roots = []

    def fake_cifar10(root, download=True):
        roots.append(root)
        return cg.load_digits(32, 3)

    monkeypatch.setattr(data_module, "_cifar10", fake_cifar10)
    cg.load_cifar10()
    cg.load_cifar10("elsewhere")
    assert roots == [drive_data, Path("elsewhere")]


def test_a_half_extracted_copy_is_named_as_damaged_with_the_folder_to_delete(tmp_path, monkeypatch, capsys):
    # Issue 63: a half-extracted FashionMNIST said "could not be downloaded (shape ... is invalid)", and every later
    # lesson used the stand-in, with no word to delete the damaged copy.
    (tmp_path / "FashionMNIST" / "raw").mkdir(parents=True)

    def half_extracted(*args, **kwargs):
        raise RuntimeError("shape '[60000, 28, 28]' is invalid for input of size 1234567")

    monkeypatch.setattr(downloads, "_fashion_mnist", half_extracted)
    assert cg.load_fashion_mnist(tmp_path).fallback
    out = capsys.readouterr().out
    assert f"the copy in {tmp_path / 'FashionMNIST'} is damaged: shape '[60000, 28, 28]' is invalid" in out
    assert "Delete that folder and rerun: the data set is then downloaded again" in out
    assert "so this lesson uses a stand-in" in out  # the GPU suite reads it
    monkeypatch.setenv(downloads.DATA_ENV, str(tmp_path))  # a maintainer's copy, damaged: not "it is not in"
    cg.load_fashion_mnist()
    out = capsys.readouterr().out
    assert "is damaged" in out and "it is not in" not in out
