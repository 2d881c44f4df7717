"""HTC (Jia et al., AAAI 2024): its pieces on hand-computed cases, the attention's only gradient path, the
predictor's refusal without the loss's modules, its host reads, and short real runs (``pllzoo_ltpll.htc``)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from pllzoo import PLLState, PLLZooError, Stage
from pllzoo.distributed import SINGLE
from pllzoo.metrics import shot_groups
from pllzoo.run import Batch, Step, TrainConfig
from pllzoo.syncs import count_syncs
from pllzoo.trainer import Trainer
from pllzoo_ltpll.htc import (HTCConfidence, HTCEnsemble, HTCLoss, HTCLossHParams, branch_loss, ensemble, fusion_loss,
                              lin, select, tail_target)
from conftest import make_fake_images, make_tiny_data

PRIOR = torch.tensor([0.5, 0.25, 0.25])  # π^H of the hand cases, K = 3


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Bit-for-bit gradient comparisons and fast tiny runs: one torch thread (conftest.one_torch_thread)."""


def _attention(weight: list[list[float]] | None, bias: list[float]) -> torch.nn.Linear:
    att = torch.nn.Linear(6, 2)
    with torch.no_grad():
        att.weight.copy_(torch.tensor(weight) if weight is not None else torch.zeros(2, 6))
        att.bias.copy_(torch.tensor(bias))
    return att


# ---------------------------------------------------------------------- pure pieces, by hand
def test_ensemble_by_hand():
    z_head, z_tail = torch.zeros(1, 3), torch.tensor([[math.log(2.0), 0.0, 0.0]])
    # q1 = softmax(0 − log π) ∝ 1/π = [2, 4, 4] → [0.2, 0.4, 0.4] (ε = 1e-5 moves it by ~1e-5: atol 1e-5 below)
    # q2 = softmax([ln 2, 0, 0]) = [0.5, 0.25, 0.25]
    # A = 0, bias [−1, 1]: leaky_relu → [−0.01, 1]; a ∝ [e^−0.01, e] = [0.990050, 2.718282]
    # (w1, w2) = a/‖a‖ = [0.990050, 2.718282]/2.892966 = [0.342227, 0.939617]
    # w1·q1 + w2·q2 = [0.068445 + 0.469809, 0.136891 + 0.234904, same] = [0.538254, 0.371795, 0.371795]
    # softmax: e^0.166459 = 1.181110 → [1.181110, 1, 1]/3.181110
    p = ensemble(_attention(None, [-1.0, 1.0]), z_head, z_tail, PRIOR)
    torch.testing.assert_close(p, torch.tensor([[0.371288, 0.314356, 0.314356]]), atol=1e-5, rtol=0)
    # A reads [q1; q2] in that order: row 0 picks q1[0] = 0.2, row 1 picks q2[0] = 0.5, bias 0
    # a = softmax([0.2, 0.5]) ∝ [1.221403, 1.648721], ‖·‖ = 2.051854 → (w1, w2) = [0.595269, 0.803530]
    # mix = [0.119054 + 0.401765, 0.238108 + 0.200883, same] = [0.520819, 0.438990, 0.438990]
    # e^0.081829 = 1.085270 → [1.085270, 1, 1]/3.085270
    picks = [[1.0, 0, 0, 0, 0, 0], [0, 0, 0, 1.0, 0, 0]]
    p = ensemble(_attention(picks, [0.0, 0.0]), z_head, z_tail, PRIOR)
    torch.testing.assert_close(p, torch.tensor([[0.351755, 0.324122, 0.324122]]), atol=1e-5, rtol=0)


