"""SoLar's class-prior estimator (pllzoo_solar.prior): votes, moving average, initial priors, stages (SoLar code: train.py `Trainer.train`, the prior estimation)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pllzoo import PLLState, Stage
from pllzoo.run import Batch, Step, TrainConfig
from pllzoo.trainer import Trainer
from pllzoo.data.candidates import generate_candidates
from pllzoo.data.longtail import img_num_per_cls
from pllzoo_solar.prior import (
    PriorEstimator, PriorHParams, candidate_mle, count_argmax, initial_prior, moving_average,
)


def test_count_argmax_by_hand():
    probs = torch.tensor([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [0.1, 0.2, 0.7], [0.4, 0.4, 0.2]])
    cands = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    # masked rows: (0, .3, .2) → 1; (.5, .3, 0) → 0; (.1, .2, 0) → 1; tie (.4, .4, .2) → first index 0
    votes = count_argmax(probs, cands)
    assert votes.dtype == torch.float32
    assert votes.tolist() == [2.0, 2.0, 0.0]


def test_moving_average_gamma_weights_the_new_estimate():
    r = torch.tensor([0.5, 0.5])
    # r ← γ·z + (1 − γ)·r with γ = 0.1
    for z, expected in [([1.0, 0.0], [0.55, 0.45]), ([0.0, 1.0], [0.495, 0.505]),
                        ([0.25, 0.75], [0.4705, 0.5295])]:
        r = moving_average(r, torch.tensor(z), 0.1)
        torch.testing.assert_close(r, torch.tensor(expected))
    torch.testing.assert_close(moving_average(r, torch.tensor([1.0, 0.0]), 1.0), torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(moving_average(r, torch.tensor([1.0, 0.0]), 0.0), r)


def _tv(a, b):
    return 0.5 * float((a - b).abs().sum())


CANDS = torch.tensor([[1, 1, 0], [0, 1, 0], [1, 1, 1], [0, 0, 1]], dtype=torch.bool)
Y = torch.tensor([0, 1, 1, 2])


def test_initial_prior():
    torch.testing.assert_close(initial_prior("uniform", CANDS, torch.bincount(Y)), torch.full((3,), 1 / 3))
    # Cand-Est: column counts of the candidate matrix (2, 3, 2) / 7
    torch.testing.assert_close(initial_prior("candidates", CANDS, torch.bincount(Y)), torch.tensor([2, 3, 2]) / 7.0)
    # oracle: the training class frequencies (1, 2, 1) / 4
    torch.testing.assert_close(initial_prior("oracle", CANDS, torch.bincount(Y)), torch.tensor([0.25, 0.5, 0.25]))
    # Cand-MLE: see test_candidate_mle_by_hand
    torch.testing.assert_close(initial_prior("cand-mle", CANDS, torch.bincount(Y)), torch.tensor([0, 2 / 3, 1 / 3]))


# ---------------------------------------------------------------------------------------------- Cand-MLE (ours)


def test_candidate_mle_by_hand():
    # sets {0,1}, {1}, {0,1,2}, {2}: log L = log(π0+π1) + log π1 + log 1 + log π2.  Moving mass from
    # π0 to π1 keeps the first term and raises the second, so π0 = 0; then 2·log π1 + log π2 on the
    # simplex peaks at π1 = 2/3, π2 = 1/3.
    pi = candidate_mle(CANDS)
    assert pi.dtype == torch.float32
    torch.testing.assert_close(pi, torch.tensor([0.0, 2 / 3, 1 / 3]), atol=1e-6, rtol=0)


def test_candidate_mle_recovers_the_prior_of_an_exact_population():
    # K = 3, φ = 0.5, π = (0.5, 0.3, 0.2): per true class, the 4 patterns of the two other labels are
    # equally likely; 80 rows reproduce the population exactly (10, 6 and 4 rows per pattern), so
    # the maximum-likelihood prior is π itself.  Cand-Est, column counts, is shrunk towards uniform.
    rows = []
    for label, per_pattern in enumerate((10, 6, 4)):
        others = [j for j in range(3) if j != label]
        for a in (0, 1):
            for b in (0, 1):
                row = [0, 0, 0]
                row[label], row[others[0]], row[others[1]] = 1, a, b
                rows += [row] * per_pattern
    cands = torch.tensor(rows, dtype=torch.bool)
    torch.testing.assert_close(candidate_mle(cands), torch.tensor([0.5, 0.3, 0.2]), atol=1e-6, rtol=0)
    # E[c_j]/N = φ + (1 − φ)·π_j = (0.75, 0.65, 0.6); normalised (0.375, 0.325, 0.3)
    torch.testing.assert_close(initial_prior("candidates", cands, torch.zeros(3)), torch.tensor([0.375, 0.325, 0.3]))


def test_candidate_mle_without_information_is_uniform():
    torch.testing.assert_close(candidate_mle(torch.ones(5, 4, dtype=torch.bool)), torch.full((4,), 0.25))
    # singletons only: the empirical frequencies
    torch.testing.assert_close(candidate_mle(torch.eye(3, dtype=torch.bool)[[0, 0, 0, 2]]),
                               torch.tensor([0.75, 0.0, 0.25]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("phi", [0.3, 0.5])
def test_candidate_mle_on_cifar10lt_sized_candidates(phi):
    # the CIFAR-10-LT γ = 100 counts, uniform candidates drawn by the data generator: Cand-MLE lands
    # within 0.05 TV of the true prior; Cand-Est (0.40-0.45) and the uniform start (0.49) are far
    counts = img_num_per_cls(5000, 10, 100.0)
    labels = np.repeat(np.arange(10), counts)
    cands, _ = generate_candidates(labels, 10, phi, np.random.RandomState(0))
    cands = torch.from_numpy(cands)
    true = torch.tensor(counts, dtype=torch.float32) / sum(counts)
    tv = {init: _tv(initial_prior(init, cands, torch.tensor(counts)), true)
          for init in ("uniform", "candidates", "cand-mle")}
    assert tv["cand-mle"] < 0.05
    assert tv["candidates"] > 0.35 and tv["uniform"] > 0.45


# ---------------------------------------------------------------------------------------------- stages


def test_stages_with_pre_estimation():
    comp = PriorEstimator(PriorHParams(est_epochs=5, gamma1=0.2, gamma2=0.03))
    pre, final = comp.pllzoo_stages(run=None)
    assert (pre.name, pre.epochs, pre.params, pre.carry) == ("pre-estimation", 5, {"gamma": 0.2}, ())
    assert (final.name, final.epochs, final.params, final.carry) == ("train", None, {"gamma": 0.03}, ("prior",))
    assert pre.reinit_model and final.reinit_model  # stage 2 starts from a fresh network


def test_stages_without_pre_estimation():
    (only,) = PriorEstimator(PriorHParams(est_epochs=0, gamma2=0.03)).pllzoo_stages(run=None)
    assert (only.name, only.epochs, only.params) == ("train", None, {"gamma": 0.03})


def test_oracle_stage_plan():
    (only,) = PriorEstimator(PriorHParams(est_epochs=7, init="oracle")).pllzoo_stages(run=None)
    assert (only.name, only.params) == ("train", {"gamma": 0.0})


def test_dataset_defaults(registry):
    assert PriorEstimator.dataset_defaults("cifar10lt", "image") == {"est_epochs": 100, "gamma1": 0.1}
    assert PriorEstimator.dataset_defaults("cifar100lt", "image") == {"est_epochs": 20, "gamma1": 0.05}
    assert PriorEstimator.dataset_defaults("tiny", "tabular") == {}
    method = registry.method("solar")
    for dataset, (epochs, gamma1) in {"cifar10lt": (100, 0.1), "cifar100lt": (20, 0.05)}.items():
        hp = registry.build_components(method, dataset=(dataset, "image"))["estimator"].hp
        assert (hp.est_epochs, hp.gamma1, hp.gamma2) == (epochs, gamma1, 0.01)
    # a recipe's and the user's values override the dataset's
    hp = registry.build_components(registry.method("solar-no-preest"), dataset=("cifar10lt", "image"))["estimator"].hp
    assert hp.est_epochs == 0
    hp = registry.build_components(registry.method("solar-cand-mle"), dataset=("cifar10lt", "image"))["estimator"].hp
    assert (hp.init, hp.est_epochs) == ("cand-mle", 0)


# ---------------------------------------------------------------------------------------------- epoch-end updates

TRAIN_Y = torch.tensor([0, 0, 0, 1, 1, 2, 0, 1])  # true frequencies (4, 3, 1) / 8
TRAIN_CANDS = torch.tensor([
    [1, 1, 0], [1, 0, 1], [1, 1, 1], [0, 1, 1], [1, 1, 0], [0, 1, 1], [1, 0, 0], [0, 1, 1],
], dtype=torch.bool)
EVAL_PROBS = torch.tensor([
    [0.1, 0.8, 0.1],  # cand {0,1} → 1
    [0.2, 0.7, 0.1],  # cand {0,2} → 0
    [0.3, 0.3, 0.4],  # all → 2
    [0.6, 0.3, 0.1],  # cand {1,2} → 1
    [0.5, 0.4, 0.1],  # cand {0,1} → 0
    [0.1, 0.2, 0.7],  # cand {1,2} → 2
    [0.1, 0.1, 0.8],  # cand {0} → 0
    [0.1, 0.1, 0.8],  # cand {1,2} → 2
])  # votes (3, 2, 3) → z = (3, 2, 3) / 8


class _FakeRun:
    """The parts of a Run the estimator reads; counts calls of predict_train."""

    def __init__(self, gamma=None, probs=EVAL_PROBS):
        self.candidates, self.num_classes, self.num_train = TRAIN_CANDS, 3, 8
        self.device = torch.device("cpu")
        self.data = SimpleNamespace(train_counts=torch.bincount(TRAIN_Y, minlength=3))
        self.stage = Stage(params={} if gamma is None else {"gamma": gamma})
        self.calls, self._probs = 0, probs

    def predict_train(self):
        self.calls += 1
        if self._probs is None:
            raise AssertionError("online mode must not run the estimation pass")
        return self._probs


@pytest.mark.parametrize("block", [8192, 3])  # the votes by row blocks (3: blocks of 3, 3, 2 rows) are the same
def test_offline_epoch_end_uses_predict_train(block, monkeypatch):
    import pllzoo_solar.prior as prior

    monkeypatch.setattr(prior, "VOTE_ROWS", block)
    comp, state, run = PriorEstimator(PriorHParams(gamma2=0.01)), PLLState(), _FakeRun(gamma=0.5)
    comp.pllzoo_setup_stage(run, state)
    torch.testing.assert_close(state.prior, torch.full((3,), 1 / 3))
    out = comp.pllzoo_on_epoch_end(run, state)
    assert run.calls == 1
    expected = 0.5 * torch.tensor([3.0, 2.0, 3.0]) / 8 + 0.5 / 3  # the stage's γ, not gamma2
    torch.testing.assert_close(state.prior, expected)
    true = torch.tensor([4.0, 3.0, 1.0]) / 8
    assert out["prior_tv"] == pytest.approx(_tv(expected, true))
    assert out["prior"] == pytest.approx(expected.tolist(), abs=1e-6)
    # a second epoch compounds the moving average
    comp.pllzoo_on_epoch_end(run, state)
    expected = 0.5 * torch.tensor([3.0, 2.0, 3.0]) / 8 + 0.5 * expected
    torch.testing.assert_close(state.prior, expected)
    assert run.calls == 2


def test_gamma_falls_back_to_gamma2():
    comp, state, run = PriorEstimator(PriorHParams(gamma2=0.25)), PLLState(), _FakeRun(gamma=None)
    comp.pllzoo_setup_stage(run, state)
    comp.pllzoo_on_epoch_end(run, state)
    torch.testing.assert_close(state.prior, 0.25 * torch.tensor([3.0, 2.0, 3.0]) / 8 + 0.75 / 3)


def test_setup_keeps_a_carried_prior():
    comp, run = PriorEstimator(), _FakeRun()
    carried = torch.tensor([0.6, 0.3, 0.1])
    state = PLLState({"prior": carried.clone()})
    comp.pllzoo_setup_stage(run, state)
    torch.testing.assert_close(state.prior, carried)
    torch.testing.assert_close(state.prior_votes, torch.zeros(3))


def _step(rows, probs):
    idx = torch.tensor(rows)
    batch = Batch(index=idx, x=torch.zeros(len(rows), 1), candidates=TRAIN_CANDS[idx].float(), y_true=TRAIN_Y[idx])
    return Step(batch=batch, logits=probs.log(), probs=probs, forward=None, generator=None, epoch=0, stage=Stage(),
                nominal_batch_size=len(rows))


def test_online_counts_batches():
    comp, state, run = PriorEstimator(PriorHParams(mode="online")), PLLState(), _FakeRun(gamma=0.5, probs=None)
    comp.pllzoo_setup_stage(run, state)
    # two batches of training-mode predictions: rows (0, 1, 2) and (3, 6)
    comp.pllzoo_post_step(_step([0, 1, 2], EVAL_PROBS[[0, 1, 2]]), state)  # votes 1, 0, 2
    torch.testing.assert_close(state.prior_votes, torch.tensor([1.0, 1.0, 1.0]))
    comp.pllzoo_post_step(_step([3, 6], torch.tensor([[0.1, 0.2, 0.7], [0.2, 0.7, 0.1]])), state)  # 2, 0
    torch.testing.assert_close(state.prior_votes, torch.tensor([2.0, 1.0, 2.0]))
    comp.pllzoo_on_epoch_end(run, state)
    assert run.calls == 0  # no extra estimation pass
    expected = 0.5 * torch.tensor([2.0, 1.0, 2.0]) / 5 + 0.5 / 3
    torch.testing.assert_close(state.prior, expected)
    torch.testing.assert_close(state.prior_votes, torch.zeros(3))  # reset for the next epoch
    # next epoch: only this epoch's votes count
    comp.pllzoo_post_step(_step([4], torch.tensor([[0.1, 0.8, 0.1]])), state)  # cand {0,1} → 1
    comp.pllzoo_on_epoch_end(run, state)
    torch.testing.assert_close(state.prior, 0.5 * torch.tensor([0.0, 1.0, 0.0]) + 0.5 * expected)


def test_offline_ignores_batches():
    comp, state, run = PriorEstimator(), PLLState(), _FakeRun(gamma=0.5)
    comp.pllzoo_setup_stage(run, state)
    comp.pllzoo_post_step(_step([0, 1, 2], EVAL_PROBS[[0, 1, 2]]), state)
    torch.testing.assert_close(state.prior_votes, torch.zeros(3))


def test_oracle_is_fixed():
    comp, state, run = PriorEstimator(PriorHParams(init="oracle")), PLLState(), _FakeRun()
    (stage,) = comp.pllzoo_stages(run)
    run.stage = stage
    comp.pllzoo_setup_stage(run, state)
    true = torch.tensor([4.0, 3.0, 1.0]) / 8
    torch.testing.assert_close(state.prior, true)
    for _ in range(3):
        out = comp.pllzoo_on_epoch_end(run, state)
        torch.testing.assert_close(state.prior, true)
        assert out["prior_tv"] == pytest.approx(0.0, abs=1e-7)


def test_oracle_is_fixed_in_a_real_run(registry, tiny_data):
    comps = registry.build_components(registry.method("solar-oracle"), dataset=("tiny", "tabular"))
    cfg = TrainConfig(model="linear", epochs=2, lr=0.1, weight_decay=0.0, batch_size=16)
    trainer = Trainer(tiny_data, comps, cfg, seed=1, device=torch.device("cpu"))
    records = trainer.fit()
    true = tiny_data.train_counts.float() / tiny_data.num_train
    assert [r["stage"] for r in records] == ["train", "train"]
    torch.testing.assert_close(trainer.state.prior, true)
    assert all(r["prior_tv"] == pytest.approx(0.0, abs=1e-6) for r in records)


def test_prior_carries_over_stages_in_a_real_run(registry, tiny_data):
    """Two stages: the pre-estimation prior is stage 2's starting point (γ1 then γ2)."""
    comps = registry.build_components(
        registry.method("solar"), {"estimator.est_epochs": 1, "estimator.gamma1": 0.5, "estimator.gamma2": 0.25},
        dataset=("tiny", "tabular"),
    )
    cfg = TrainConfig(model="linear", epochs=1, lr=0.1, weight_decay=0.0, batch_size=16)
    trainer = Trainer(tiny_data, comps, cfg, seed=1, device=torch.device("cpu"))
    priors = []
    trainer.on_epoch = lambda records: priors.append(trainer.state.prior.clone())
    records = trainer.fit()
    assert [r["stage"] for r in records] == ["pre-estimation", "train"]
    uniform = torch.full((4,), 0.25)
    z1 = (priors[0] - 0.5 * uniform) / 0.5  # the first estimate, recovered from r1 = 0.5·z1 + 0.5·r0
    assert torch.all(z1 >= -1e-6) and float(z1.sum()) == pytest.approx(1.0, abs=1e-5)
    z2 = (priors[1] - 0.75 * priors[0]) / 0.25  # stage 2 starts from r1 and uses γ2
    assert torch.all(z2 >= -1e-5) and float(z2.sum()) == pytest.approx(1.0, abs=1e-5)
    # the votes are multiples of 1/N
    n = tiny_data.num_train
    torch.testing.assert_close(z1 * n, (z1 * n).round(), atol=1e-3, rtol=0)
    torch.testing.assert_close(z2 * n, (z2 * n).round(), atol=1e-3, rtol=0)


