"""Checks of data exercises: the learner's Dataset run on files written the way phones and tools save them
(lesson 13)."""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from .core import CheckResult, fail, ok

EXIF_ORIENTATION = 0x0112
# (file, label, what it tests): a portrait stored sideways with its EXIF tag (upright it is 48 wide, 24 high, its
# left half red), a PNG with transparency (4 channels), a grayscale JPEG (1 channel), a plain RGB JPEG.
CSV_ROWS = [("sideways.jpg", "dog"), ("transparent.png", "cat"), ("gray.jpg", "dog"), ("plain.jpg", "bird")]
UPRIGHT_SIZE = (48, 24)  # PIL's (width, height) of sideways.jpg once turned upright


def write_csv_dataset(folder: Path) -> tuple[Path, Path]:
    """Write lesson 13's CSV exercise data under ``folder``: ``labels.csv`` (header ``file,label``) and ``images/``."""
    from PIL import Image

    images = folder / "images"
    images.mkdir(parents=True, exist_ok=True)
    upright = Image.new("RGB", UPRIGHT_SIZE, (0, 0, 255))
    upright.paste((255, 0, 0), (0, 0, UPRIGHT_SIZE[0] // 2, UPRIGHT_SIZE[1]))
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = 6  # "turn 90 degrees clockwise to view": what a phone held upright writes
    upright.transpose(Image.Transpose.ROTATE_90).save(images / "sideways.jpg", exif=exif, quality=95)
    Image.new("RGBA", (24, 24), (0, 160, 0, 128)).save(images / "transparent.png")
    Image.new("L", (24, 24), 90).save(images / "gray.jpg")
    Image.new("RGB", (24, 24), (200, 200, 0)).save(images / "plain.jpg")
    labels = folder / "labels.csv"
    with open(labels, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["file", "label"])
        writer.writerows(CSV_ROWS)
    return labels, images


def _as_chw(image: object) -> torch.Tensor | None:
    """A PIL image or a (C, H, W) tensor as a uint8-or-float (C, H, W) tensor; None for anything else."""
    from torchvision.transforms.v2 import functional

    if isinstance(image, torch.Tensor):
        return image if image.ndim == 3 else None
    try:
        return functional.pil_to_tensor(image)
    except TypeError:
        return None


def _item_problem(dataset: object, index: int, classes: list[str]) -> str | None:
    """What is wrong with ``dataset[index]`` (None when nothing is)."""
    file, label = CSV_ROWS[index]
    item = dataset[index]
    if not (isinstance(item, tuple) and len(item) == 2):
        return f"dataset[{index}] should be (image, class index), got {type(item).__name__}."
    image, target = item
    if isinstance(target, torch.Tensor) and target.ndim == 0 and not target.is_floating_point():
        target = int(target)  # a 0-d integer tensor batches as well as an int
    if not isinstance(target, int) or target != classes.index(label):
        return (
            f"dataset[{index}]'s label should be {classes.index(label)}, the index of {label!r} in "
            f"self.classes, as an int; got {target!r}."
        )
    pixels = _as_chw(image)
    if pixels is None:
        return f"dataset[{index}]'s image should be a PIL image or a (C, H, W) tensor, got {type(image).__name__}."
    if pixels.shape[0] != 3:
        return (
            f"{file} came out with {pixels.shape[0]} channel(s): .convert('RGB') after opening (a PNG with "
            "transparency has 4, a grayscale photo 1)."
        )
    if file == "sideways.jpg":
        height, width = pixels.shape[1:]
        if (width, height) != UPRIGHT_SIZE:
            return (
                f"{file} is {width}x{height}, lying on its side: phones store portraits sideways with an EXIF "
                "tag; ImageOps.exif_transpose(image) turns them upright."
            )
        left = pixels[:, height // 2, 2].float() / (255 if pixels.dtype == torch.uint8 else 1)
        if not (left[0] > 0.6 and left[2] < 0.4):
            return f"{file} is upright but mirrored or upside down: use ImageOps.exif_transpose, not a rotation."
    return None


def csv_dataset(dataset_class: object) -> CheckResult:
    """Check lesson 13's ``dataset_class(csv_path, image_dir, transform=None)``: on a CSV (header ``file,label``,
    class names as labels) of images saved the way phones and tools save them (a portrait stored sideways with
    its EXIF tag, a PNG with transparency, a grayscale JPEG), every item is ``(image, class index)``, the image
    upright and RGB, ``classes`` are the names sorted, and with a transform a DataLoader batches them.
    Taught in lesson 13."""
    from torchvision.transforms import v2

    if not isinstance(dataset_class, type):
        return fail(f"pass your class (CsvImages, not CsvImages(...)), got {type(dataset_class).__name__}.")
    expected = sorted({label for _, label in CSV_ROWS})
    with tempfile.TemporaryDirectory() as folder:
        labels, images = write_csv_dataset(Path(folder))
        try:
            dataset = dataset_class(labels, images)
            if len(dataset) != len(CSV_ROWS):
                return fail(
                    f"len(dataset) is {len(dataset)} for a CSV of {len(CSV_ROWS)} rows "
                    "after its header: one item per row."
                )
            if list(getattr(dataset, "classes", [])) != expected:
                return fail(
                    f"dataset.classes should be the label names sorted, {expected} "
                    f"(ImageFolder's convention), got {getattr(dataset, 'classes', None)}."
                )
            for index in range(len(CSV_ROWS)):
                problem = _item_problem(dataset, index, expected)
                if problem:
                    return fail(problem)
            resized = v2.Compose(
                [v2.ToImage(), v2.Resize((16, 16), antialias=True), v2.ToDtype(torch.float32, scale=True)]
            )
            transformed = dataset_class(labels, images, resized)
            first = transformed[0][0]
            if not isinstance(first, torch.Tensor) or tuple(first.shape) != (3, 16, 16):
                return fail(
                    "given a transform, dataset[0]'s image came out "
                    f"{tuple(first.shape) if isinstance(first, torch.Tensor) else type(first).__name__}, not the "
                    "transform's (3, 16, 16): apply self.transform to the image in __getitem__ when it is set."
                )
            batch, targets = next(iter(DataLoader(transformed, batch_size=4)))
        except Exception as err:  # the learner's code: any error is a hint, not a crash of the notebook
            return fail(f"your data set raised {type(err).__name__}: {err}")
    if tuple(batch.shape) != (4, 3, 16, 16):
        return fail(
            f"with a transform, a batch of 4 should be (4, 3, 16, 16), got "
            f"{tuple(batch.shape)}: apply self.transform to the image when it is set."
        )
    return ok(
        f"{len(CSV_ROWS)} images read from a CSV: upright, RGB, labelled by sorted class name "
        f"{expected}; a DataLoader batches them {tuple(batch.shape)}."
    )