def test_ensemble_with_a_class_of_prior_zero_by_hand():
    """A class no training row has as a candidate (π_j = 0; Italian has 11): the code's log(π + ε) gives it
    −log 1e-5 = 11.51 nats of head input against −log 0.5 = 0.69 for the others, so the ensemble predicts it;
    ``zero_prior="exclude"`` leaves it out of both inputs (an outside review: 40 % against the head's 97.5 %
    on a 5-class set with one such label)."""
    zero = torch.tensor([0.5, 0.5, 0.0])
    z_head, z_tail = torch.zeros(2, 3), torch.zeros(2, 3)
    att = _attention(None, [0.0, 0.0])  # a = [0.5, 0.5] → (w1, w2) = (1/√2, 1/√2)
    p = ensemble(att, z_head, z_tail, zero)
    # q1 ∝ [1/(0.5 + ε), 1/(0.5 + ε), 1/ε] → q1[2] = 1e5/(1e5 + 2/(0.5 + 1e-5)) = 0.999960; q2 = 1/3 each
    # mix[2] = (0.999960 + 1/3)/√2 = 0.942781, mix[0] = (0.000020 + 1/3)/√2 = 0.235716
    assert p.argmax(1).tolist() == [2, 2]
    torch.testing.assert_close(p[0, 2] / p[0, 0], torch.tensor(math.exp(0.942781 - 0.235716)), atol=1e-5, rtol=0)
    # excluded: q1 = q2 = [0.5, 0.5, 0]; mix = [1/√2, 1/√2, 0]; e^0.707107 = 2.028115 → [2.028115, 2.028115, 1]/5.05623
    p = ensemble(att, z_head, z_tail, zero, zero_prior="exclude")
    torch.testing.assert_close(p, torch.tensor([[0.401112, 0.401112, 0.197776]] * 2), atol=1e-6, rtol=0)
    assert torch.isfinite(p.log()).all()  # a prediction the trainer accepts (finite logits)
    # with no class of prior 0 the two are the same bits
    z_head, z_tail = torch.randn(4, 3, generator=torch.Generator().manual_seed(0)), torch.randn(4, 3)
    att = _attention([[0.3, -0.2, 0.1, 0.5, 0.0, -0.4]] * 2, [0.1, -0.1])
    assert torch.equal(ensemble(att, z_head, z_tail, PRIOR, zero_prior="exclude"), ensemble(att, z_head, z_tail, PRIOR))


def test_tail_target_by_hand():
    z_head = torch.tensor([[1.0, 0.0, 0.0]], requires_grad=True)
    # softmax(z − 2·log π) ∝ e^z/π² = [e/0.25, 1/0.0625, 1/0.0625] = [10.873127, 16, 16] → /42.873127
    y = tail_target(z_head, PRIOR, tau=2.0)
    torch.testing.assert_close(y, torch.tensor([[0.253612, 0.373194, 0.373194]]), atol=2e-6, rtol=0)
    assert not y.requires_grad  # a target: no gradient through it
    # not masked by Y: with the candidate set {0} the target's argmax is a non-candidate
    assert int(y.argmax(1)) != 0
    # a class without candidate mass (π_j = 0): finite (clamped at 1e-12), the code's log 0 gives NaN; the clamp
    # gives it e^0/1e-24 against e/0.5625 + 1/0.0625: all of the target, to float precision
    zero = torch.tensor([0.75, 0.25, 0.0])
    y0 = tail_target(z_head, zero, tau=2.0)
    assert torch.isfinite(y0).all() and int(y0.argmax(1)) == 2 and float(y0[0, 2]) == 1.0
    # "exclude" leaves it out: softmax over classes 0 and 1 alone, ∝ [e/0.5625, 1/0.0625] = [4.832501, 16]
    y1 = tail_target(z_head, zero, tau=2.0, zero_prior="exclude")
    torch.testing.assert_close(y1, torch.tensor([[4.832501 / 20.832501, 16 / 20.832501, 0.0]]), atol=2e-6, rtol=0)
    # with no class of prior 0 the two are the same bits
    assert torch.equal(tail_target(z_head, PRIOR, 2.0, "exclude"), y)


def test_fusion_loss_by_hand():
    t = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    p = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]])
    # row 0: −ln 0.5 = 0.693147; row 1: −(0.5 ln 0.25 + 0.5 ln 0.5) = 1.039721; mean 0.866434
    torch.testing.assert_close(fusion_loss(t, p), torch.tensor(0.866434), atol=1e-5, rtol=0)


