"""Backbones: every model is a :class:`PLLNet`, an encoder to a feature vector plus a linear head.

Methods that need features (PiCO's projection head, VALEN's graph) call ``features`` or
``forward_with_features``; everything else calls ``forward`` for logits.  Models are looked up by
name in the registry (hook ``pllzoo_register_models``; the built-in plugin registers ``MODELS``)
and built with :func:`build_model`:

* ``resnet18`` — the CIFAR ResNet-18 of SoLar/PiCO (SoLar code: resnet.py), built from torchvision's
  ``resnet18``: 3×3 stride-1 stem, no max-pool, 512-d features;
* ``cnn``      — a small, fast 3-block CNN (32/64/128 channels, conv→pool→BN→ReLU) for CPU runs, 128-d;
* ``linear``   — logits = W·x + b on flattened tabular input (PRODEN/VALEN convention);
* ``mlp``      — flattened input → Linear(d, 500) → BatchNorm1d → ReLU → Linear(500, K);
* ``wrn28-2``  — WRN-28-2 as in FixMatch/USB (:mod:`pllzoo.wrn`), 128-d;
* ``resnet18-imagenet`` — torchvision's ImageNet ResNet-18 with its pretrained weights, read from a
  local file only (:mod:`pllzoo.pretrained`), 512-d.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from pllzoo import model_args
from pllzoo.errors import PLLZooError
from pllzoo.plugins import one_line
from pllzoo.pllnet import PLLNet, image_channels
from pllzoo.pretrained import resnet18_imagenet
from pllzoo.wrn import wrn28_2

if TYPE_CHECKING:  # pragma: no cover
    from pllzoo.registry import Registry


def resnet18(num_classes: int, input_shape: tuple[int, ...] = (3, 32, 32)) -> PLLNet:
    """CIFAR ResNet-18: torchvision's resnet18 with a 3×3/1 stem and no max-pool; features 512-d.

    torchvision already initialises convs Kaiming-normal (fan_out, ReLU) and BN to 1/0 (no
    zero-init of residual BN); the replacement stem conv gets the same Kaiming init.
    """
    import torchvision  # seconds to import: only where a backbone of it is built

    channels = image_channels("resnet18", input_shape)
    net = torchvision.models.resnet18(weights=None, num_classes=num_classes)
    net.conv1 = nn.Conv2d(channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")
    net.maxpool = nn.Identity()
    head = net.fc
    trunk = OrderedDict((n, m) for n, m in net.named_children() if n != "fc")  # conv1 … layer4, avgpool
    trunk["flatten"] = nn.Flatten(1)  # [B,512,1,1] -> [B,512]
    return PLLNet(nn.Sequential(trunk), head)


def _conv_block(c_in: int, c_out: int) -> nn.Sequential:
    """3×3 conv (no bias) → 2×2 max-pool → BN → ReLU; halves H and W.

    Pooling before BN+ReLU (rather than after) runs BN and ReLU on a quarter of the pixels:
    about 1.4x faster per step on 2 CPU cores, for the same parameters.
    """
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.MaxPool2d(2),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


def cnn(num_classes: int, input_shape: tuple[int, ...] = (3, 32, 32), widths: tuple[int, ...] = (32, 64, 128)) -> PLLNet:
    """Small CNN for CPU runs: 3 conv blocks (32/64/128) → global average pool → 128-d features.

    Conv weights are stored channels-last, so convolutions run (and emit) NHWC whatever the input
    layout: about 1.6x faster fwd+bwd on CPU than NCHW.
    """
    if not widths or min(widths) < 1:  # no conv block would leave a linear model on the pooled pixels
        raise ValueError(f"widths must be one or more positive channel counts, got {widths!r}")
    channels = image_channels("cnn", input_shape)
    blocks, c_in = [], channels
    for c_out in widths:
        blocks.append(_conv_block(c_in, c_out))  # [B,c_out,H/2,W/2]
        c_in = c_out
    encoder = nn.Sequential(*blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(1))  # [B,widths[-1]]
    for m in encoder.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    encoder = encoder.to(memory_format=torch.channels_last)
    return PLLNet(encoder, nn.Linear(c_in, num_classes))


def linear(num_classes: int, input_shape: tuple[int, ...]) -> PLLNet:
    """Linear model on flattened input: features are the input itself (d-dimensional)."""
    d = math.prod(input_shape)
    return PLLNet(nn.Flatten(1), nn.Linear(d, num_classes))


def mlp(num_classes: int, input_shape: tuple[int, ...], hidden: int = 500) -> PLLNet:
    """One-hidden-layer MLP: Flatten → Linear(d, 500) → BatchNorm1d → ReLU; features 500-d."""
    if hidden < 1:
        raise ValueError(f"hidden must be a positive width, got {hidden}")
    d = math.prod(input_shape)
    encoder = nn.Sequential(nn.Flatten(1), nn.Linear(d, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True))
    return PLLNet(encoder, nn.Linear(hidden, num_classes))


#: the built-in backbones, registered by :mod:`pllzoo.builtin` when the registry is built (an entry
#: added later is seen only by a registry built after it: :func:`pllzoo.registry.reset_registry`)
MODELS: dict[str, Callable[..., PLLNet]] = {"resnet18": resnet18, "cnn": cnn, "linear": linear, "mlp": mlp,
                                            "wrn28-2": wrn28_2, "resnet18-imagenet": resnet18_imagenet}


def list_models(registry: Registry | None = None) -> list[str]:
    """Return the registered model names, sorted (``registry``: the process-wide one when None)."""
    return sorted((registry or _registry()).models)


def build_model(name: str, num_classes: int, input_shape: tuple[int, ...], registry: Registry | None = None,
                args: tuple[str, ...] = ()) -> PLLNet:
    """Build model ``name`` for ``num_classes`` classes and inputs of shape ``input_shape`` (no batch dim).

    :param registry: where ``name`` is looked up; None: the process-wide registry.
    :param args: the factory's own arguments, ``NAME=VALUE`` each (``--hp model.NAME=VALUE``, :mod:`pllzoo.model_args`).
    Raises :class:`PLLZooError` for an unknown name, listing the valid ones, an argument the factory does not
    take, and when a plugin's factory returns something other than a :class:`PLLNet`.
    """
    registry = registry or _registry()
    factory = registry.model(name)
    who = model_who(registry, name)
    kwargs = model_args.parse(who, factory, args)
    try:
        net = factory(num_classes=num_classes, input_shape=tuple(input_shape), **kwargs)
    except PLLZooError:  # the factory's own one line (a missing weight file) says it all
        raise
    except (Exception, SystemExit) as exc:  # a plugin's factory: one line naming it, the cause chained
        raise PLLZooError(f"{who} failed to build: {one_line(exc)}") from exc
    if not isinstance(net, PLLNet):
        raise PLLZooError(f"{who} returned a {type(net).__name__}, not a pllzoo.PLLNet "
                          f"(wrap the network: PLLNet(encoder, head))")
    _check_logits_shape(net, who, num_classes, tuple(input_shape))
    return net


def memory_floor(name: str, num_classes: int, input_shape: tuple[int, ...], registry: Registry | None = None,
                 args: tuple[str, ...] = ()) -> tuple[int, int] | None:
    """Two lower bounds on the memory backbone ``name`` needs, from a build and a forward of one row on torch's
    ``meta`` device (no memory, no values): bytes of its parameters and buffers, and of the largest output of any
    one of its modules per input row; None where the factory or its forward cannot run there (it reads weights,
    computes at construction)."""
    registry = registry or _registry()
    factory = registry.model(name)
    kwargs = model_args.parse(model_who(registry, name), factory, args)
    largest = [0]

    def seen(module: nn.Module, inputs: object, out: object) -> None:
        if isinstance(out, torch.Tensor):
            largest[0] = max(largest[0], out.numel() * out.element_size())

    try:
        with torch.device("meta"), torch.random.fork_rng(devices=[]):
            net = factory(num_classes=num_classes, input_shape=tuple(input_shape), **kwargs)
            held = sum(t.numel() * t.element_size() for t in [*net.parameters(), *net.buffers()])
            hooks = [m.register_forward_hook(seen) for m in net.modules()]
            with torch.no_grad():
                net.eval()(torch.zeros((1, *input_shape)))
            for h in hooks:
                h.remove()
        return held, largest[0]
    except (Exception, SystemExit):  # the real build says what is wrong, in its own line
        return None


def available_memory() -> int | None:
    """Bytes of host memory available now (Linux: /proc/meminfo's MemAvailable), or None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def model_who(registry: Registry, name: str) -> str:
    """Backbone ``name`` as messages name it: ``model 'mlp' (plugin builtin)``."""
    return f"model {name!r} (plugin {registry.models[name][1]})"


def _check_logits_shape(net: PLLNet, who: str, num_classes: int, input_shape: tuple[int, ...]) -> None:
    """One forward of two zero inputs in eval mode (no state changes, no random numbers): the logits must be
    ``[2, num_classes]``, or a loss would fail later with a shape error that names the loss, not the model."""
    mode = net.training
    net.eval()
    try:
        with torch.no_grad():
            out = net(torch.zeros((2, *input_shape)))
    except Exception as exc:  # noqa: BLE001 - said in one line; training would fail the same way
        raise PLLZooError(f"{who} fails on inputs of shape {list(input_shape)}: {one_line(exc)}") from exc
    finally:
        net.train(mode)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, num_classes):
        got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise PLLZooError(f"{who} gives logits {got} for a batch of 2 and {num_classes} classes; "
                          f"expected [2, {num_classes}]")


def _registry() -> Registry:
    from pllzoo.registry import get_registry  # the registry imports the plugins, which may import this module

    return get_registry()
