"""The models the lessons train, defined once so later lessons and the benchmarks reuse them."""

from __future__ import annotations

from torch import nn


def mlp(in_features: int, hidden: int = 512, classes: int = 10, depth: int = 2) -> nn.Sequential:
    """A multilayer perceptron on flattened images: Flatten, ``depth`` x (Linear, ReLU), Linear.

    Example:
        >>> import torch
        >>> mlp(784, hidden=256)(torch.zeros(2, 1, 28, 28)).shape
        torch.Size([2, 10])

    Taught in lesson 03.
    """
    if in_features < 1 or hidden < 1 or classes < 2 or depth < 1:
        raise ValueError(
            f"mlp needs in_features >= 1, hidden >= 1, classes >= 2 and depth >= 1; got "
            f"in_features={in_features}, hidden={hidden}, classes={classes}, depth={depth}."
        )
    layers: list[nn.Module] = [nn.Flatten()]
    width = in_features
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


def _conv_block(c_in: int, c_out: int) -> nn.Sequential:
    # Two 3x3 convolutions, each with batch norm (bias would be redundant), then halve the size.
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )


def small_cnn(in_channels: int = 3, classes: int = 10, width: int = 32) -> nn.Sequential:
    """A small VGG-style conv net: three blocks (width, 2x, 4x channels), global pooling, linear head.

    Works for any image of at least 8x8 pixels (CIFAR-10's 32x32, FashionMNIST's 28x28).

    Taught in lesson 04.
    """
    if in_channels < 1 or classes < 2 or width < 1:
        raise ValueError(
            f"small_cnn needs in_channels >= 1, classes >= 2, width >= 1; got "
            f"in_channels={in_channels}, classes={classes}, width={width}."
        )
    return nn.Sequential(
        _conv_block(in_channels, width),
        _conv_block(width, 2 * width),
        _conv_block(2 * width, 4 * width),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * width, classes),
    )


def _pool_block(c_in: int, c_out: int) -> nn.Sequential:
    # Pool right after the first convolution: the second one runs on a quarter of the pixels.
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        nn.MaxPool2d(2),
        nn.BatchNorm2d(c_out),
        nn.GELU(),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.GELU(),
    )


def speed_net(in_channels: int = 3, classes: int = 10, width: int = 64) -> nn.Sequential:
    """A conv net shaped for fast CIFAR-10 training: a narrow stem, three pooling blocks (width, 4x, 4x
    channels), global max pooling, a linear head without bias.

    Wide late layers on few pixels keep the GPU's matrix units busy; pooling early keeps the cost per
    image low. ``width=64`` is the GPU size; the lesson uses 16 on a CPU. Taught in lesson 12.
    """
    if in_channels < 1 or classes < 2 or width < 2:
        raise ValueError(
            f"speed_net needs in_channels >= 1, classes >= 2, width >= 2; got "
            f"in_channels={in_channels}, classes={classes}, width={width}."
        )
    return nn.Sequential(
        nn.Conv2d(in_channels, width // 2, 3, padding=1, bias=False),
        nn.BatchNorm2d(width // 2),
        nn.GELU(),
        _pool_block(width // 2, width),
        _pool_block(width, 4 * width),
        _pool_block(4 * width, 4 * width),
        nn.AdaptiveMaxPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * width, classes, bias=False),
    )


class ResidualBlock(nn.Module):
    """A transformer's MLP block: ``x + Dropout(Linear(Dropout(GELU(Linear(LayerNorm(x))))))``, 4x wide inside.

    Two matmuls with chains of element-wise work around them (normalize, activate, drop, add back), each chain a
    separate memory-bound kernel per operator in eager mode, and the chains ``torch.compile`` fuses (lesson 11).
    """

    def __init__(self, features: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(features)
        self.up = nn.Linear(features, 4 * features)
        self.down = nn.Linear(4 * features, features)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        hidden = self.drop(nn.functional.gelu(self.up(self.norm(x))))  # (rows, 4 x features)
        return x + self.drop(self.down(hidden))  # (rows, features): the residual stream


def residual_mlp(features: int, blocks: int, classes: int = 10) -> nn.Sequential:
    """``blocks`` `ResidualBlock` of width ``features`` on rows of ``features`` values, a LayerNorm and a linear head.

    Example:
        >>> import torch
        >>> residual_mlp(16, blocks=2)(torch.zeros(3, 16)).shape
        torch.Size([3, 10])

    The GPU-bound model of lesson 11 (and of the bench's "compile" row).
    """
    if features < 1 or blocks < 1 or classes < 2:
        raise ValueError(
            f"residual_mlp needs features >= 1, blocks >= 1 and classes >= 2; got "
            f"features={features}, blocks={blocks}, classes={classes}."
        )
    layers: list[nn.Module] = [ResidualBlock(features) for _ in range(blocks)]
    return nn.Sequential(*layers, nn.LayerNorm(features), nn.Linear(features, classes))


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters. Taught in lesson 03."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
