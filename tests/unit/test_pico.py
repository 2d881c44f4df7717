"""PiCO's prototype update, contrastive losses and a short real run."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pllzoo_baselines.pico import contrastive_loss, prototype_update


def test_prototype_update_equals_sequential():
    g = torch.Generator().manual_seed(0)
    protos = F.normalize(torch.randn(4, 8, generator=g), dim=1)
    q = F.normalize(torch.randn(10, 8, generator=g), dim=1)
    labels = torch.tensor([2, 0, 2, 3, 2, 0, 1, 3, 2, 0])
    expected = protos.clone()
    for qi, c in zip(q, labels):  # the official loop, sample by sample (normalised at the end)
        expected[c] = 0.99 * expected[c] + 0.01 * qi
    expected = F.normalize(expected, dim=1)
    torch.testing.assert_close(prototype_update(protos, q, labels, 0.99), expected)


def test_moco_is_cross_entropy_with_the_key_as_positive():
    q = F.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), dim=1)
    k = q.clone()
    queue = F.normalize(torch.tensor([[1.0, 1.0], [-1.0, 0.0]]), dim=1)
    out = contrastive_loss(q, k, queue, torch.tensor([0, 1]), torch.tensor([0, 1]), 1.0, supervised=False)
    logits = torch.cat([(q * k).sum(1, keepdim=True), q @ queue.T], 1)
    torch.testing.assert_close(out, F.cross_entropy(logits, torch.zeros(2, dtype=torch.long)))


def test_supcon_against_a_loop():
    g = torch.Generator().manual_seed(1)
    q, k = F.normalize(torch.randn(3, 4, generator=g), dim=1), F.normalize(torch.randn(3, 4, generator=g), dim=1)
    queue = F.normalize(torch.randn(5, 4, generator=g), dim=1)
    labels, qlabels = torch.tensor([0, 1, 0]), torch.tensor([1, 1, 0, 2, -1])
    got = contrastive_loss(q, k, queue, labels, qlabels, 0.5, supervised=True)
    feats, all_labels = torch.cat([q, k, queue]), torch.cat([labels, labels, qlabels])
    losses = []
    for i in range(3):
        sims = {j: float(q[i] @ feats[j]) / 0.5 for j in range(len(feats)) if j != i}
        denom = torch.logsumexp(torch.tensor(list(sims.values())), 0)
        pos = [sims[j] - denom for j in sims if all_labels[j] == labels[i]]
        losses.append(-sum(pos) / len(pos))
    torch.testing.assert_close(got, torch.stack(losses).mean().float())


def test_pico_runs_on_images_with_strong_view_and_projection(registry):
    import math

    from conftest import make_fake_images
    from pllzoo.run import TrainConfig
    from pllzoo.trainer import Trainer

    data = make_fake_images()
    comps = registry.build_components(registry.method("pico"), {"loss.queue": 40}, (data.name, data.kind))
    trainer = Trainer(data, comps, TrainConfig(model="cnn", epochs=2, batch_size=16, lr=0.01), 1, torch.device("cpu"))
    records = trainer.fit()
    assert all(math.isfinite(r["loss"]) and math.isfinite(r["contrastive"]) for r in records)
    conf = trainer.state.confidence
    torch.testing.assert_close(conf.sum(1), torch.ones(conf.shape[0]), atol=1e-5, rtol=0)
    assert torch.all(conf[~data.candidates] == 0)
    assert set(trainer.modules) == {"loss.head", "loss.key"}
    # the key encoder moved towards the query encoder but is not trained by the optimizer
    assert not any(p.requires_grad for p in trainer.modules["loss.key"].parameters())


def test_confidence_momentum_follows_the_current_stage_length(registry):
    """An outside review: pico+estimator=solar.prior took E from the final stage (here 1 epoch), so over a longer
    pre-estimation stage m = 0.95 + (e/E)(0.8 − 0.95) fell below 0 and the targets went negative."""
    from pllzoo import PLLState, Stage
    from pllzoo.run import Run, TrainConfig
    from conftest import make_fake_images

    data = make_fake_images()
    comps = registry.build_components(registry.method("pico"), {"loss.queue": 40}, (data.name, data.kind))
    loss = comps["loss"]
    run = Run(data=data, candidates=data.candidates, config=TrainConfig(model="cnn", epochs=1),
              device=torch.device("cpu"), seed=1, stage=Stage("pre-estimation", epochs=20))
    loss.pllzoo_setup_stage(run, PLLState())
    assert loss.epochs == 20 and 0.8 <= loss.confidence_momentum(19) <= 0.95
    run.stage = Stage("train")  # the final stage: E = train.epochs, as before
    loss.pllzoo_setup_stage(run, PLLState())
    assert loss.epochs == 1


def test_confidence_mask_is_not_a_setting_of_pico(registry):
    """An outside review: PiCO inherited PRODEN's ``label_update.mask``; W is never re-normalised, so
    ``mask=candidates`` trained a bit-identical run under another id.  The field keeps its one value (recorded
    PiCO runs keep their ids) and another is refused."""
    import pytest
    from pllzoo import PLLZooError

    comps = registry.build_components(registry.method("pico"), {}, ("synthetic-lt", "tabular"))
    assert comps["label_update"].hp.mask == "support"
    with pytest.raises(PLLZooError, match="label_update.mask"):
        registry.build_components(registry.method("pico"), {"label_update.mask": "candidates"}, ("synthetic-lt", "tabular"))
    proden = registry.build_components(registry.method("proden"), {"label_update.mask": "candidates"},
                                       ("synthetic-lt", "tabular"))
    assert proden["label_update"].hp.mask == "candidates"


def test_only_the_key_encoder_sees_the_strong_view(registry):
    """An outside review: the trained network also ran the strong view (logits PiCO never reads), which moved its
    BatchNorm statistics (8 updates in 4 steps) and cost 20-25 % of an epoch.  Now its BatchNorm counts one batch a
    step, as the key encoder's; loss.query_strong_pass=true is the recorded runs' behaviour; tabular rows keep it."""
    from pllzoo import bench
    from pllzoo.trainer import Trainer
    from conftest import make_fake_images

    data = make_fake_images()
    counts = {}
    for extra in (False, True):
        comps = registry.build_components(registry.method("pico"), {"loss.query_strong_pass": str(extra).lower(),
                                                                    "loss.queue": "40"}, (data.name, data.kind))
        assert comps["loss"].views == {"strong" if extra else "strong_input", "features"}
        cfg = bench.train_config(data, 1, 8, {"model": "cnn"})
        trainer = Trainer(data, comps, cfg, 1, torch.device("cpu"))
        trainer.fit()
        steps = data.num_train // 8
        bn = [m for m in trainer.model.modules() if isinstance(m, torch.nn.BatchNorm2d)][0]
        key_bn = [m for m in trainer.modules["loss.key"].modules() if isinstance(m, torch.nn.BatchNorm2d)][0]
        counts[extra] = (int(bn.num_batches_tracked), int(key_bn.num_batches_tracked), steps)
    assert counts[False][0] == counts[False][1] == counts[False][2]
    assert counts[True][0] == 2 * counts[True][2]
    tabular = registry.build_components(registry.method("pico"), {}, ("lost", "tabular"))
    assert tabular["loss"].hp.query_strong_pass and "strong" in tabular["loss"].views


def test_one_pico_step_by_hand():
    """One call of pico.loss against its algorithm box: the pseudo-label of l.2 is argmax(p ⊙ Y) (here the largest
    probability lies outside the candidate set), the key encoder moves to moco_m·key + (1 − moco_m)·query (l.4),
    and W of the batch's rows becomes m·W + (1 − m)·onehot(argmax(s ⊙ Y)) with s scored against the prototypes from
    before the batch (l.5); the pseudo-labels are enqueued with the keys (l.6).  (A review's mutations of each of
    these passed every other PiCO test.)"""
    from types import SimpleNamespace

    from pllzoo import PLLState, Stage
    from pllzoo.pllnet import PLLNet
    from pllzoo.run import Batch, Step
    from pllzoo_baselines.pico import PiCOHParams, PiCOLoss

    torch.manual_seed(0)
    net = PLLNet(torch.nn.Identity(), torch.nn.Linear(3, 3))
    comp = PiCOLoss(PiCOHParams(low_dim=2, queue=4))
    comp.pllzoo_modules(SimpleNamespace(model=net))
    comp.epochs, comp.epoch, comp.m = 10, 1, 0.9  # epoch ≥ prot_start (1): supervised, l.5 applies
    key_before = [p.clone() for p in comp.key.parameters()]
    query = [p.detach().clone() for p in comp.query.parameters()]
    x = torch.tensor([[0.3, -0.2, 0.5], [-0.4, 0.1, 0.2]])
    cands = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    probs = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.2, 0.3]])  # argmax off the candidates: 2 and 0
    protos = F.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]), dim=1)
    w0 = torch.tensor([[0.0, 0.3, 0.7], [0.6, 0.4, 0.0], [1.0, 0.0, 0.0]])  # rows 1, 0 the batch's; 2 not in it
    state = PLLState({"confidence": w0.clone(), "pico_prototypes": protos.clone(),
                      "pico_queue": torch.zeros(4, 2), "pico_queue_labels": torch.full((4,), -1),
                      "pico_queue_ptr": torch.zeros((), dtype=torch.long)})
    step = Step(batch=Batch(torch.tensor([1, 0]), x, cands, torch.zeros(2, dtype=torch.long)), logits=probs.log(),
                probs=probs, forward=net, generator=torch.Generator(), epoch=1, stage=Stage(), nominal_batch_size=2,
                features=x)
    step.batch.x_strong = x
    comp.pllzoo_loss(step=step, state=state)

    for k, k0, q in zip(comp.key.parameters(), key_before, query):  # l.4
        torch.testing.assert_close(k, 0.999 * k0 + 0.001 * q)
    pseudo = torch.tensor([1, 2])  # argmax(p ⊙ Y): not argmax(p) = (2, 0)
    assert state.pico_queue_labels[:2].tolist() == pseudo.tolist()  # enqueued with the keys
    with torch.no_grad():
        s = torch.softmax(F.normalize(comp.head(x), dim=1) @ protos.T, dim=1)  # the prototypes before the batch
    onehot = F.one_hot((s * cands).argmax(1), 3).float()
    want = w0.clone()
    want[[1, 0]] = 0.9 * w0[[1, 0]] + 0.1 * onehot
    torch.testing.assert_close(state.confidence, want)
    torch.testing.assert_close(step.trained_targets, want[[1, 0]])  # what l.6 trained on, for label_acc


def test_confidence_momentum_of_each_epoch_is_the_after_epoch_update(registry, monkeypatch):
    """l.7 as upstream runs it: ``loss_fn.set_conf_ema_m(epoch, args)`` after training epoch e (0-based) sets
    m = 0.95 + (e/E)(0.8 − 0.95) for epoch e + 1; epoch 0 trains with the constructor's 0.99.  With E = 10:
    0.99, 0.95, 0.935, 0.92, …, 0.83 (the last epoch's m is that of e = 8; m = 0.8 is set after the last epoch and
    never used).  Read through the trainer's own ``pllzoo_on_epoch_start`` calls (epochs numbered from 0 within
    the stage), the steps stubbed out.  (A mutation audit: m from (e + 1)/E, or from the current epoch instead of
    the one before, passed every other PiCO test.)"""
    from conftest import make_tiny_data
    from pllzoo.run import TrainConfig
    from pllzoo.trainer import Trainer

    data = make_tiny_data()
    comps = registry.build_components(registry.method("pico"), {"loss.queue": 16}, (data.name, data.kind))
    loss = comps["loss"]
    assert (loss.hp.conf_ema_start, loss.hp.conf_ema_end) == (0.95, 0.8)  # conf_ema_range "0.95,0.8"
    trainer = Trainer(data, comps, TrainConfig(model="mlp", epochs=10, batch_size=16), 1, torch.device("cpu"))
    seen = []
    monkeypatch.setattr(trainer, "_train_epoch", lambda stage, epoch: seen.append((epoch, loss.m)) or (0.0, {}))
    trainer.fit()
    expected = [0.99] + [0.95 - 0.15 * e / 10 for e in range(9)]  # 0.99, 0.95, 0.935, ..., 0.83
    assert [e for e, _ in seen] == list(range(10))
    assert [m for _, m in seen] == pytest.approx(expected, abs=1e-12)
    assert seen[1][1] == pytest.approx(0.95) and seen[2][1] == pytest.approx(0.935)
