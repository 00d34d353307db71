"""Your own images on a GPU runtime (lesson 13): one archive copied to local disk, a folder of class folders,
a reproducible split, and JPEG decoding on the CPU or the GPU.

- `copy_and_extract` copies one archive (from Drive, say) to the runtime's disk and extracts it, with progress
  bars: one large read instead of a network round trip per small file.
- `time_file_reads` measures reading a folder file by file (or one file), so the two can be compared.
- `split_image_folder` loads ``root/<class>/<image>`` with ``ImageFolder`` and splits it the same way on every run,
  class by class, with a transform for each part.
- `decode_jpegs` decodes JPEG bytes on the CPU or, on a CUDA device, with nvJPEG.
"""

from __future__ import annotations

import copy
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.utils.data import Subset

if TYPE_CHECKING:
    from PIL import Image

IGNORED_FOLDERS = ("__MACOSX",)  # macOS's zip metadata; names starting with "." are ignored too
_CHUNK = 8 << 20  # copy 8 MiB at a time
PROGRESS_FROM_MB = 50
EXIF_ORIENTATION = 0x0112  # the EXIF tag that says how the camera was held


def _ignored(name: str) -> bool:
    # ".." is not hidden: a member that climbs out of the folder must reach the check that refuses it
    return (name.startswith(".") and name not in (".", "..")) or name in IGNORED_FOLDERS


def _any_ignored(member: str) -> bool:
    return any(_ignored(part) for part in Path(member).parts)


def _listing(folder: Path) -> str:
    if not folder.is_dir():
        return f"{folder} does not exist either."
    names = sorted(p.name for p in folder.iterdir())
    return f"{folder} holds {names[:12]}{' ...' if len(names) > 12 else ''}."


def _progress(total: int, desc: str, unit: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B", disable=not enabled, leave=False)


def archive_name(archive: str | os.PathLike) -> str:
    """``my_photos`` for ``my_photos.zip`` (or .tar, .tar.gz, .tgz): the folder `copy_and_extract` writes. Lesson 13."""
    archive = Path(archive)
    for suffix in (".tar.gz", ".tgz", ".tar", ".zip"):
        if archive.name.lower().endswith(suffix):
            return archive.name[: -len(suffix)]
    return archive.stem


def _copy(source: Path, target: Path, progress: bool) -> None:
    with (
        open(source, "rb") as src,
        open(target, "wb") as dst,
        _progress(source.stat().st_size, f"copy {source.name}", "B", progress) as bar,
    ):
        while chunk := src.read(_CHUNK):
            dst.write(chunk)
            bar.update(len(chunk))


def _extract(archive: Path, target: Path, progress: bool) -> None:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zipped:  # ZipFile.extract drops ".." and absolute parts of names
            members = [m for m in zipped.infolist() if not _any_ignored(m.filename)]
            for member in _progress_over(members, archive, progress):
                zipped.extract(member, target)
        return
    with tarfile.open(archive) as tarred:
        members = [m for m in tarred.getmembers() if m.name and not _any_ignored(m.name)]
        for member in _progress_over(members, archive, progress):
            if hasattr(tarfile, "data_filter"):  # refuses links and paths that leave target
                tarred.extract(member, target, filter="data")
            elif (target / member.name).resolve().is_relative_to(target.resolve()) and not member.issym():
                tarred.extract(member, target)
            else:
                raise ValueError(f"{archive} holds {member.name!r}, which would be written outside {target}.")


def _progress_over(members: list, archive: Path, progress: bool):
    with _progress(len(members), f"extract {archive.name}", "file", progress) as bar:
        for member in members:
            yield member
            bar.update(1)


def _content_root(folder: Path) -> Path:
    # An archive of a folder (my_photos.zip holding my_photos/cats/...) has one folder at the top: the class
    # folders are one level down.
    entries = [p for p in folder.iterdir() if not _ignored(p.name)]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else folder


def copy_and_extract(
    archive: str | os.PathLike, destination: str | os.PathLike, *, progress: bool | None = None
) -> Path:
    """Copy ``archive`` (.zip, .tar, .tar.gz) to ``destination`` on this runtime's disk, extract it, and return the
    folder that holds its class folders. Taught in lesson 13.

    One large sequential read of the archive replaces a network round trip per file on Google Drive. The
    extraction happens in a hidden folder that is renamed when complete: an interrupted run leaves no half tree.
    Run again with the same archive (same size and time), it returns the extracted folder without copying.
    macOS's ``__MACOSX`` folder and hidden files are left out (``ImageFolder`` would take them for classes).
    ``progress`` shows progress bars; by default for archives of ``PROGRESS_FROM_MB`` and more (a few seconds).
    """
    archive, destination = Path(archive), Path(destination)
    if not archive.is_file():
        raise FileNotFoundError(
            f"No archive at {archive}. {_listing(archive.parent)} On Colab, mount Drive first "
            "(from google.colab import drive; drive.mount('/content/drive')) and check the path."
        )
    if not (zipfile.is_zipfile(archive) or tarfile.is_tarfile(archive)):
        raise ValueError(
            f"{archive} is not a .zip or .tar(.gz) archive: make one with "
            "shutil.make_archive(name, 'zip', folder) or zip -r name.zip folder."
        )
    target = destination / archive_name(archive)
    marker = target / ".extracted_from"
    stamp = f"{archive.resolve()} {archive.stat().st_size} {archive.stat().st_mtime_ns}"
    if marker.is_file() and marker.read_text() == stamp:
        return _content_root(target)
    if progress is None:
        progress = archive.stat().st_size >= PROGRESS_FROM_MB * 1e6
    destination.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".extracting-", dir=destination) as scratch:
        local, tree = Path(scratch) / archive.name, Path(scratch) / "tree"
        _copy(archive, local, progress)
        tree.mkdir()
        _extract(local, tree, progress)
        if not any(tree.iterdir()):
            raise ValueError(f"{archive} holds no files (hidden files and __MACOSX are left out).")
        (tree / ".extracted_from").write_text(stamp)
        if target.exists():
            shutil.rmtree(target)  # an older extraction of another version of the archive
        tree.rename(target)
    return _content_root(target)