def test_ramp():
    assert [lin(e, 4) for e in (0, 2, 4, 9)] == [0.0, 0.5, 1.0, 1.0]
    assert lin(0, 0) == 1.0  # no ramp: full weight from the start


def test_schedules_and_priors_by_hand():
    w = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])
    state = PLLState({"confidence": w})
    run = SimpleNamespace(config=SimpleNamespace(epochs=10), num_classes=3)
    loss = HTCLoss(HTCLossHParams(ramp_epochs=4))
    expected = {  # e: (η = 0.9·lin(e, 4), α = 0.2 + 0.4·lin(e, 4), ω = 0.5·lin(e, 10))
        0: (0.0, 0.2, 0.0), 2: (0.45, 0.4, 0.1), 4: (0.9, 0.6, 0.2), 8: (0.9, 0.6, 0.4)}
    for epoch, (eta, alpha, omega) in expected.items():
        loss.pllzoo_on_epoch_start(run, epoch, state)
        assert (loss.eta, loss.alpha, loss.omega) == pytest.approx((eta, alpha, omega), abs=1e-12)
    # π^H = column sums / total = [1.5, 1, 1.5]/4; π^T uniform
    torch.testing.assert_close(loss.prior_head, torch.tensor([0.375, 0.25, 0.375]))
    torch.testing.assert_close(loss.prior_tail, torch.full((3,), 1 / 3))
    no_ramp = HTCLoss(HTCLossHParams(ramp_epochs=0))
    no_ramp.pllzoo_on_epoch_start(run, 0, state)
    assert (no_ramp.eta, no_ramp.alpha) == pytest.approx((0.9, 0.6))


def _step(idx, candidates, tail_logits) -> Step:
    idx = torch.tensor(idx)
    batch = Batch(index=idx, x=torch.zeros(len(idx), 1), candidates=candidates, y_true=torch.zeros(len(idx)).long())
    step = Step(batch=batch, logits=torch.zeros(len(idx), 3), probs=torch.full((len(idx), 3), 1 / 3), forward=None,
                generator=None, epoch=0, stage=Stage(), nominal_batch_size=len(idx))
    step.scratch["htc_tail_logits"] = tail_logits
    return step


def test_post_step_moves_w_towards_the_pre_step_tail_prediction():
    cands = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    state, comp = PLLState(), HTCConfidence()
    comp.pllzoo_setup_stage(SimpleNamespace(candidates=cands.bool()), state)  # W = Y/|S|
    torch.testing.assert_close(state.confidence[0], torch.tensor([0.5, 0.5, 0.0]))
    # row 0: softmax([ln 3, 0, 5]) ⊙ Y ∝ [3, 1, 0] → [0.75, 0.25, 0]
    #        W ← 0.4·[0.5, 0.5, 0] + 0.6·[0.75, 0.25, 0] = [0.65, 0.35, 0]
    # row 1: the only candidate keeps everything: [0, 0, 1]
    comp.pllzoo_post_step(_step([0, 1], cands[:2], torch.tensor([[math.log(3.0), 0.0, 5.0], [9.0, 0.0, 0.0]])), state)
    expected = torch.tensor([[0.65, 0.35, 0.0], [0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3]])  # row 2: not in the batch
    torch.testing.assert_close(state.confidence, expected)
    torch.testing.assert_close(comp.pllzoo_label_update(_step([2, 0], cands[[2, 0]], None), state), expected[[2, 0]])
    # every candidate's probability underflows (the code: 0/0 = NaN): the tail prediction on Y is the softmax
    # over Y of the logits, (0.5, 0.5, 0) (pllzoo.losses.normalize_masked); W ← 0.4·[0.65, 0.35, 0] + 0.6·[0.5, 0.5, 0]
    comp.pllzoo_post_step(_step([0], cands[:1], torch.tensor([[-200.0, -200.0, 200.0]])), state)
    torch.testing.assert_close(state.confidence[0], torch.tensor([0.56, 0.44, 0.0]))
    torch.testing.assert_close(state.confidence[0].sum(), torch.tensor(1.0))


