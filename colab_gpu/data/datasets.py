"""Data for the lessons as tensors: images kept as uint8 (N, C, H, W) and converted to normalized float32 once,
which is what a small data set that fits in memory should do (`ImageData`, `make_loaders`).

- `load_digits`: scikit-learn's 1,797 handwritten digits, which ship inside scikit-learn, resized to any image
  shape: the offline stand-in for FashionMNIST and CIFAR-10 (downloads.py).
- `fake_image_data`: random images of a real data set's size, for timing.
- `write_image_folder` writes lesson 13's stand-in for a learner's photos: class folders of real JPEG files.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from ..hardware.device import checked_device

DIGITS_CLASSES = tuple(str(d) for d in range(10))
SHAPES = ("circle", "square", "triangle")  # the classes of write_image_folder's stand-in photos


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (CPU and every GPU); return a seeded generator for loaders.

    Example:
        >>> g = seed_everything(0)
        >>> a = torch.rand(1); _ = seed_everything(0); torch.equal(a, torch.rand(1))
        True

    Taught in lesson 03.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too
    return torch.Generator().manual_seed(seed)


@dataclass
class ImageData:
    """A train/test pair of uint8 image tensors (N, C, H, W) with integer labels. Taught in lesson 03."""

    name: str
    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    classes: tuple[str, ...]
    fallback: bool = False

    def __post_init__(self) -> None:
        for split in ("train", "test"):
            images, labels = getattr(self, f"{split}_images"), getattr(self, f"{split}_labels")
            if images.dtype != torch.uint8 or images.ndim != 4:
                raise ValueError(
                    f"{split} images must be uint8 (N, C, H, W), got {images.dtype} {tuple(images.shape)}."
                )
            if labels.shape != (len(images),):
                raise ValueError(f"{split} labels must have shape ({len(images)},), got {tuple(labels.shape)}.")

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.train_images.shape[1:])

    def limit(self, train: int | None = None, test: int | None = None) -> ImageData:
        """The first ``train``/``test`` samples (smaller problems for CPU runtimes)."""
        return ImageData(
            self.name,
            self.train_images[:train],
            self.train_labels[:train],
            self.test_images[:test],
            self.test_labels[:test],
            self.classes,
            self.fallback,
        )

    def normalization(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel mean and std of the training images, on the 0-1 scale."""
        pixels = self.train_images.float().div(255)
        return pixels.mean(dim=(0, 2, 3)), pixels.std(dim=(0, 2, 3))

    def datasets(self) -> tuple[TensorDataset, TensorDataset]:
        """Train and test sets of normalized float32 images (train statistics for both)."""
        mean, std = self.normalization()

        def scale(images: torch.Tensor) -> torch.Tensor:
            return (images.float().div(255) - mean[:, None, None]) / std[:, None, None]

        return (
            TensorDataset(scale(self.train_images), self.train_labels),
            TensorDataset(scale(self.test_images), self.test_labels),
        )

    def __str__(self) -> str:
        return (
            f"{self.name}: {len(self.train_images)} train / {len(self.test_images)} test images "
            f"of shape {self.image_shape}, {len(self.classes)} classes"
        )


def make_loaders(
    data: ImageData, batch_size: int, *, device: str | torch.device, seed: int = 0, num_workers: int = 0
) -> tuple[DataLoader, DataLoader]:
    """Shuffled train loader and ordered test loader; pinned memory when the device is a GPU. Taught in lesson 03."""
    device = checked_device(device, "cg.make_loaders")
    train_set, test_set = data.datasets()
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    pin = device.type == "cuda"  # pinned pages make non_blocking copies asynchronous
    generator = torch.Generator().manual_seed(seed)
    train = DataLoader(
        train_set, batch_size=batch_size, shuffle=True, generator=generator, num_workers=num_workers, pin_memory=pin
    )
    test = DataLoader(test_set, batch_size=max(batch_size, 512), num_workers=num_workers, pin_memory=pin)
    return train, test


def fake_image_data(n: int, shape: tuple[int, ...], classes: int = 10, seed: int = 0) -> TensorDataset:
    """Random images and labels of a real data set's size, for the bench's rows and the tests (they time speed, not
    learning; lesson 05 builds the same with ``TensorDataset``)."""
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, *shape, generator=g), torch.randint(0, classes, (n,), generator=g))