@dataclass(frozen=True)
class FileReads:
    """What `time_file_reads` measured: how many files, how many bytes, in how many seconds. Lesson 13."""

    files: int
    bytes: int
    seconds: float

    @property
    def files_per_s(self) -> float:
        return self.files / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds

    def __str__(self) -> str:
        return (
            f"{self.files:,} files, {self.bytes / 1e6:.1f} MB in {self.seconds:.3f} s "
            f"({self.files_per_s:,.0f} files/s, {self.mb_per_s:,.1f} MB/s)"
        )


def time_file_reads(path: str | os.PathLike, *, limit: int | None = None) -> FileReads:
    """Open and read every file under ``path`` (or the one file ``path``), at most ``limit`` files. Lesson 13.

    Hidden files and ``__MACOSX`` are left out, as `copy_and_extract` and `split_image_folder` leave them out.
    Files read recently come from the operating system's cache: the first read of files on Drive is the
    figure that costs a training epoch, later ones measure the cache."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Nothing at {path}. {_listing(path.parent)}")
    files = (
        [path]
        if path.is_file()
        else sorted(p for p in path.rglob("*") if p.is_file() and not _any_ignored(str(p.relative_to(path))))[:limit]
    )
    if not files:
        raise ValueError(f"{path} holds no files to read.")
    start, total = time.perf_counter(), 0
    for file in files:
        with open(file, "rb") as f:
            total += len(f.read())
    return FileReads(len(files), total, time.perf_counter() - start)


@dataclass
class FolderSplit:
    """The two parts of an image folder (``Subset`` s of ``ImageFolder`` s) and its classes. Lesson 13."""

    train: Subset
    val: Subset
    classes: list[str]

    def __str__(self) -> str:
        return (
            f"{len(self.classes)} classes {self.classes[:10]}: {len(self.train):,} training and "
            f"{len(self.val):,} validation images"
        )

    @property
    def fingerprint(self) -> str:
        """8 hex digits that change when a class, a file name, a file's size or the split changes: put it in
        checkpoint names, so that training on a new version of the data starts afresh instead of resuming."""
        folder = self.train.dataset
        digest = hashlib.sha256("\n".join(self.classes).encode())
        digest.update(f"\nvalidation {self.val.indices}".encode())
        for path, _ in folder.samples:
            digest.update(f"\n{os.path.relpath(path, folder.root)} {os.path.getsize(path)}".encode())
        return digest.hexdigest()[:8]


def load_upright(path: str) -> Image.Image:
    """Open an image as RGB, turned the way its EXIF orientation tag says: phones store portraits sideways with a
    tag, and ``ImageFolder``'s default loader ignores it. `split_image_folder` loads with it. Lesson 13."""
    from PIL import Image, ImageOps

    with open(path, "rb") as file, Image.open(file) as image:
        return ImageOps.exif_transpose(image).convert("RGB")