def test_online_mode_in_a_real_run(registry, tiny_data):
    comps = registry.build_components(
        registry.method("solar"), {"estimator.est_epochs": 1, "estimator.mode": "online", "estimator.gamma1": 1.0},
        dataset=("tiny", "tabular"),
    )
    cfg = TrainConfig(model="linear", epochs=1, lr=0.1, weight_decay=0.0, batch_size=32)
    trainer = Trainer(tiny_data, comps, cfg, seed=1, device=torch.device("cpu"))

    def no_pass():
        raise AssertionError("online mode must not run the estimation pass")

    trainer.run.predict_train = no_pass
    priors = []
    trainer.on_epoch = lambda records: priors.append(trainer.state.prior.clone())
    records = trainer.fit()
    assert len(records) == 2
    # γ1 = 1: after stage 1 the prior is exactly this epoch's vote share over the 3 × 32 rows seen
    votes = priors[0] * 96
    torch.testing.assert_close(votes, votes.round(), atol=1e-4, rtol=0)
    assert float(priors[1].sum()) == pytest.approx(1.0, abs=1e-6)
    torch.testing.assert_close(trainer.state.prior_votes, torch.zeros(4))


def test_candidate_mle_over_candidates_alone_equals_the_dense_iteration(monkeypatch):
    """Many classes: few rows are identical, so the EM runs on the patterns' candidates (O(nnz)); the same
    update summed in another order (an outside review: 0.5 s an iteration at K = 200, 50,000 rows)."""
    import pllzoo_solar.prior as prior

    g = torch.Generator().manual_seed(0)
    k, n = 60, 3000
    y = torch.multinomial(torch.linspace(1.0, 0.02, k), n, replacement=True, generator=g)
    cands = torch.rand(n, k, generator=g) < 0.04
    cands[torch.arange(n), y] = True
    dense = candidate_mle(cands)
    monkeypatch.setattr(prior, "SPARSE_EM_ENTRIES", 0)
    with _Calls() as calls:
        sparse = candidate_mle(cands)
    assert "index_add_" in calls.names  # the path over the candidates ran
    torch.testing.assert_close(sparse, dense, atol=1e-6, rtol=0)
    assert not torch.equal(dense, torch.full((k,), 1.0 / k))  # it moved from the uniform start


class _Calls(torch.overrides.TorchFunctionMode):
    """The torch functions a block calls, by name (a spy on which path a function takes)."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.add(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def test_candidate_mle_iterates_over_candidates_at_the_reviewed_size():
    """At the size an outside review timed (K = 200, tens of thousands of distinct candidate sets: 0.5 s an
    iteration densely) the EM takes the O(nnz) path (``index_add_`` over the candidates); a few classes, whose rows
    repeat (at most 2^K − 1 patterns), keep the dense one.  One iteration each: the path, not the answer
    (``test_candidate_mle_over_candidates_alone_equals_the_dense_iteration`` compares the answers)."""
    g = torch.Generator().manual_seed(0)
    many = torch.rand(25_000, 200, generator=g) < 0.04  # 25,000 patterns x 200 classes: 5e6 entries > 2**22
    many[:, 0] = True
    few = torch.rand(25_000, 4, generator=g) < 0.5
    few[:, 0] = True
    with _Calls() as sparse:
        candidate_mle(many, max_iter=1)
    with _Calls() as dense:
        candidate_mle(few, max_iter=1)
    assert "index_add_" in sparse.names and "index_add_" not in dense.names
