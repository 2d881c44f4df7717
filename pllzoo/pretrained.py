"""Pretrained backbones from local weight files only: pllzoo never downloads weights.

``resnet18-imagenet`` is torchvision's ImageNet ResNet-18 unchanged (7×7/2 stem and max-pool, so
32×32 inputs reach layer4 at 1×1: use larger images, e.g. an image folder of 224×224 pictures) with
torchvision's ``ResNet18_Weights.IMAGENET1K_V1`` loaded, and a fresh ``Linear(512, K)`` head drawn
from the run's seed.  The inputs are normalised with the dataset's own mean/std, not ImageNet's.

The weight file is torchvision's own, ``resnet18-f37072fd.pth``, looked up in this order:

1. the folder named by ``$PLLZOO_WEIGHTS_DIR``, when set;
2. torch's hub cache, ``$TORCH_HOME/hub/checkpoints`` (default ``~/.cache/torch/hub/checkpoints``),
   where torchvision itself keeps it.

The file's SHA-256 must start with the 8 hex digits in its name (torch.hub's check), so a run that
names ``resnet18-imagenet`` always starts from the same weights.  A missing or altered file is a
one-line error that says where to put it.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from pathlib import Path

import torch
from torch import nn

from pllzoo.errors import PLLZooError
from pllzoo.pllnet import PLLNet, image_channels

WEIGHTS_ENV = "PLLZOO_WEIGHTS_DIR"
RESNET18_IMAGENET = "https://download.pytorch.org/models/resnet18-f37072fd.pth"  # ResNet18_Weights.IMAGENET1K_V1


def weight_dirs() -> list[Path]:
    """The folders searched for weight files, in order."""
    dirs = [Path(os.environ[WEIGHTS_ENV]).expanduser()] if os.environ.get(WEIGHTS_ENV) else []
    return dirs + [Path(torch.hub.get_dir()) / "checkpoints"]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def local_weights(url: str, model: str) -> dict[str, torch.Tensor]:
    """Load the state dict torchvision publishes at ``url`` from a local copy (never from the network).

    :raises PLLZooError: no copy in :func:`weight_dirs`, or a copy whose SHA-256 does not match its name.
    """
    filename = url.rsplit("/", 1)[1]
    digest = filename.rsplit("-", 1)[1].split(".")[0]  # torchvision: name-<sha256 prefix>.pth
    found = next((d / filename for d in weight_dirs() if (d / filename).is_file()), None)
    if found is None:
        where = " or ".join(map(str, weight_dirs()))  # ${WEIGHTS_ENV}'s folder first, when it is set
        raise PLLZooError(f"model {model!r} needs the weight file {filename} and pllzoo never downloads: "
                          f"put it in {where}{'' if os.environ.get(WEIGHTS_ENV) else f' (or the folder ${WEIGHTS_ENV} names)'}; "
                          f"it is {url}")
    if not _sha256(found).startswith(digest):
        raise PLLZooError(f"{found}: SHA-256 does not start with {digest}: not torchvision's {filename}; "
                          f"replace it with the file from {url}")
    return torch.load(found, map_location="cpu", weights_only=True)


def resnet18_imagenet(num_classes: int, input_shape: tuple[int, ...] = (3, 224, 224)) -> PLLNet:
    """torchvision's ResNet-18 with its ImageNet weights (from a local file) and a new ``Linear(512, K)`` head."""
    if image_channels("resnet18-imagenet", input_shape) != 3:
        raise PLLZooError(f"model 'resnet18-imagenet' takes RGB images (3 channels), got input shape {input_shape}")
    import torchvision  # seconds to import: only where its backbone is built

    net = torchvision.models.resnet18(weights=None)  # the 1000-class ImageNet network, then its weights
    net.load_state_dict(local_weights(RESNET18_IMAGENET, "resnet18-imagenet"))
    head = nn.Linear(512, num_classes)  # PyTorch's default init, from the run's seeded RNG
    trunk = OrderedDict((n, m) for n, m in net.named_children() if n != "fc")  # conv1 … layer4, avgpool
    trunk["flatten"] = nn.Flatten(1)  # [B,512,1,1] -> [B,512]
    return PLLNet(nn.Sequential(trunk), head)