def test_selection_budget_by_hand():
    # B = 8, K = 3; classes by argmax u: [0, 0, 0, 0, 1, 1, 1, 2], |B_j| = [4, 3, 1]
    pseudo = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2])
    u = torch.eye(3)[pseudo]
    c = torch.tensor([1.0, 4.0, 2.0, 3.0, 5.0, 1.0, 2.0, 0.0])  # z_i = c_i·u_i: larger c, smaller ℓ_i
    z = c[:, None] * u
    # head, π = [0.5, 0.25, 0.25], α = 0.4: ⌈8·π·0.4⌉ = ⌈[1.6, 0.8, 0.8]⌉ = [2, 1, 1] → k = [2, 1, 1]
    #   class 0 keeps c = 4, 3 (rows 1, 3); class 1 keeps c = 5 (row 4); class 2 its one row 7
    head = select(z, u, PRIOR, 0.4, batch_size=8)
    assert head.tolist() == [False, True, False, True, True, False, False, True]
    # tail, π = 1/3: ⌈8/3·0.4⌉ = ⌈1.067⌉ = 2 → k = [2, 2, 1]; class 1 adds c = 2 (row 6)
    tail = select(z, u, torch.full((3,), 1 / 3), 0.4, batch_size=8)
    assert tail.tolist() == [False, True, False, True, True, False, True, True]
    # a tiny ratio still keeps one row per present class (k_j ≥ 1); an absent class keeps none
    assert select(z[:7], u[:7], PRIOR, 0.01, batch_size=8).sum() == 2


def test_one_selected_row_skips_mixup():
    calls = []

    def forward_with_features(x):
        calls.append(x.shape[0])
        return torch.zeros(x.shape[0], 3), torch.zeros(x.shape[0], 5)

    t = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    batch = Batch(index=torch.arange(2), x=torch.ones(2, 4), candidates=(t > 0).float(), y_true=torch.zeros(2).long())
    g = torch.Generator().manual_seed(0)
    step = SimpleNamespace(targets=t, batch=batch, generator=g, device_generator=g,
                           forward_with_features=forward_with_features, dist=SINGLE)
    z = torch.zeros(2, 3)  # every CE against a distribution is ln 3 = 1.098612
    one = torch.tensor([True, False])
    first = branch_loss(step, z, z, t, one, None, 0.5, 4.0, lambda lg, _: lg)  # first epoch: L_pseu
    torch.testing.assert_close(first, torch.tensor(math.log(3.0)))
    single = branch_loss(step, z, z, t, one, 1, 0.5, 4.0, lambda lg, _: lg)  # η·L_cr + L_pseu, no mixup pass
    torch.testing.assert_close(single, torch.tensor(1.5 * math.log(3.0)))
    assert calls == []
    both = branch_loss(step, z, z, t, torch.tensor([True, True]), 2, 0.5, 4.0, lambda lg, _: lg)
    torch.testing.assert_close(both, torch.tensor(2.0 * math.log(3.0)))  # η·(L_mix + L_cr) + L_pseu
    assert calls == [2]  # one extra pass, on the two selected rows


def test_shot_split_is_pllzoos_not_htcs():
    counts = torch.tensor([5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50])  # CIFAR-10-LT, γ = 100
    sizes = lambda g: (int(g.many.sum()), int(g.medium.sum()), int(g.few.sum()))  # noqa: E731
    assert sizes(shot_groups(counts)) == (3, 4, 3)  # what pllzoo reports for every method, HTC included
    assert sizes(shot_groups(counts, m=4, f=3)) == (4, 3, 3)  # HTC's AccurracyShot(…, 4, 3)


# ---------------------------------------------------------------------- the components in a run
def _trainer(registry, method="htc", hp=None, image=False, epochs=2) -> Trainer:
    data = make_fake_images(n=32) if image else make_tiny_data(n=48)
    comps = registry.build_components(registry.method(method), hp or {}, dataset=(data.name, data.kind))
    cfg = TrainConfig(model="cnn" if image else "mlp", epochs=epochs, lr=0.05, weight_decay=0.0, batch_size=16,
                      strong_view="weak")
    return Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"))


