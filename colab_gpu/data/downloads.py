"""FashionMNIST and CIFAR-10 through torchvision, kept where the next lesson finds them, with an offline fallback.

On Colab the real data sets download (``download=True``) into `data_dir`: the course's folder on Google Drive when
Drive is mounted, else ``data`` beside the notebook. Where nothing can be downloaded (CI, an offline laptop) the
loaders fall back to scikit-learn's digits (data.py's `load_digits`), resized to the real data set's image shape so
the same models train on it, and on a GPU repeated to the real data set's size, so that an offline GPU node (the GPU
suite's) runs a learner's epochs and timings. One printed line says when that happens. A maintainer's copy of the data
sets in torchvision's layout is used, with no download, from the folder ``COLAB_GPU_DATA`` names.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
from pathlib import Path

import torch

from .datasets import ImageData, load_digits, repeated

FASHION_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


FASHION_SIZES = (60_000, 10_000)  # training and test images
CIFAR10_SIZES = (50_000, 10_000)

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


DOWNLOAD_TIMEOUT_S = 30


# Each Colab notebook runs on a machine of its own: a data set in one lesson's runtime is not in the next one's.
# A mounted Google Drive is, for every lesson and session: the loaders keep the course's data sets there.
DRIVE_DATA = Path("/content/drive/MyDrive/colab_gpu/data")


_OFFLINE_SIGNS = (
    "urlopen error",
    "name or service not known",
    "temporary failure in name resolution",
    "network is unreachable",
    "no route to host",
    "connection refused",
    "nodename nor servname",
)


def download_problem(error: BaseException) -> str:
    """What went wrong with a download, in words a learner reads: no internet, a timeout, or the error's last line."""
    text = str(error).strip()
    if isinstance(error, TimeoutError) or "timed out" in text.lower():
        return "the download timed out"
    if any(sign in text.lower() for sign in _OFFLINE_SIGNS):
        return "this runtime has no internet access"
    return f"the download failed: {text.splitlines()[-1][:120] if text else type(error).__name__}"


def host_reachable(host: str, timeout_s: float = 5.0) -> bool:
    """Whether this runtime can open a connection to ``host`` (port 443, HTTPS) within ``timeout_s``: offline, the
    answer comes in seconds, where a download would retry or print that it started. Lessons 13 and 14."""
    try:
        socket.create_connection((host, 443), timeout=timeout_s).close()
        return True
    except OSError:
        return False


@contextlib.contextmanager
def download_timeout(seconds: float = DOWNLOAD_TIMEOUT_S):
    """Give every socket opened inside the block ``seconds`` to answer (an unreachable server must not hang a
    lesson), then restore the previous default. Data sets (lessons 03-04) and pretrained weights (lesson 13)."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


STAND_IN_NOTE = "so this lesson uses a stand-in"  # the GPU suite reads it in a lesson's output (nbtools.data_used)
DATA_ENV = "COLAB_GPU_DATA"  # a folder that already holds the data sets (torchvision's layout): used, not downloaded


def data_dir() -> Path:
    """Where the loaders keep the data sets by default: the folder ``COLAB_GPU_DATA`` names (a maintainer's copy,
    used as it is: the GPU suite's ``--data DIR``); else the course's folder on Google Drive when Drive is mounted
    (``/content/drive``, Colab), downloaded once for every lesson and session; else ``data`` in the working
    directory, which goes with the runtime. Taught in lesson 03."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    return DRIVE_DATA if DRIVE_DATA.parent.parent.is_dir() else Path("data")


def _network_trouble(error: BaseException) -> bool:
    """Whether ``error`` is the network's (offline, a timeout, a refused or failed connection), not the data's."""
    text = str(error).lower()
    return isinstance(error, (TimeoutError, ConnectionError)) or any(
        sign in text for sign in (*_OFFLINE_SIGNS, "timed out", "urlopen", "http error", "connection")
    )


def _download_or_fallback(
    load, name: str, root, image_size: int, channels: int, sizes: tuple[int, int], folder: str
) -> ImageData:
    """The data set ``load`` reads (downloading it unless ``COLAB_GPU_DATA`` provides it), else the digits stand-in:
    on a GPU repeated to the real data set's ``sizes`` (train, test), so every epoch and timing is a learner's. A
    copy in ``root/folder`` that cannot be read is named as damaged, with what to delete."""
    download = not os.environ.get(DATA_ENV)
    root = data_dir() if root is None else root
    chatter = io.StringIO()  # torchvision prints every mirror it tries; keep the notebook readable
    try:
        with download_timeout(), contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
            data = load(Path(root), download)
        print(f"{name} loaded from {root}/.")
        return data
    except (RuntimeError, OSError, ValueError) as err:
        copy = Path(root) / folder
        damaged = copy.is_dir() and (not download or not _network_trouble(err))
        if damaged:  # a half-extracted or half-downloaded copy: it stays broken until deleted
            problem = (
                f"the copy in {copy} is damaged: {(str(err).strip().splitlines() or [type(err).__name__])[-1][:120]}."
                f" Delete that folder and rerun: the data set is then {'downloaded' if download else 'looked for'} "
                "again"
            )
        else:
            problem = download_problem(err) if download else f"it is not in {DATA_ENV}={root}"
        digits = load_digits(image_size, channels)
        real_size = torch.cuda.is_available()  # a CPU runtime trains on a slice anyway
        if real_size:
            digits = repeated(digits, *sizes)
        print(
            f"{name} could not be downloaded ({problem}), {STAND_IN_NOTE}: scikit-learn's "
            f"handwritten digits, resized to {channels}x{image_size}x{image_size}"
            + (f" and repeated to {name}'s size ({sizes[0]:,} training, {sizes[1]:,} test images)" if real_size else "")
            + ": the same code and steps, other accuracy figures."
        )
        return digits


def _fashion_mnist(root: Path, download: bool = True) -> ImageData:
    from torchvision.datasets import FashionMNIST

    train = FashionMNIST(root, train=True, download=download)
    test = FashionMNIST(root, train=False, download=download)
    return ImageData(
        "FashionMNIST",
        train.data.unsqueeze(1),
        train.targets.long(),
        test.data.unsqueeze(1),
        test.targets.long(),
        FASHION_CLASSES,
    )


def _cifar10(root: Path, download: bool = True) -> ImageData:
    from torchvision.datasets import CIFAR10

    train = CIFAR10(root, train=True, download=download)
    test = CIFAR10(root, train=False, download=download)

    def images(ds) -> torch.Tensor:  # stored as (N, H, W, C) numpy
        return torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()

    return ImageData(
        "CIFAR-10",
        images(train),
        torch.tensor(train.targets),
        images(test),
        torch.tensor(test.targets),
        CIFAR10_CLASSES,
    )


def load_fashion_mnist(root: str | os.PathLike | None = None) -> ImageData:
    """FashionMNIST (1x28x28), downloaded into ``root`` (by default `data_dir`) if needed; digits when offline.
    Taught in lesson 03."""
    return _download_or_fallback(
        _fashion_mnist, "FashionMNIST", root, 28, 1, sizes=FASHION_SIZES, folder="FashionMNIST"
    )


def load_cifar10(root: str | os.PathLike | None = None) -> ImageData:
    """CIFAR-10 (3x32x32), downloaded into ``root`` (by default `data_dir`) if needed; digits when offline.
    Taught in lesson 04."""
    return _download_or_fallback(_cifar10, "CIFAR-10", root, 32, 3, sizes=CIFAR10_SIZES, folder="cifar-10-batches-py")
