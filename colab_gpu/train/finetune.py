"""Fine-tuning a pretrained torchvision model on your own images (lesson 13).

- `load_pretrained` builds a torchvision model with its pretrained weights, or with random weights and one
  printed line where they cannot be downloaded (CI, an offline laptop).
- `finetune_transforms` are the v2 transforms for training and validation at the weights' normalization.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlparse

import torch
from torch import nn

from ..data.downloads import download_problem, download_timeout, host_reachable

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # what torchvision's ImageNet weights were trained with
IMAGENET_STD = (0.229, 0.224, 0.225)


def load_pretrained(builder: Callable[..., nn.Module], weights, **kwargs) -> tuple[nn.Module, bool]:
    """``builder(weights=weights)``, and True; or, where the weights cannot be downloaded, ``builder(weights=None)``
    (the same architecture, random weights) with one printed line, and False. Taught in lesson 13.

    Weights neither in torch's hub cache nor on a server that answers (an offline runtime) are not asked for.

    Example: ``model, pretrained = load_pretrained(torchvision.models.resnet18, ResNet18_Weights.DEFAULT)``.
    """
    problem = "this runtime has no internet access"
    if not _cannot_download(weights):
        try:
            with download_timeout():
                return builder(weights=weights, **kwargs), True
        except (OSError, RuntimeError) as err:  # no network (URLError is an OSError), or a truncated download
            problem = download_problem(err)
    print(
        f"{weights} could not be loaded ({problem}): {builder.__name__} starts from random weights here, so the "
        "accuracies below are not fine-tuning's (they need the download: Colab, or Kaggle with Settings > "
        "Internet on)."
    )
    return builder(weights=None, **kwargs), False


def _cannot_download(weights) -> bool:
    """Whether torchvision ``weights`` are not in torch's hub cache and their server does not answer: then asking
    for them would only print "Downloading: ..." and fail."""
    url = getattr(weights, "url", None)
    if not isinstance(url, str):
        return False  # a name or None: the builder resolves it, and says what is wrong
    address = urlparse(url)
    cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(address.path).name  # where torchvision keeps them
    return not cached.exists() and not host_reachable(address.hostname or "")


def finetune_transforms(
    size: int, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD, *, flip: bool = True
):
    """(training, validation) v2 transforms for PIL images or uint8 tensors. Taught in lesson 13.

    Training: a random crop of 50-100% of the image resized to ``size`` and, with ``flip``, a random mirror
    (right for photos of objects, wrong for text and digits). Validation: resize the short side to ``size``,
    take the centre. Both end as float32 normalized with the pretrained weights' ``mean`` and ``std``.
    """
    from torchvision.transforms import v2

    to_float = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))]
    train = v2.Compose(
        [
            v2.RandomResizedCrop(size, scale=(0.5, 1.0), antialias=True),
            *([v2.RandomHorizontalFlip()] if flip else []),
            *to_float,
        ]
    )
    val = v2.Compose([v2.Resize(size, antialias=True), v2.CenterCrop(size), *to_float])
    return train, val
