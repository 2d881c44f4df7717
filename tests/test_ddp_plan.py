"""Under torchrun, what DDP refuses (a batch not divisible by the processes, train.drop_last=false, a component
that has not opted in) is refused when the bench is planned, before any run starts (README, "what is wrong
before training"), not as a failed run (an outside review: batch 255 on 2 processes started, then failed)."""

from __future__ import annotations

import pytest
import torch

from pllzoo import bench, distributed
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError


@pytest.fixture
def two_processes(monkeypatch):
    monkeypatch.setattr(distributed, "current", lambda: distributed.DistContext(rank=0, world=2, local_rank=0,
                                                                                device=torch.device("cpu")))


def _plan(registry, **hp):
    return bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(subset=256), epochs=1, device="cpu",
                      hp={k.replace("__", "."): v for k, v in hp.items()})


def test_a_batch_the_processes_cannot_share_is_refused_at_plan_time(registry, two_processes):
    with pytest.raises(PLLZooError, match=r"train\.batch_size 255 is not divisible by the 2 processes"):
        _plan(registry, train__batch_size="255")
    with pytest.raises(PLLZooError, match=r"train\.drop_last=false under 2 processes"):
        _plan(registry, train__batch_size="64", train__drop_last="false")
    assert _plan(registry, train__batch_size="64")  # a batch they can share plans


def test_one_process_plans_as_before(registry):
    assert _plan(registry, train__batch_size="255")