def _grads_of_one_step(registry, fusion_weight: float, epoch: int) -> dict[str, torch.Tensor]:
    trainer = _trainer(registry, hp={"loss.fusion_weight": fusion_weight}, epochs=2)
    stage = trainer.stages()[0]
    trainer._enter_stage(stage)
    trainer.hooks.pllzoo_on_epoch_start(run=trainer.run, epoch=epoch, state=trainer.state)
    gen, vgen = trainer.generators(stage, epoch)
    trainer.step(stage, epoch, torch.arange(16), gen, vgen)  # .grad keeps this step's gradients after SGD
    named = [(f"model.{n}", p) for n, p in trainer.model.named_parameters()]
    named += [(f"{m}.{n}", p) for m, mod in trainer.modules.items() for n, p in mod.named_parameters()]
    return {n: p.grad.clone() for n, p in named}


def test_attention_learns_only_from_the_fusion_loss(registry):
    # epoch 1 of 2: selection, consistency and both mixup passes run, and ω = 0.5·lin(1, 2) = 0.25
    with_f, without = _grads_of_one_step(registry, 0.5, 1), _grads_of_one_step(registry, 0.0, 1)
    att = {n for n in with_f if n.startswith("loss.attention")}
    assert att and all(without[n].abs().max() == 0 for n in att)  # no path to A but L_F
    assert all(with_f[n].abs().max() > 0 for n in att)
    for name in set(with_f) - att:  # L_F reads detached logits: backbone, head and tail see nothing of it
        assert torch.equal(with_f[name], without[name]), name
    assert any(with_f[n].abs().max() > 0 for n in with_f if n.startswith("loss.tail"))
    first = _grads_of_one_step(registry, 0.5, 0)  # epoch 0: ω = 0
    assert all(first[n].abs().max() == 0 for n in att)


def test_a_recipe_without_htc_loss_is_refused(registry):
    with pytest.raises(PLLZooError, match="htc_tail_logits"):  # W's update needs the loss's tail logits
        registry.build_components(registry.method("htc+loss=proden.loss"))


def test_predictor_without_the_losss_modules_fails_clearly(registry):
    comp = HTCEnsemble()
    comp.pllzoo_setup_stage(SimpleNamespace(modules={"loss.head": torch.nn.Linear(2, 2)}))
    state = PLLState({"confidence": torch.full((4, 3), 1 / 3)})
    with pytest.raises(PLLZooError, match=r"no loss\.tail, loss\.attention \(its modules: loss\.head\); use loss="):
        comp.pllzoo_predict(torch.zeros(2, 3), state, torch.zeros(2, 5))
    # in a recipe: refused before training (htc.ensemble needs the key only htc.loss provides)
    with pytest.raises(PLLZooError, match=r"predict 'htc.ensemble' needs 'htc_tail_logits', which none of the other"):
        _trainer(registry, method="proden+predict=htc.ensemble")
    head_only = HTCEnsemble(HTCEnsemble.HParams(output="head"))
    head_only.pllzoo_setup_stage(SimpleNamespace(modules={}))
    logits = torch.randn(2, 3)
    assert torch.equal(head_only.pllzoo_predict(logits, state, torch.zeros(2, 5)), logits)


