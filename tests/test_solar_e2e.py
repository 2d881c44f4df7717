"""SoLar end to end on the offline default data: it lifts the tail and its prior estimate improves."""

from __future__ import annotations

import json

from pllzoo import bench
from pllzoo.data.base import DataOptions


def test_solar_beats_proden_on_few_shot_classes(registry, tmp_path):
    plans = bench.plan(registry, ["solar", "proden"], "synthetic-lt", [1], DataOptions(), device="cpu")
    rows = bench.execute(registry, plans, tmp_path).set_index("method")
    assert rows.loc["solar", "acc_few"] > rows.loc["proden", "acc_few"] + 5
    log = [json.loads(line) for line in next(tmp_path.glob("runs/solar*/log.jsonl")).read_text().splitlines()]
    tv = [r["prior_tv"] for r in log]
    assert tv[-1] < tv[0]  # the estimated prior moved towards the true one
    assert [r["stage"] for r in log][:1] == ["pre-estimation"] and log[-1]["stage"] == "train"
    assert all(r["sinkhorn_relaxed_count"] == 0 for r in log)


def test_cand_mle_starts_near_the_true_prior(registry, tmp_path):
    # solar-cand-mle starts from the candidate sets' maximum-likelihood prior and moves it by only
    # γ2 = 0.01 an epoch; the uniform start of solar-no-preest is far from the long-tailed truth
    plans = bench.plan(registry, ["solar-cand-mle", "solar-no-preest"], "synthetic-lt", [1], DataOptions(),
                       epochs=1, device="cpu")
    bench.execute(registry, plans, tmp_path)
    first = {m: json.loads(next(tmp_path.glob(f"runs/{m}__*/log.jsonl")).read_text().splitlines()[0])
             for m in ("solar-cand-mle", "solar-no-preest")}
    assert first["solar-cand-mle"]["prior_tv"] < 0.05 < first["solar-no-preest"]["prior_tv"] - 0.2
