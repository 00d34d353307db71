"""Augmentation for lesson 12's ladder: per image on the CPU (the seeds' way), per batch on the device.

- `per_sample_flip` flips each image of a batch with its own coin (lesson 05), on the images' device.
- `random_crop` pads a batch and cuts every image at its own random offset, in one indexing operation.
- `CpuAugmentedImages` is the seeds' data set: torchvision v2 transforms on one image at a time.
- `AugmentedDeviceLoader` batches uint8 images that live on the device, crops and flips them there.
- `FlipAveraged` averages the logits of each image and its mirror (test-time augmentation).
- `evaluation_loader`: the test images on the device, normalized, not augmented (every rung is evaluated on it).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset

from .datasets import ImageData
from .loaders import DeviceLoader


def per_sample_flip(images: torch.Tensor, p: float = 0.5, generator: torch.Generator | None = None) -> torch.Tensor:
    """Flip each image of a batch horizontally with probability ``p``, independently per image.

    torchvision's v2 random transforms draw one decision per call, so on a batch every image is
    flipped, or none is. This draws one decision per image, on the images' device.

    Taught in lesson 05.
    """
    if not 0 <= p <= 1:
        raise ValueError(f"p must be a probability between 0 and 1, got {p}.")
    flip = torch.rand(len(images), device=images.device, generator=generator) < p
    return torch.where(flip.view(-1, *([1] * (images.ndim - 1))), images.flip(-1), images)


def random_crop(images: torch.Tensor, padding: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Pad a batch by ``padding`` pixels (reflecting the border) and cut each image back to its size at its own
    random offset: CIFAR-10's standard crop augmentation, for the whole batch in one indexing operation.

    Works on uint8 or float batches (N, C, H, W) on any device. Taught in lesson 12.
    """
    if images.ndim != 4:
        raise ValueError(f"random_crop takes a batch (N, C, H, W), got shape {tuple(images.shape)}.")
    if padding < 0 or padding >= min(images.shape[-2:]):
        raise ValueError(f"padding must be between 0 and {min(images.shape[-2:]) - 1}, got {padding}.")
    n, c, h, w = images.shape
    padded = torch.nn.functional.pad(
        images.float() if images.dtype == torch.uint8 else images, (padding,) * 4, mode="reflect"
    ).to(images.dtype)  # reflect needs floats
    dy, dx = torch.randint(0, 2 * padding + 1, (2, n, 1), device=images.device, generator=generator)
    rows = (dy + torch.arange(h, device=images.device))[:, None, :, None]  # (N, 1, H, 1)
    cols = (dx + torch.arange(w, device=images.device))[:, None, None, :]  # (N, 1, 1, W)
    batch = torch.arange(n, device=images.device)[:, None, None, None]
    channel = torch.arange(c, device=images.device)[None, :, None, None]
    return padded[batch, channel, rows, cols]


class CpuAugmentedImages(Dataset):
    """The seeds' data set: each image cropped, flipped and normalized on the CPU, one at a time (lesson 12)."""

    def __init__(
        self, images: torch.Tensor, labels: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, padding: int = 4
    ):
        from torchvision.transforms import v2

        self.images, self.labels = images, labels
        self.transform = v2.Compose(
            [
                v2.RandomCrop(images.shape[-1], padding=padding, padding_mode="reflect"),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(mean.tolist(), std.tolist()),
            ]
        )

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int):
        return self.transform(self.images[index]), self.labels[index]


class AugmentedDeviceLoader:
    """`DeviceLoader` batches of uint8 images, cropped and flipped per image on the device, then normalized."""

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        batch_size: int,
        *,
        device: torch.device,
        mean: torch.Tensor,
        std: torch.Tensor,
        augment: bool,
        channels_last: bool,
        seed: int = 0,
    ):
        self.batches = DeviceLoader(
            images, labels, batch_size, device=device, shuffle=augment, drop_last=augment, seed=seed
        )
        self.mean, self.std = mean.to(device)[:, None, None], std.to(device)[:, None, None]
        self.augment, self.channels_last = augment, channels_last
        self.generator = self.batches.generator

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for images, labels in self.batches:
            if self.augment:
                images = per_sample_flip(random_crop(images, 4, self.generator), generator=self.generator)
            images = (images.float().div(255) - self.mean) / self.std
            yield images.contiguous(memory_format=torch.channels_last) if self.channels_last else images, labels


class FlipAveraged(nn.Module):
    """Test-time augmentation: the mean of the logits for each image and for its mirror image."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return (self.model(images) + self.model(images.flip(-1))) / 2


def evaluation_loader(data: ImageData, device: torch.device, mean, std, *, channels_last: bool = False):
    """``data``'s test images on ``device``, normalized with the training images' ``mean`` and ``std``, not
    augmented: what every rung, and lesson 12's fast loop, is evaluated on."""
    batch = min(1024, len(data.test_images))
    return AugmentedDeviceLoader(
        data.test_images,
        data.test_labels,
        batch,
        device=device,
        mean=mean,
        std=std,
        augment=False,
        channels_last=channels_last,
    )