def _visible_image_folder() -> type:
    # Made on first use (colab_gpu imports without torchvision) and kept as a module attribute, so that DataLoader
    # workers started by spawn or forkserver (macOS, Windows, Python 3.14) can unpickle the data set.
    made = globals().get("VisibleImageFolder")
    if made is not None:
        return made
    from torchvision.datasets import ImageFolder

    class VisibleImageFolder(ImageFolder):
        """ImageFolder without hidden folders (.ipynb_checkpoints) and macOS's __MACOSX as classes."""

        def find_classes(self, directory):
            classes = sorted(e.name for e in os.scandir(directory) if e.is_dir() and not _ignored(e.name))
            if not classes:
                raise FileNotFoundError(
                    f"No class folders in {directory}: {_listing(Path(directory))} ImageFolder "
                    "expects root/<class>/<image>.jpg, one folder per class."
                )
            return classes, {name: i for i, name in enumerate(classes)}

    VisibleImageFolder.__qualname__ = VisibleImageFolder.__name__
    globals()["VisibleImageFolder"] = VisibleImageFolder
    return VisibleImageFolder


def __getattr__(name: str):
    if name == "VisibleImageFolder":
        return _visible_image_folder()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def split_indices(targets: list[int], val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Training and validation indices, the same fraction of every class, the same on every run (a seeded
    CPU generator). Lesson 13."""
    if not 0 < val_fraction < 1:
        raise ValueError(
            f"val_fraction must be between 0 and 1 (0.2 keeps a fifth for validation), got {val_fraction}."
        )
    generator = torch.Generator().manual_seed(seed)
    by_class: dict[int, list[int]] = {}
    for index, target in enumerate(targets):
        by_class.setdefault(target, []).append(index)
    train, val = [], []
    for target, indices in sorted(by_class.items()):
        if len(indices) < 2:
            raise ValueError(f"class {target} has {len(indices)} image: each class needs at least 2 for a split.")
        order = [indices[i] for i in torch.randperm(len(indices), generator=generator).tolist()]
        n_val = min(max(1, round(len(indices) * val_fraction)), len(indices) - 1)
        val += order[:n_val]
        train += order[n_val:]
    return sorted(train), sorted(val)


def split_image_folder(
    root: str | os.PathLike,
    train_transform: Callable | None = None,
    val_transform: Callable | None = None,
    *,
    val_fraction: float = 0.2,
    seed: int = 0,
) -> FolderSplit:
    """``root/<class>/<image>`` as a training and a validation part with their own transforms. Lesson 13.

    Two ``ImageFolder`` s over the same files, one per transform (``random_split`` of one data set would give
    both parts the same transform), indexed by `split_indices`. Hidden folders and ``__MACOSX`` are not classes;
    images are loaded upright (`load_upright`).
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"No folder at {root}. {_listing(root.parent)}")
    train_folder = _visible_image_folder()(str(root), transform=train_transform, loader=load_upright)
    val_folder = copy.copy(train_folder)  # same files and classes, its own transform
    val_folder.transform = val_transform
    train, val = split_indices(train_folder.targets, val_fraction, seed)
    return FolderSplit(Subset(train_folder, train), Subset(val_folder, val), list(train_folder.classes))