def load_digits(image_size: int = 8, channels: int = 1) -> ImageData:
    """scikit-learn's 8x8 digits, resized to ``image_size`` and repeated to ``channels`` (uint8).

    Taught in lesson 08.
    """
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as err:
        raise ImportError(
            "The offline data set (scikit-learn's digits) needs scikit-learn: "
            "pip install scikit-learn (Colab has it already)."
        ) from err

    bunch = sklearn_digits()
    images = torch.from_numpy(bunch.images).float().unsqueeze(1) / 16.0  # values 0..16
    images = F.interpolate(images, size=(image_size, image_size), mode="bilinear", align_corners=False)
    images = images.clamp(0, 1).mul(255).round().to(torch.uint8).repeat(1, channels, 1, 1)
    labels = torch.from_numpy(bunch.target).long()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    images, labels = images[order], labels[order]
    split = int(0.8 * len(labels))
    return ImageData(
        "digits (scikit-learn)",
        images[:split],
        labels[:split],
        images[split:],
        labels[split:],
        DIGITS_CLASSES,
        fallback=True,
    )


def _draw_shape(image, shape: str, rng: random.Random) -> None:
    from PIL import ImageDraw

    size = image.width
    r = rng.uniform(0.18, 0.32) * size
    cx, cy = rng.uniform(r, size - r), rng.uniform(r, size - r)
    color = tuple(rng.randint(0, 255) for _ in range(3))
    draw = ImageDraw.Draw(image)
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color, outline="white", width=max(1, size // 48))
    elif shape == "square":
        draw.rectangle((cx - r, cy - r, cx + r, cy + r), fill=color, outline="white", width=max(1, size // 48))
    else:
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=color, outline="white")


def write_image_folder(
    root: str | os.PathLike, *, per_class: int = 40, size: int = 64, seed: int = 0, quality: int = 90
) -> Path:
    """Write a stand-in for your photos: ``root/<shape>/<n>.jpg``, real JPEG files of a circle, a square or a
    triangle drawn onto crops of scikit-learn's two sample photographs. Returns ``root``. Lesson 13."""
    from PIL import Image

    try:
        from sklearn.datasets import load_sample_images
    except ImportError as err:
        raise ImportError(
            "The stand-in images need scikit-learn's sample photos: pip install scikit-learn "
            "(Colab and Kaggle have it)."
        ) from err
    if per_class < 2 or size < 16:
        raise ValueError(f"write_image_folder needs per_class >= 2 and size >= 16, got {per_class} and {size}.")
    photos = [Image.fromarray(array) for array in load_sample_images().images]
    rng, root = random.Random(seed), Path(root)
    for shape in SHAPES:
        (root / shape).mkdir(parents=True, exist_ok=True)
        for n in range(per_class):
            photo = rng.choice(photos)
            side = rng.randint(min(size, *photo.size), min(photo.size))  # a window of random size
            x, y = rng.randint(0, photo.width - side), rng.randint(0, photo.height - side)
            image = photo.crop((x, y, x + side, y + side)).resize((size, size), Image.BILINEAR)
            _draw_shape(image, shape, rng)
            image.save(root / shape / f"{n:04d}.jpg", quality=quality)
    return root


def repeated(data: ImageData, train: int, test: int | None = None) -> ImageData:
    """``data`` with its training images repeated to ``train`` (and its test images to ``test``), in order: an offline
    stand-in at a real data set's size, for timings and epochs that are a learner's. Fewer: unchanged."""

    def grown(images: torch.Tensor, labels: torch.Tensor, size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        if size is None or size <= len(images):
            return images, labels
        index = torch.arange(size) % len(images)
        return images[index], labels[index]

    train_images, train_labels = grown(data.train_images, data.train_labels, train)
    test_images, test_labels = grown(data.test_images, data.test_labels, test)
    if len(train_images) == len(data.train_images) and len(test_images) == len(data.test_images):
        return data
    name = data.name.split(", repeated to")[0]
    return ImageData(
        f"{name}, repeated to {len(train_images):,} training / {len(test_images):,} test images",
        train_images,
        train_labels,
        test_images,
        test_labels,
        data.classes,
        data.fallback,
    )


def cifar_sized(data: ImageData, images: int) -> ImageData:
    """``data`` with its training images repeated to ``images`` (an offline fallback timed at CIFAR-10's size)."""
    return repeated(data, images)
