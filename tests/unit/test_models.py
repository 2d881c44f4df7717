"""Backbones: shapes, the CIFAR ResNet-18 stem, parameter counts, forward/backward, the registry."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torchvision
from torch import nn

from pllzoo.errors import PLLZooError
from pllzoo.models import MODELS, PLLNet, build_model, list_models

K = 10
IMAGE_SHAPE = (3, 32, 32)
TABULAR_SHAPE = (20,)
SHAPES = {"resnet18": IMAGE_SHAPE, "cnn": IMAGE_SHAPE, "linear": TABULAR_SHAPE, "mlp": TABULAR_SHAPE,
          "wrn28-2": IMAGE_SHAPE}
FEATURE_DIMS = {"resnet18": 512, "cnn": 128, "linear": 20, "mlp": 500, "wrn28-2": 128}
NEEDS_FILES = {"resnet18-imagenet"}  # built from a local weight file: tests/unit/test_pretrained.py


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny batches gain nothing from threads, and a busy machine makes intra-op threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_every_registered_model_is_covered_here() -> None:
    assert set(list_models()) == set(MODELS) == set(SHAPES) | NEEDS_FILES


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_forward_shapes_and_backward(name: str) -> None:
    torch.manual_seed(0)
    net = build_model(name, K, SHAPES[name])
    assert isinstance(net, PLLNet) and isinstance(net.head, nn.Linear)
    assert net.feature_dim == FEATURE_DIMS[name] == net.head.in_features
    x = torch.randn(4, *SHAPES[name])
    logits = net(x)
    assert logits.shape == (4, K) and logits.dtype == torch.float32
    assert net.features(x).shape == (4, net.feature_dim)
    logits.logsumexp(1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in net.parameters())


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_forward_with_features_is_one_consistent_pass(name: str) -> None:
    net = build_model(name, K, SHAPES[name]).eval()  # eval: BN uses running stats, so passes agree
    x = torch.randn(3, *SHAPES[name])
    logits, feats = net.forward_with_features(x)
    torch.testing.assert_close(feats, net.features(x))
    torch.testing.assert_close(logits, net(x))
    torch.testing.assert_close(logits, net.head(feats))


def test_resnet18_has_cifar_stem_and_no_maxpool() -> None:
    net = build_model("resnet18", K, IMAGE_SHAPE)
    conv1 = net.encoder.conv1
    assert (conv1.in_channels, conv1.out_channels) == (3, 64)
    assert conv1.kernel_size == (3, 3) and conv1.stride == (1, 1) and conv1.padding == (1, 1)
    assert conv1.bias is None
    assert not any(isinstance(m, nn.MaxPool2d) for m in net.modules())
    # 32x32 input keeps 32x32 after the stem, so layer4 sees 4x4 (ImageNet stem would give 1x1)
    assert net.encoder[:4](torch.zeros(1, *IMAGE_SHAPE)).shape == (1, 64, 32, 32)
    assert net.head.in_features == 512 and net.head.out_features == K


def test_resnet18_parameter_count_is_torchvision_with_the_stem_swapped() -> None:
    reference = torchvision.models.resnet18(weights=None, num_classes=K)
    imagenet_stem = reference.conv1.weight.numel()  # 64 * 3 * 7 * 7
    cifar_stem = 64 * 3 * 3 * 3
    expected = sum(p.numel() for p in reference.parameters()) - imagenet_stem + cifar_stem
    net = build_model("resnet18", K, IMAGE_SHAPE)
    assert sum(p.numel() for p in net.parameters()) == expected


def test_resnet18_init_follows_torchvision() -> None:
    torch.manual_seed(0)
    net = build_model("resnet18", K, IMAGE_SHAPE)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            assert torch.all(m.weight == 1) and torch.all(m.bias == 0)
    w = net.encoder.conv1.weight  # Kaiming normal, fan_out = 64 * 3 * 3
    expected_std = (2.0 / (64 * 9)) ** 0.5
    assert abs(w.std().item() / expected_std - 1) < 0.1


def test_linear_features_are_the_flattened_input() -> None:
    net = build_model("linear", 3, (2, 5))
    x = torch.randn(4, 2, 5)
    torch.testing.assert_close(net.features(x), x.flatten(1))
    assert net.feature_dim == 10


def test_unknown_model_is_a_one_line_error_listing_valid_names() -> None:
    with pytest.raises(PLLZooError) as info:
        build_model("resnet1000", K, IMAGE_SHAPE)
    message = str(info.value)
    assert "\n" not in message and all(name in message for name in list_models())


def test_image_model_rejects_tabular_shape() -> None:
    with pytest.raises(PLLZooError, match="image input"):
        build_model("cnn", K, TABULAR_SHAPE)
