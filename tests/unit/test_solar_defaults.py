"""SoLar's per-dataset defaults come from one table (pllzoo_solar.defaults), first matching pattern wins."""

from __future__ import annotations

from pllzoo_solar import defaults


def test_rows_by_pattern():
    assert defaults.for_dataset("prior", "cifar10lt") == {"est_epochs": 100, "gamma1": 0.1}
    assert defaults.for_dataset("prior", "cifar100lt-h") == {"est_epochs": 20, "gamma1": 0.05}  # OURS_H
    assert defaults.for_dataset("selection", "cifar100lt") == {"rho_end": 0.5}
    assert defaults.for_dataset("loss", "synthetic-lt") == {"warmup_epochs": 10}
    assert defaults.for_dataset("loss", "cifar10lt") == {} and defaults.for_dataset("prior", "lost") == {}


def test_lookup_returns_a_copy():
    defaults.for_dataset("prior", "cifar10lt")["est_epochs"] = 1
    assert defaults.for_dataset("prior", "cifar10lt")["est_epochs"] == 100


def test_components_resolve_the_table_and_the_tabular_rule(registry):
    comps = registry.build_components(registry.method("solar"), dataset=("cifar10lt", "image"))
    assert (comps["estimator"].hp.est_epochs, comps["estimator"].hp.gamma1) == (100, 0.1)
    assert comps["selection"].hp.rho_end == 0.6 and comps["loss"].hp.cr and comps["loss"].hp.mixup
    comps = registry.build_components(registry.method("solar"), dataset=("synthetic-lt", "tabular"))
    assert comps["loss"].hp.warmup_epochs == 10 and not comps["loss"].hp.cr and not comps["loss"].hp.mixup
    assert comps["selection"].hp.warmup_epochs == 10 and comps["estimator"].hp.est_epochs == 10
