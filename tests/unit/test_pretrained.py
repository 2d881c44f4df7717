"""``resnet18-imagenet``: loaded from a local weight file only (never downloaded), checked against its name's hash."""

from __future__ import annotations

import hashlib

import pytest
import torch
import torchvision

from pllzoo import pretrained
from pllzoo.errors import PLLZooError
from pllzoo.models import build_model


@pytest.fixture
def no_weights(tmp_path, monkeypatch):
    """An empty torch hub cache and no PLLZOO_WEIGHTS_DIR."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.delenv(pretrained.WEIGHTS_ENV, raising=False)
    return tmp_path


def _fake_weights(folder, monkeypatch) -> dict:
    """A ResNet-18 state dict saved under a torchvision-style name whose hash prefix matches it."""
    torch.manual_seed(7)
    state = torchvision.models.resnet18(weights=None).state_dict()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "tmp.pth"
    torch.save(state, tmp)
    name = f"resnet18-{hashlib.sha256(tmp.read_bytes()).hexdigest()[:8]}.pth"
    tmp.rename(folder / name)
    monkeypatch.setattr(pretrained, "RESNET18_IMAGENET", f"https://download.pytorch.org/models/{name}")
    return state


def test_missing_file_is_one_line_saying_where_to_put_it(no_weights):
    with pytest.raises(PLLZooError) as info:
        build_model("resnet18-imagenet", 10, (3, 64, 64))
    message = str(info.value)
    assert "\n" not in message and "resnet18-f37072fd.pth" in message and "never downloads" in message
    assert str(no_weights / "torch" / "hub" / "checkpoints") in message and pretrained.WEIGHTS_ENV in message
    assert not (no_weights / "torch").exists()  # nothing fetched, nothing created


def test_missing_file_names_the_weights_dir_that_is_set(no_weights, monkeypatch):
    """An outside review: with $PLLZOO_WEIGHTS_DIR set, the line named only the hub cache."""
    monkeypatch.setenv(pretrained.WEIGHTS_ENV, str(no_weights / "mine"))
    with pytest.raises(PLLZooError) as info:
        build_model("resnet18-imagenet", 10, (3, 64, 64))
    assert f"put it in {no_weights / 'mine'} or {no_weights / 'torch' / 'hub' / 'checkpoints'};" in str(info.value)


@pytest.mark.parametrize("where", ["hub", "env"])
def test_weights_from_the_hub_cache_or_the_weights_dir(no_weights, monkeypatch, where):
    if where == "hub":
        folder = no_weights / "torch" / "hub" / "checkpoints"
    else:
        folder = no_weights / "mine"
        monkeypatch.setenv(pretrained.WEIGHTS_ENV, str(folder))
    state = _fake_weights(folder, monkeypatch)
    net = build_model("resnet18-imagenet", 5, (3, 64, 64)).eval()
    assert net.feature_dim == 512 and net.num_classes == 5
    assert net(torch.zeros(2, 3, 64, 64)).shape == (2, 5)
    loaded = net.encoder.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in state.items() if not k.startswith("fc.")) and len(loaded) > 100


def test_an_altered_file_is_refused(no_weights, monkeypatch):
    folder = no_weights / "torch" / "hub" / "checkpoints"
    _fake_weights(folder, monkeypatch)
    (path,) = folder.iterdir()
    path.write_bytes(path.read_bytes() + b"x")
    with pytest.raises(PLLZooError, match=r"SHA-256 does not start with .*replace it"):
        build_model("resnet18-imagenet", 5, (3, 64, 64))


def test_rgb_only(no_weights):
    with pytest.raises(PLLZooError, match="RGB"):
        build_model("resnet18-imagenet", 5, (1, 64, 64))
