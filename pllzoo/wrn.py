"""WRN-28-2, the Wide ResNet of the semi-supervised CIFAR benchmarks (FixMatch, USB), as USB builds it.

Followed: USB's ``semilearn/nets/wrn/wrn.py`` (microsoft/Semi-supervised-learning, ``wrn_28_2``), itself
a PyTorch port of FixMatch's TensorFlow ``libml/models.py``.  Depth 28 = 4 + 6·n with n = 4 blocks per
group; widths 16 → 32 → 64 → 128 (widen factor 2); pre-activation basic blocks; every BatchNorm has
momentum 0.001 and eps 0.001 (TF's decay 0.999); LeakyReLU(0.1); convolutions with bias; first group
stride 1, the others stride 2; BN → LeakyReLU → global average pool → 128-d features → Linear head.
Init as USB: convs Kaiming-normal (fan_out, ``leaky_relu`` with slope 0, i.e. gain √2), BN 1/0, head
Xavier-normal with zero bias.  1,469,642 parameters for 10 classes ("1.47M").

As in USB (and unlike FixMatch's TensorFlow code, where only the first group does so), the first
block of every group feeds its pre-activated input to both its 3×3 conv and its 1×1 shortcut conv.
No dropout (USB's default ``drop_rate=0``).
"""

from __future__ import annotations

import torch
from torch import nn

from pllzoo.pllnet import PLLNet, image_channels

BN_MOMENTUM = 0.001  # PyTorch's convention: running = 0.999·running + 0.001·batch
BN_EPS = 0.001
LEAKY_SLOPE = 0.1


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, momentum=BN_MOMENTUM, eps=BN_EPS)


class WideBasicBlock(nn.Module):
    """Pre-activation block: ``x + conv(act(bn(conv(act(bn(x))))))``; a width or stride change
    pre-activates ``x`` for the shortcut too and projects it with a 1×1 conv (USB's BasicBlock)."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.bn1, self.act1 = _bn(c_in), nn.LeakyReLU(LEAKY_SLOPE)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=True)
        self.bn2, self.act2 = _bn(c_out), nn.LeakyReLU(LEAKY_SLOPE)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=True)
        self.shortcut = None if c_in == c_out else nn.Conv2d(c_in, c_out, 1, stride=stride, padding=0, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.act1(self.bn1(x))  # [B,c_in,H,W]
        out = self.conv2(self.act2(self.bn2(self.conv1(pre))))  # [B,c_out,H/s,W/s]
        return out + (x if self.shortcut is None else self.shortcut(pre))


def wide_resnet(num_classes: int, input_shape: tuple[int, ...], depth: int = 28, widen: int = 2) -> PLLNet:
    """A CIFAR Wide ResNet ``WRN-depth-widen`` (see the module docstring); features ``64·widen``-d."""
    if (depth - 4) % 6:
        raise ValueError(f"WRN depth must be 4 + 6n, got {depth}")
    n = (depth - 4) // 6
    widths = [16, 16 * widen, 32 * widen, 64 * widen]
    layers: list[nn.Module] = [nn.Conv2d(image_channels(f"wrn{depth}-{widen}", input_shape), widths[0], 3,
                                         stride=1, padding=1, bias=True)]
    for g, stride in enumerate((1, 2, 2)):
        layers += [WideBasicBlock(widths[g] if i == 0 else widths[g + 1], widths[g + 1], stride if i == 0 else 1)
                   for i in range(n)]
    layers += [_bn(widths[3]), nn.LeakyReLU(LEAKY_SLOPE), nn.AdaptiveAvgPool2d(1), nn.Flatten(1)]  # [B,64·widen]
    encoder = nn.Sequential(*layers)
    head = nn.Linear(widths[3], num_classes)
    for m in [*encoder.modules(), head]:
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="leaky_relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.xavier_normal_(m.weight)
            nn.init.zeros_(m.bias)
    return PLLNet(encoder, head)


def wrn28_2(num_classes: int, input_shape: tuple[int, ...] = (3, 32, 32)) -> PLLNet:
    """WRN-28-2 (USB's ``wrn_28_2``): 128-d features, about 1.47M parameters for 10 classes."""
    return wide_resnet(num_classes, input_shape, depth=28, widen=2)