def exif_orientation(data: torch.Tensor) -> int:
    """The EXIF orientation tag (1-8, 1 when absent) of a JPEG file's bytes, read from its header. Lesson 13."""
    from PIL import Image

    if b"Exif\x00\x00" not in data[:65536].numpy().tobytes():  # EXIF sits in the first 64 KiB, if anywhere
        return 1
    with Image.open(io.BytesIO(data.numpy().tobytes())) as image:  # reads the header, decodes nothing
        return int(image.getexif().get(EXIF_ORIENTATION, 1))


_ROWS_COLS = (-2, -1)
_TURNS: dict[int, Callable[[torch.Tensor], torch.Tensor]] = {  # EXIF orientation -> what makes the image upright
    2: lambda x: x.flip(-1),  # mirrored
    3: lambda x: x.rot90(2, _ROWS_COLS),
    4: lambda x: x.flip(-2),
    5: lambda x: x.transpose(-2, -1),
    6: lambda x: x.rot90(-1, _ROWS_COLS),  # the phone was held upright: turn a quarter clockwise
    7: lambda x: x.transpose(-2, -1).flip(_ROWS_COLS),
    8: lambda x: x.rot90(1, _ROWS_COLS),
}


def turn_upright(image: torch.Tensor, orientation: int) -> torch.Tensor:
    """A decoded (C, H, W) image turned the way EXIF ``orientation`` says (what PIL's ``ImageOps.exif_transpose``
    does), on whatever device it is. Lesson 13."""
    turn = _TURNS.get(orientation)
    return image if turn is None else turn(image).contiguous()


def _jpeg_decoder() -> Callable:
    try:  # TorchCodec supersedes torchvision's decoders (deprecated from torchvision 0.29); same call
        from torchcodec.decoders import decode_jpeg

        return decode_jpeg
    except (ImportError, OSError, RuntimeError):  # not installed, or its libraries do not load on this runtime
        from torchvision.io import ImageReadMode
        from torchvision.io import decode_jpeg as torchvision_decode_jpeg

        def decode_jpeg(data, *, mode, device):
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "The image decoding", DeprecationWarning)
                images = torchvision_decode_jpeg(data, mode=ImageReadMode[mode], device=device)
            # TorchCodec turns images upright as their EXIF tag says; torchvision's apply_exif_orientation
            # does it on the CPU only, so the tag is read here and applied on the images' device
            return [turn_upright(image, exif_orientation(raw)) for image, raw in zip(images, data, strict=True)]

        return decode_jpeg


def decode_jpegs(encoded: list[torch.Tensor], device: str | torch.device) -> list[torch.Tensor]:
    """Decode JPEG files' bytes (1-D uint8 CPU tensors) into upright RGB uint8 (3, H, W) images on ``device``.
    Taught in lesson 13.

    On a CUDA device nvJPEG decodes the list: in one batch on GPUs with a JPEG engine (A100, H100); on others
    (a T4) the CPU still does part of each image's work. Uses TorchCodec's ``decode_jpeg`` where it is installed,
    else torchvision's (deprecated from torchvision 0.29 in TorchCodec's favour)."""
    if not encoded:
        raise ValueError("decode_jpegs got no images: pass a list of torchvision.io.read_file(path) tensors.")
    return _jpeg_decoder()(list(encoded), mode="RGB", device=torch.device(device))


def read_bytes(path: str | os.PathLike) -> torch.Tensor:
    """A file's bytes as a 1-D uint8 CPU tensor, what `decode_jpegs` takes. Lesson 13."""
    return torch.frombuffer(bytearray(Path(path).read_bytes()), dtype=torch.uint8)
