"""Strong views computed ahead by worker processes (pllzoo.prefetch): the stream is the documented
per-(batch, chunk) one, whatever the number of workers, and the default CPU path is untouched."""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from pathlib import Path

import pytest
import torch

from pllzoo import PLLZooError, augment, prefetch
from pllzoo.results import run_id
from pllzoo.run import TrainConfig
from pllzoo.seeding import derive_seed
from pllzoo.trainer import Trainer
from conftest import make_fake_images

ROOT = Path(__file__).resolve().parents[1]


def _expected(x, perm, batch_size, n_batches, seed, chunk):
    """The documented stream, computed here in the test process, one chunk at a time."""
    out = []
    for b in range(n_batches):
        rows = x[perm[b * batch_size : (b + 1) * batch_size]]
        parts = [augment.strong(rows[i : i + chunk], torch.Generator().manual_seed(derive_seed(seed, b, i // chunk)))
                 for i in range(0, rows.shape[0], chunk)]
        out.append(torch.cat(parts))
    return out


@pytest.mark.parametrize("workers", [1, 3])
def test_pool_yields_the_documented_stream(workers, monkeypatch):
    monkeypatch.setattr(prefetch, "CHUNK", 8)  # 24-row batches in 3 chunks, the last batch short
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (60, 3, 32, 32), generator=g, dtype=torch.uint8)
    perm = torch.randperm(60, generator=g)
    pool = prefetch.ViewPool(augment.strong, "view 'strong'", workers)
    try:
        got = list(pool.batches(x, perm, 24, 3, seed=11))
    finally:
        pool.close()
    want = _expected(x, perm, 24, 3, 11, 8)
    assert [t.shape[0] for t in got] == [24, 24, 12]
    for a, b in zip(got, want):
        assert a.dtype == torch.uint8 and torch.equal(a, b)


def test_resolve_workers():
    assert prefetch.resolve_workers(None, "cpu") == 0
    assert 1 <= prefetch.resolve_workers(None, "cuda") <= prefetch.MAX_AUTO_WORKERS
    assert prefetch.resolve_workers(3, "cpu") == 3 and prefetch.resolve_workers(0, "cuda:0") == 0
    with pytest.raises(ValueError):
        prefetch.resolve_workers(-1, "cpu")


def test_uses_pool_only_for_pil_strong_views_on_images():
    strong, view = frozenset({"strong"}), augment.VIEWS
    assert prefetch.uses_pool("image", strong, view["strong"]) and prefetch.uses_pool("image", strong, view["simaugment"])
    assert prefetch.uses_pool("image", strong, view["pico-strong"])  # PiCO's own (PIL) strong view
    # PiCO asks for the strong view's input only (``strong_input``: its key encoder's, no pass of the trained
    # network); the pool must compute it all the same (a review: nothing tested it)
    assert prefetch.uses_pool("image", frozenset({"strong_input"}), view["pico-strong"])
    assert not prefetch.uses_pool("tabular", strong, view["strong"])
    assert not prefetch.uses_pool("image", frozenset(), view["strong"])
    assert not prefetch.uses_pool("image", strong, view["weak"])
    assert not prefetch.uses_pool("image", strong, view["strong-batched"])  # a batched tensor op: in the loop
    assert not prefetch.uses_pool("image", strong, lambda x, gen: x)  # an outside view that is not marked


def test_a_pooled_view_the_workers_cannot_be_sent_is_one_line():
    with pytest.raises(PLLZooError, match=r"^view 'my\.v' \(plugin p\) is marked pooled but the view worker "
                                          r"processes cannot import it \(not found as test_prefetch\..*<lambda>\): "
                                          r"make it a module-level function, or run with --view-workers 0$"):
        prefetch.ViewPool(augment.pooled(lambda x, gen: x), "view 'my.v' (plugin p)", 1)


def test_a_view_whose_module_fails_to_import_in_a_worker_is_one_line_with_the_cause(tmp_path, monkeypatch):
    """The import of the view's module in a worker failed inside the pool's own unpickling: the worker died with a
    traceback on stderr and the one line said only BrokenProcessPool (a review).  The task imports it now."""
    (tmp_path / "badview.py").write_text(
        "import os\n"
        "if os.environ.get('BADVIEW_PARENT') != str(os.getpid()):\n"
        "    raise ImportError('libfoo.so not found')\n"
        "def v(x, gen):\n"
        "    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("BADVIEW_PARENT", str(os.getpid()))
    import badview

    pool = prefetch.ViewPool(badview.v, "view 'bad.v' (plugin p)", 1)
    try:
        with pytest.raises(PLLZooError, match=r"^view 'bad.v' \(plugin p\) failed in a view worker process: "
                                              r"(ImportError: libfoo.so not found|ModuleNotFoundError: No module "
                                              r"named 'badview')$"):  # the latter where a worker has another path
            list(pool.batches(torch.zeros(8, 3, 4, 4, dtype=torch.uint8), torch.arange(8), 4, 2, seed=0))
    finally:
        pool.close()
        sys.modules.pop("badview", None)


def test_a_view_failing_in_a_worker_is_one_line_naming_it():
    pool = prefetch.ViewPool(augment.weak, "view 'my.bad' (plugin p)", 1)  # tensors of another shape: refused
    try:
        with pytest.raises(PLLZooError, match=r"^view 'my.bad' \(plugin p\): expected uint8 RGB|^view 'my.bad' "
                                              r"\(plugin p\) (failed|returned)"):
            list(pool.batches(torch.zeros(8, 1, 4, 4, dtype=torch.float32), torch.arange(8), 4, 2, seed=0))
    finally:
        pool.close()


def test_an_outside_copy_of_a_builtin_view_is_pooled_as_the_builtin(registry):
    """The pool was chosen by the view's name: a plugin registering ``augment.strong`` under its own name trained
    in the loop, on another stream, and ignored --view-workers (a review).  The mark decides."""
    registry.views["my.strong"] = (augment.strong, "outside")  # as pllzoo_register_views registers it
    data = make_fake_images(n=32, k=4)
    comps = registry.build_components(
        registry.method("solar"), {"estimator.est_epochs": 0, "loss.first_epoch_rn": False, "loss.warmup_epochs": 0},
        dataset=(data.name, data.kind))
    records = {}
    for name in ("strong", "my.strong"):
        cfg = TrainConfig(model="cnn", epochs=1, lr=0.01, weight_decay=0.0, batch_size=16, strong_view=name)
        trainer = Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"), view_workers=1, registry=registry)
        assert trainer.view_workers == 1, name
        records[name] = trainer.fit()[-1]["loss"]
    assert records["strong"] == records["my.strong"]


def _train(registry, workers: int) -> tuple[list[dict], torch.Tensor]:
    data = make_fake_images(n=64, k=4)
    comps = registry.build_components(
        registry.method("solar"), {"estimator.est_epochs": 0, "loss.first_epoch_rn": False, "loss.warmup_epochs": 0},
        dataset=(data.name, data.kind))
    cfg = TrainConfig(model="cnn", epochs=2, lr=0.01, weight_decay=0.0, batch_size=16)
    trainer = Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"), view_workers=workers)
    assert trainer.view_workers == workers
    records = trainer.fit()
    assert trainer.view_pool is None  # closed after fit
    return records, torch.cat([p.detach().flatten() for p in trainer.model.parameters()])


def test_trainer_pooled_run_is_the_same_for_any_worker_count(registry):
    one, w_one = _train(registry, 1)
    two, w_two = _train(registry, 2)
    loop, w_loop = _train(registry, 0)
    assert all(math.isfinite(r["loss"]) for r in one)
    assert [r["loss"] for r in one] == [r["loss"] for r in two] and torch.equal(w_one, w_two)
    assert not torch.equal(w_one, w_loop)  # a different strong-view stream, as documented


def test_committed_cpu_runs_keep_their_ids():
    """No ``view_stream`` key unless the pool is used, so recorded runs (folders or archived) still resume."""
    from pllzoo import archive

    study = ROOT / "benchmarks" / "cifar10lt-cpu"
    configs = {path.parent.name: json.loads(path.read_text()) for path in study.glob("results-phi*/runs/*/config.json")}
    for out in study.glob("results-phi*"):
        configs.update({r.run: r.config for r in archive.read(out).values()})
    if not configs:
        pytest.skip("no committed CIFAR-10-LT CPU runs")
    for name, config in configs.items():
        assert "view_stream" not in config and run_id(config) == name


def test_plan_marks_pooled_runs(registry, shared_data):
    from pllzoo import bench
    from pllzoo.data.base import DataOptions

    opts = DataOptions(data_dir=shared_data, subset=64)
    (cpu,) = bench.plan(registry, ["solar"], "cifar10lt", [1], opts, epochs=1, device="cpu")
    (pooled,) = bench.plan(registry, ["solar"], "cifar10lt", [1], opts, epochs=1, device="cpu", view_workers=2)
    with pytest.warns(UserWarning, match=r"^--view-workers 2: no planned run computes a strong view per sample"):
        (tabular,) = bench.plan(registry, ["solar"], "synthetic-lt", [1], DataOptions(), epochs=1, device="cpu",
                                view_workers=2)  # said: it would change nothing (it was silent)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="--view-workers")  # not said where one run of several pools
        bench.plan(registry, ["solar", "proden"], "cifar10lt", [1], opts, epochs=1, device="cpu", view_workers=2)
    assert cpu.view_workers == 0 and "view_stream" not in cpu.config
    assert pooled.view_workers == 2 and pooled.config["view_stream"] == "pooled" and pooled.run_id != cpu.run_id
    assert tabular.view_workers == 0 and "view_stream" not in tabular.config
