"""Every registered method (and a mixed recipe) resumes exactly: interrupt, resume, equal the uninterrupted run
(``pllzoo check``'s ``resumes``, :mod:`pllzoo.conformance`).

For each method the uninterrupted run is trained once; then, for every cut point, a fresh trainer with
fresh components is stopped after epoch k (``on_epoch`` raises; ``checkpoint_every=1`` so the checkpoint
is of epoch k, not of the stage start) and a second fresh trainer resumes from its checkpoint.  The cut
points are data-driven from the method's own stage plan: one epoch into every stage and one epoch
before its end (so a method with stages, SoLar's pre-estimation and VALEN's warm-up, is cut inside its
first and inside its last stage) and at every boundary between stages.  On CPU the per-epoch records
(all but ``wall_s``), the final network and extra-module weights and the method state must be equal bit
for bit: any state a component keeps outside the checkpoint (a Python attribute that changes during
training) shows up here.
"""

from __future__ import annotations

import math

import pytest

from pllzoo.conformance import EPOCHS, Checker, cut_points, resumes
from conftest import registered_methods

MIXED = ["proden+selection=solar.classwise+estimator=solar.prior"]
# image runs (CNN; strong view, and mixup where the protocol adds it): PiCO, whose loss always reads the
# strong view, SoLar (mixup over the reliable rows) and PRODEN, standing for the protocol baselines, which
# all share ProtocolLoss; HTC (two heads, four passes) and CORR + RECORDS with mixup (joint views, the
# feature-mean prior); the rest run on tabular data, where they have no strong view (all pass on images too)
IMAGE = ["pico", "solar", "proden", "htc", "corr-records-mixup"]
CASES = [(name, "tabular") for name in registered_methods() + MIXED] + [(name, "image") for name in IMAGE]


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Bit-for-bit comparisons: one torch thread (conftest.one_torch_thread)."""


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_resume_equals_uninterrupted(name, kind, registry):
    checker = Checker(registry, registry.method(name), problem="images" if kind == "image" else "tabular")
    assert checker.config.epochs == EPOCHS
    full = checker.run()
    assert all(math.isfinite(r["loss"]) for r in full.records)
    stages = checker.stages()
    cuts = cut_points(stages, EPOCHS)
    if len(stages) > 1:
        assert len(cuts) >= 3, cuts  # inside the first stage, at the boundary, inside the last stage
    assert cuts and max(cuts) < len(full.records)
    finding = resumes(checker, full)
    assert finding.status == "ok", f"{name}: {finding.detail}"
