"""A hyper-parameter added after runs were recorded (``hp(..., unnamed_when=V)``): the run id leaves it out
while it holds V, so the recorded runs keep their ids, and a recorded config without it reads as V (replay,
evaluate), whatever the default is today."""

from __future__ import annotations

from pllzoo.bench import plan
from pllzoo.data.base import DataOptions
from pllzoo.hparams import named, unnamed_values
from pllzoo_solar.refinery import RefineryHParams


def test_the_field_is_named_only_away_from_its_recorded_value():
    assert unnamed_values(RefineryHParams) == {"relax": "check"}
    assert "relax" not in named(RefineryHParams(relax="check"))
    assert named(RefineryHParams(relax="nan"))["relax"] == "nan"


def test_ids_stand_and_a_recorded_config_reads_as_it_ran(registry):
    args = (registry, ["solar"], "synthetic-lt", [1], DataOptions(subset=300))
    (default,) = plan(*args, batch_size=64, device="cpu")
    (check,) = plan(*args, batch_size=64, device="cpu", hp={"label_update.relax": "check"})
    (nan,) = plan(*args, batch_size=64, device="cpu", hp={"label_update.relax": "nan"})
    assert default.run_id == check.run_id != nan.run_id
    assert "relax" not in check.config["hparams"]["label_update"]
    assert registry.recorded_hparams(check.config)["label_update.relax"] == "check"
    assert registry.recorded_hparams(nan.config)["label_update.relax"] == "nan"
