"""WRN-28-2 (``wrn28-2``): the USB/FixMatch layout, shapes, parameter count, init, determinism."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pllzoo.models import PLLNet, build_model
from pllzoo.wrn import WideBasicBlock, wide_resnet


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Tiny batches gain nothing from threads."""


def test_shapes_and_feature_dim():
    net = build_model("wrn28-2", 10, (3, 32, 32))
    assert isinstance(net, PLLNet) and net.feature_dim == 128 and net.num_classes == 10
    x = torch.randn(2, 3, 32, 32)
    logits, feats = net.eval().forward_with_features(x)
    assert logits.shape == (2, 10) and feats.shape == (2, 128)
    torch.testing.assert_close(net.features(x), feats)
    trunk = list(net.encoder)
    assert nn.Sequential(*trunk[:5])(x).shape == (2, 32, 32, 32)  # stem + group 1: stride 1
    assert nn.Sequential(*trunk[:9])(x).shape == (2, 64, 16, 16)  # group 2: stride 2
    assert nn.Sequential(*trunk[:13])(x).shape == (2, 128, 8, 8)  # group 3: stride 2


def test_parameter_count_is_usbs_1_47m():
    for k, expected in ((10, 1_469_642), (100, 1_469_642 + 90 * 129)):  # the head grows by 128 + 1 per class
        assert sum(p.numel() for p in build_model("wrn28-2", k, (3, 32, 32)).parameters()) == expected


def test_layout_depth_28_widen_2():
    net = build_model("wrn28-2", 10, (3, 32, 32))
    blocks = [m for m in net.modules() if isinstance(m, WideBasicBlock)]
    convs3 = [m for m in net.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3)]
    shortcuts = [m for m in net.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (1, 1)]
    assert len(blocks) == 12 and len(convs3) == 25 and len(shortcuts) == 3  # 1 + 2·12 convs + fc = 26 + 2 (WRN)
    assert [b.conv1.out_channels for b in blocks] == [32] * 4 + [64] * 4 + [128] * 4
    assert all(m.bias is not None for m in convs3 + shortcuts)
    bns = [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(bns) == 25 and all(m.momentum == 0.001 and m.eps == 0.001 for m in bns)
    acts = [m for m in net.modules() if isinstance(m, nn.LeakyReLU)]
    assert acts and all(m.negative_slope == 0.1 for m in acts)
    assert not any(isinstance(m, (nn.ReLU, nn.Dropout, nn.MaxPool2d)) for m in net.modules())


def test_first_block_of_a_group_preactivates_its_shortcut():
    """USB's BasicBlock: with a width change, conv1 and the 1×1 shortcut both read act(bn(x))."""
    torch.manual_seed(0)
    block = WideBasicBlock(16, 32, stride=2).eval()
    x = torch.randn(2, 16, 8, 8)
    pre = block.act1(block.bn1(x))
    expected = block.conv2(block.act2(block.bn2(block.conv1(pre)))) + block.shortcut(pre)
    torch.testing.assert_close(block(x), expected)
    same = WideBasicBlock(32, 32, stride=1).eval()
    y = torch.randn(2, 32, 8, 8)
    torch.testing.assert_close(same(y), y + same.conv2(same.act2(same.bn2(same.conv1(same.act1(same.bn1(y)))))))


def test_init_as_usb_and_deterministic_given_the_seed():
    torch.manual_seed(3)
    a = build_model("wrn28-2", 10, (3, 32, 32))
    torch.manual_seed(3)
    b = build_model("wrn28-2", 10, (3, 32, 32))
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    assert torch.all(a.head.bias == 0)
    stem = a.encoder[0].weight  # Kaiming normal, fan_out = 16·3·3, gain √2
    assert abs(stem.std().item() / (2.0 / (16 * 9)) ** 0.5 - 1) < 0.15


def test_depth_must_be_4_plus_6n():
    with pytest.raises(ValueError, match="4 \\+ 6n"):
        wide_resnet(10, (3, 32, 32), depth=27)