@pytest.mark.parametrize("image", [False, True], ids=["tabular", "image"])
def test_htc_trains_end_to_end(registry, image):
    trainer = _trainer(registry, image=image)
    assert {"strong", "features"} <= trainer.views
    records = trainer.fit()
    assert len(records) == 2
    for r in records:
        for key in ("loss", "loss_head", "loss_tail", "loss_fusion", "selected_head", "selected_tail"):
            assert math.isfinite(r[key]), (key, r)
    assert records[0]["omega"] == 0.0 and records[1]["omega"] == pytest.approx(0.25)
    assert 0 < records[1]["selected_head"] <= 1 and 0 < records[1]["selected_tail"] <= 1
    assert sorted(trainer.modules) == ["loss.attention", "loss.tail"]
    w, cands = trainer.state.confidence, trainer.candidates
    torch.testing.assert_close(w.sum(1), torch.ones(w.shape[0]), atol=1e-5, rtol=0)
    assert torch.all(w[~cands] == 0) and not torch.equal(w, cands.float() / cands.sum(1, keepdim=True))
    pred = trainer._predict(trainer.x_test)  # the ensemble, through the trainer's checks
    assert pred.shape == trainer.y_test.shape and pred.min() >= 0 and pred.max() < trainer.run.num_classes
    # the predictor's three outputs on the same eval-mode logits and features
    logits, feats = trainer._eval_logits(trainer.x_test, features=True)
    comp = trainer.components["predict"]
    adjusted = comp.pllzoo_predict(logits, trainer.state, feats)
    tail, att = trainer.modules["loss.tail"], trainer.modules["loss.attention"]
    with torch.no_grad():
        expected = ensemble(att, logits, tail(feats), w.sum(0) / w.sum()).log()
    torch.testing.assert_close(adjusted, expected)
    for output, want in (("head", logits), ("tail", tail(feats).detach())):
        other = HTCEnsemble(HTCEnsemble.HParams(output=output))
        other.pllzoo_setup_stage(trainer.run)
        torch.testing.assert_close(other.pllzoo_predict(logits, trainer.state, feats), want)


@pytest.mark.parametrize("zero_prior", ["exclude", "adjust"])
def test_a_label_no_row_has_as_candidate_is_never_predicted(registry, zero_prior):
    """Label 3 is no training row's candidate (π_3 = 0 in W, exactly: W's update is masked by Y): the default
    ensemble never predicts it; the code's formula (``adjust``) gives it +11.5 nats of head input and predicts it
    for some rows (4 of 12 here, on well-separated classes)."""
    import dataclasses

    full = make_tiny_data(n=64, k=4)
    keep, keep_test = full.y_train != 3, full.y_test != 3
    cand = full.candidates[keep].clone()
    cand[:, 3] = False
    data = dataclasses.replace(full, x_train=full.x_train[keep], y_train=full.y_train[keep], candidates=cand,
                               x_test=full.x_test[keep_test], y_test=full.y_test[keep_test])
    hp = {"predict.zero_prior": zero_prior} if zero_prior != "exclude" else {}
    comps = registry.build_components(registry.method("htc"), hp, dataset=(data.name, data.kind))
    cfg = TrainConfig(model="mlp", epochs=2, lr=0.05, weight_decay=0.0, batch_size=16, strong_view="weak")
    trainer = Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"))
    trainer.fit()
    assert float(trainer.state.confidence[:, 3].sum()) == 0.0
    pred = trainer._predict(trainer.x_test)  # through the trainer's checks (finite, [M, K])
    if zero_prior == "exclude":
        assert int((pred == 3).sum()) == 0
    else:
        assert int((pred == 3).sum()) > 0


@pytest.mark.parametrize("image", [False, True], ids=["tabular", "image"])
def test_host_reads_per_step(registry, image):
    """Epoch 0 reads nothing; from epoch 1 one read per step: |R| of both heads together."""
    trainer = _trainer(registry, image=image, epochs=4)
    stage = trainer.stages()[0]
    trainer._enter_stage(stage)
    for epoch, expected in ((0, 0), (3, 1)):
        trainer.hooks.pllzoo_on_epoch_start(run=trainer.run, epoch=epoch, state=trainer.state)
        gen, vgen = trainer.generators(stage, epoch)
        for b in range(2):
            with count_syncs(cuda=False) as syncs:
                _, loss = trainer.step(stage, epoch, torch.arange(16 * b, 16 * (b + 1)), gen, vgen)
            assert syncs.count == expected, (epoch, syncs.ops)
            assert torch.isfinite(loss)
