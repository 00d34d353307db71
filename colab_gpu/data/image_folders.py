"""Your images as a data set (lesson 13): a folder of class folders split the same way on every run, loaded upright,
and JPEG files decoded on the CPU or the GPU.

- `split_image_folder` loads ``root/<class>/<image>`` with ``ImageFolder`` and splits it the same way on every run,
  class by class, with a transform for each part; `load_upright` opens each image the way its EXIF tag says.
- `decode_jpegs` decodes JPEG bytes on the CPU or, on a CUDA device, with nvJPEG, turned upright with the one
  EXIF table here (`turn_upright`).
"""

from __future__ import annotations

import copy
import hashlib
import io
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.utils.data import Subset

from ..hardware.device import checked_device
from .archives import folder_listing

if TYPE_CHECKING:
    from PIL import Image

EXIF_ORIENTATION = 0x0112  # the EXIF tag that says how the camera was held


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
        raise FileNotFoundError(f"No folder at {root}. {folder_listing(root.parent)}")
    # torchvision is the lessons' extra, not the package's dependency: imported when a folder is loaded
    from .visible_image_folder import VisibleImageFolder

    train_folder = VisibleImageFolder(str(root), transform=train_transform, loader=load_upright)
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
    device = checked_device(device, "cg.decode_jpegs")
    if not encoded:
        raise ValueError("decode_jpegs got no images: pass a list of files' bytes as 1-D uint8 tensors (read_bytes).")
    for index, data in enumerate(encoded):
        if not (isinstance(data, torch.Tensor) and data.dtype == torch.uint8 and data.ndim == 1):
            raise TypeError(
                f"decode_jpegs: image {index} is not a file's bytes as a 1-D uint8 tensor (got {type(data).__name__}"
                f"{'' if not isinstance(data, torch.Tensor) else f' {data.dtype} {tuple(data.shape)}'}): read each "
                "file with torchvision.io.read_file(path)."
            )
        if data.numel() < 2 or data[0].item() != 0xFF or data[1].item() != 0xD8:  # every JPEG starts FF D8
            start = " ".join(f"{b:02x}" for b in data[:4].tolist())
            raise ValueError(
                f"decode_jpegs: image {index} is not a JPEG file (it starts with {start or 'nothing'}, a JPEG with "
                "ff d8): convert PNG and other formats to JPEG first, or decode them with PIL."
            )
    return _jpeg_decoder()(list(encoded), mode="RGB", device=device)
