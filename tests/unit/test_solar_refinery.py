"""SoLar's Sinkhorn label refinery (pllzoo_solar.refinery): queue, targets, confidences (SoLar code: train.py `train_loop`, utils/utils_algo.py `sinkhorn`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import pllzoo_solar.refinery as refinery
from pllzoo import PLLState, Stage
from pllzoo.run import Batch, Step
from pllzoo_solar.refinery import RefineryHParams, SinkhornRefinery
from pllzoo_solar.sinkhorn import row_kernel, sinkhorn

K, B, N = 3, 4, 12
G = torch.Generator().manual_seed(7)
CANDS = torch.rand(N, K, generator=G) < 0.7
CANDS[torch.arange(N), torch.arange(N) % K] = True  # every class is some rows' candidate
PRIOR = torch.tensor([0.5, 0.3, 0.2])


def _run(batch_size=B):
    return SimpleNamespace(num_classes=K, config=SimpleNamespace(batch_size=batch_size), candidates=CANDS,
                           device=torch.device("cpu"))


def _step(t: int):
    """The t-th batch: rows (4t .. 4t+3) mod N, fresh logits."""
    idx = (torch.arange(B) + B * t) % N
    logits = torch.randn(B, K, generator=torch.Generator().manual_seed(100 + t))
    batch = Batch(index=idx, x=torch.zeros(B, 1), candidates=CANDS[idx].float(), y_true=idx % K)
    return Step(batch=batch, logits=logits, probs=torch.softmax(logits, 1), forward=None, generator=None, epoch=0,
                stage=Stage(), nominal_batch_size=B)


def _log_c(step):
    """log(p ⊙ Y): −inf outside candidates."""
    return torch.log(step.probs * step.batch.candidates)


def _same(a, b):
    """Equal up to float32 rounding (log-softmax vs log of the softmax), −inf at the same places."""
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


@pytest.fixture
def calls(monkeypatch):
    """Every call of the Sinkhorn solver by the refinery: (scores, kwargs, result)."""
    seen = []
    real = refinery.sinkhorn

    def spy(scores, r, **kw):
        result = real(scores, r, **kw)
        seen.append((scores.clone(), r.clone(), kw, result))
        return result

    monkeypatch.setattr(refinery, "sinkhorn", spy)
    return seen


def _setup(**hp):
    comp, state = SinkhornRefinery(RefineryHParams(**hp)), PLLState({"prior": PRIOR.clone()})
    comp.pllzoo_setup_stage(_run(), state)
    return comp, state


def test_setup_stage():
    comp, state = _setup(queue_length=2)
    torch.testing.assert_close(state.confidence, CANDS.float() / CANDS.float().sum(1, keepdim=True))
    assert state.queue.shape == (2 * B, K) and torch.all(state.queue == float("-inf"))
    assert int(state.queue_ptr) == 0 and int(state.queue_filled) == 0
    assert state.sinkhorn_log_beta.numel() == 0  # empty: the first solve starts cold
    assert {"prior"} == set(SinkhornRefinery.needs) and "confidence" in SinkhornRefinery.provides


def test_queue_ring_buffer(calls):
    comp, state = _setup(queue_length=2)  # 2 × B = 8 rows
    steps = [_step(t) for t in range(6)]
    lc = [_log_c(s) for s in steps]
    expected_queue = [
        [lc[0], None],  # after push 1 (rows 0..3), rows 4..7 still empty
        [lc[0], lc[1]],  # full: 2 × B rows pushed
        [lc[2], lc[1]],  # wraps around: rows 0..3
        [lc[2], lc[3]],
        [lc[4], lc[3]],
        [lc[4], lc[5]],
    ]
    for t, step in enumerate(steps):
        before = state.queue.clone()
        q = comp.pllzoo_label_update(step, state)
        scores = calls[-1][0]
        if t < 2:  # the queue is not full yet: Sinkhorn sees the batch alone
            assert scores.shape == (B, K)
            _same(scores, lc[t])
        else:  # [queue (as it was before this push); batch]
            assert scores.shape == (2 * B + B, K)
            assert torch.equal(scores[: 2 * B], before)
            _same(scores[2 * B:], lc[t])
        torch.testing.assert_close(q, calls[-1][3].q[-B:], rtol=0, atol=0)  # the batch's own rows of Q
        top, bottom = expected_queue[t]
        _same(state.queue[:B], top)
        if bottom is None:
            assert torch.all(state.queue[B:] == float("-inf"))
        else:
            _same(state.queue[B:], bottom)
        assert int(state.queue_filled) == min((t + 1) * B, 2 * B) and int(state.queue_ptr) == ((t + 1) * B) % (2 * B)
    # the queue holds log C = masked log-softmax, the same masks as the batch rows
    assert torch.equal(torch.isfinite(state.queue[:B]), steps[4].batch.candidates.bool())


def test_queue_not_multiple_of_rows_wraps_modulo_length(calls):
    comp, state = _setup(queue_length=3)  # 12 rows: fills after 3 pushes
    lc = []
    for t in range(5):
        step = _step(t)
        lc.append(_log_c(step))
        comp.pllzoo_label_update(step, state)
        assert calls[-1][0].shape[0] == (B if t < 3 else 4 * B)
    _same(state.queue, torch.cat([lc[3], lc[4], lc[2]]))


def test_targets_and_marginals(calls):
    # a tight solve so that the column marginal of the full Q can be checked to 1e-4
    comp, state = _setup(queue_length=1, tol=1e-6, max_iter=5000)
    for t in range(3):
        step = _step(t)
        q = comp.pllzoo_label_update(step, state)
        scores, r, kw, result = calls[-1]
        assert kw["lam"] == 3.0 and torch.equal(r, PRIOR)
        cand = step.batch.candidates.bool()
        assert torch.isfinite(q).all() and (q >= 0).all()
        torch.testing.assert_close(q.sum(1), torch.ones(B), atol=1e-5, rtol=0)
        assert torch.all(q[~cand] == 0)
        assert torch.all(cand[torch.arange(B), q.argmax(1)])  # ŷ ∈ S_i
        n_rows = scores.shape[0]  # Ñ = B, then queue + batch = 2B
        assert n_rows == (B if t == 0 else 2 * B)
        torch.testing.assert_close(result.q.sum(0), n_rows * PRIOR, atol=1e-4 * n_rows, rtol=0)
        assert step.logs["pseudo_acc"] == pytest.approx(float((q.argmax(1) == step.batch.y_true).float().mean()))


def test_post_step_writes_normalised_masked_predictions():
    comp, state = _setup()
    before = state.confidence.clone()
    step = _step(1)  # rows 4..7
    comp.pllzoo_post_step(step, state)
    p, y = step.probs, step.batch.candidates
    expected = (p * y) / (p * y).sum(1, keepdim=True)
    torch.testing.assert_close(state.confidence[4:8], expected)
    torch.testing.assert_close(state.confidence[4:8].sum(1), torch.ones(B))
    assert torch.all(state.confidence[4:8][~y.bool()] == 0)
    torch.testing.assert_close(state.confidence[:4], before[:4])
    torch.testing.assert_close(state.confidence[8:], before[8:])


def test_post_step_never_writes_a_zero_row_when_the_candidates_underflow():
    """A row whose candidates' probabilities all underflow (the network puts its mass on a non-candidate) used to
    become an all-zero confidence row, which dropped the sample from ℓ_rn; it is now the softmax of its logits over
    its candidates (the same weights in exact arithmetic), and every other row is as before, bit for bit."""
    comp, state = _setup()
    step = _step(1)
    cand = step.batch.candidates
    i = int((cand < 1).any(1).nonzero()[0])  # a row with a label outside its candidate set
    outside = int((cand[i] == 0).nonzero()[0])
    step.logits[i] = -200.0
    step.logits[i, outside] = 200.0  # p of every candidate of row i underflows to 0
    step.probs = torch.softmax(step.logits, 1)
    assert float((step.probs[i] * cand[i]).sum()) == 0.0
    comp.pllzoo_post_step(step, state)
    row = state.confidence[step.batch.index[i]]
    on = cand[i].bool()
    torch.testing.assert_close(row[on], torch.full((int(on.sum()),), 1.0 / int(on.sum())))  # equal logits: uniform
    assert torch.all(row[~on] == 0)
    others = torch.arange(B) != i
    p, y = step.probs[others], cand[others]
    assert torch.equal(state.confidence[step.batch.index[others]], (p * y) / (p * y).sum(1, keepdim=True))


def test_warm_start_state(calls):
    comp, state = _setup(queue_length=1)
    for t in range(3):
        previous = state.sinkhorn_log_beta.clone()
        comp.pllzoo_label_update(_step(t), state)
        kw, result = calls[-1][2], calls[-1][3]
        if t == 0:
            assert kw["log_beta0"] is None  # the first solve of a stage starts cold
        else:
            torch.testing.assert_close(kw["log_beta0"], previous)  # from the previous step's scalings
        torch.testing.assert_close(state.sinkhorn_log_beta, result.log_beta)  # and stores this step's
        assert state.sinkhorn_log_beta.shape == (K,)
    # a new stage forgets the scalings
    comp.pllzoo_setup_stage(_run(), state)
    comp.pllzoo_label_update(_step(0), state)
    assert calls[-1][2]["log_beta0"] is None


@pytest.mark.parametrize("hp", [dict(warm_start=False), dict(warm_start=False, stop="fixed", max_iter=7),
                                dict(warm_start=True, stop="fixed", max_iter=7)])
def test_cold_start_when_warm_start_is_off_or_fixed(calls, hp):
    comp, state = _setup(queue_length=1, **hp)
    for t in range(3):
        comp.pllzoo_label_update(_step(t), state)
        kw = calls[-1][2]
        assert kw["log_beta0"] is None  # fixed-50 runs are the reference's iterates: always cold
        assert kw["stop"] == hp.get("stop", "tol")
        if "max_iter" in hp:
            assert kw["max_iter"] == 7 and calls[-1][3].iters == 7


def _partial_step(t: int, rows: int):
    """A last, incomplete batch (``drop_last=False``): fewer rows than the nominal B."""
    step = _step(t)
    idx = step.batch.index[:rows]
    batch = Batch(index=idx, x=torch.zeros(rows, 1), candidates=CANDS[idx].float(), y_true=idx % K)
    logits = step.logits[:rows]
    return Step(batch=batch, logits=logits, probs=torch.softmax(logits, 1), forward=None, generator=None, epoch=0,
                stage=Stage(), nominal_batch_size=B)


def test_incomplete_batch_before_the_queue_is_full(calls):
    comp, state = _setup(queue_length=3)  # 12 rows
    comp.pllzoo_label_update(_step(0), state)  # rows 0..3
    comp.pllzoo_label_update(_partial_step(1, 2), state)  # 2 rows of an incomplete batch
    comp.pllzoo_label_update(_step(2), state)
    q = comp.pllzoo_label_update(_step(3), state)  # the queue counts as full here
    scores = calls[-1][0]
    assert torch.isfinite(scores).any(1).all()  # every Sinkhorn row has a candidate
    torch.testing.assert_close(q.sum(1), torch.ones(B), atol=1e-5, rtol=0)


def _random_steps(n_steps: int, k: int, b: int, seed: int, phi: float = 0.35):
    """Steps with fresh logits and sparse random candidate sets; one incomplete batch in the middle."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in range(n_steps):
        rows = b // 2 if t == n_steps // 2 else b
        cand = torch.rand(rows, k, generator=g) < phi
        cand[torch.arange(rows), torch.randint(k, (rows,), generator=g)] = True
        logits = 3.0 * torch.randn(rows, k, generator=g)
        batch = Batch(index=torch.arange(rows), x=torch.zeros(rows, 1), candidates=cand.float(),
                      y_true=torch.zeros(rows, dtype=torch.long))
        out.append(Step(batch=batch, logits=logits, probs=torch.softmax(logits, 1), forward=None, generator=None,
                        epoch=1, stage=Stage(), nominal_batch_size=b))
    return out


@pytest.mark.parametrize("hp", [dict(), dict(stop="fixed"), dict(tol=1e-5, max_iter=300)])
def test_kernel_queue_equals_solving_from_scratch(calls, hp):
    """The refinery's kept kernel rows give the solution of ``sinkhorn`` on [queue; batch] built from
    scratch, step after step: through the ring's wrap-around, an incomplete batch, prior changes and
    relaxed (infeasible) problems."""
    k, b = 6, 8
    comp, state = _refinery(k, b, **hp)
    priors = [torch.full((k,), 1.0 / k), torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05, 0.0]),
              torch.softmax(torch.randn(k, generator=torch.Generator().manual_seed(3)), 0)]
    relaxed, log_beta = [], None
    for t, step in enumerate(_random_steps(16, k, b, seed=1)):
        state.prior = priors[t // 6]  # an epoch end moves the prior
        q = comp.pllzoo_label_update(step, state)
        scores, r, kw, got = calls[-1]
        kw = {key: v for key, v in kw.items() if key != "kernel"}
        expected = sinkhorn(scores, r, **{**kw, "log_beta0": log_beta if kw["log_beta0"] is not None else None})
        torch.testing.assert_close(q, expected.q[-step.batch.size:], atol=1e-6, rtol=0)
        assert torch.equal(q, expected.q[-step.batch.size:])  # on the CPU the same operations: bitwise
        torch.testing.assert_close(got.q, expected.q, atol=1e-6, rtol=0)  # the queue rows too
        assert int(got.iters) == int(expected.iters) and bool(got.relaxed) == bool(expected.relaxed)
        torch.testing.assert_close(got.log_beta, expected.log_beta, atol=0, rtol=0, equal_nan=True)
        relaxed.append(bool(got.relaxed))
        log_beta = expected.log_beta
    assert any(relaxed) and not all(relaxed)  # both kinds of problem were met
    kq = comp._kq
    fresh = row_kernel(state.queue, 3.0, check=False)  # the running sums equal a recount of the queue
    assert torch.equal(kq.stats, fresh.stats) and torch.equal(kq.v[: kq.rows], fresh.v)
    assert torch.equal(kq.e[: kq.rows], fresh.v.exp()) and torch.equal(kq.cand[: kq.rows], fresh.v.isfinite())


def test_kernel_queue_lists_its_candidates_for_the_sparse_path(calls):
    """With sparse candidate sets (density ≤ 0.15) the CSR mat-vecs take the queue's listed candidates instead
    of scanning the [Ñ, K] mask (an outside review: the scan was most of a step at K = 1000): the same q as a
    solve from scratch, bit for bit, through the ring's wrap-around, an incomplete batch and rows with more
    candidates than any before (the list widens)."""
    from pllzoo_solar.kernel import candidate_entries

    k, b = 20, 32
    comp, state = _refinery(k, b)
    widths, sparse = [], []
    steps = _random_steps(14, k, b, seed=2)
    g = torch.Generator().manual_seed(2)
    for t, step in enumerate(steps):  # two candidates a row, three after step 8: density 0.1, then 0.15
        cand = torch.zeros_like(step.batch.candidates)
        cand.scatter_(1, torch.rand(cand.shape, generator=g).argsort(1)[:, :2 + (t > 8)], 1.0)
        step.batch.candidates = cand
    for step in steps:
        q = comp.pllzoo_label_update(step, state)
        scores, r, kw, got = calls[-1]
        expected = sinkhorn(scores, r, **{key: v for key, v in kw.items() if key != "kernel"})
        assert torch.equal(q, expected.q[-step.batch.size:]) and torch.equal(got.log_beta, expected.log_beta)
        sparse.append(got.sparse)
        widths.append(comp._kq.classes.shape[1])
    kq = comp._kq
    rows, cols = kq._entries(kq.rows)
    want_rows, want_cols = candidate_entries(kq.cand[:kq.rows])
    assert torch.equal(rows, want_rows) and torch.equal(cols, want_cols)
    # took the list (rows listed at the first sparse solve, two classes wide), and it widened to three
    assert sum(sparse[3:9]) >= 2 and sum(sparse[9:]) >= 3 and 2 in widths and widths[-1] == 3
    assert widths[:3] == [1, 1, 1]  # nothing listed while the queue fills (the batch alone is solved)


def test_a_dense_problem_lists_no_candidates(calls):
    """The list is read by the sparse path alone: on dense candidate sets (density ≈ 0.55, CIFAR at φ = 0.5) no row
    is listed (a speed review: each batch was listed twice a step, ~10 % of a SoLar epoch on synthetic-lt), and
    the solutions are those of a solve from scratch; the rows listed once a sparse solve comes are the mask's."""
    from pllzoo_solar.kernel import candidate_entries

    k, b = 6, 8
    comp, state = _refinery(k, b)
    for step in _random_steps(9, k, b, seed=5, phi=0.5):
        q = comp.pllzoo_label_update(step, state)
        scores, r, kw, got = calls[-1]
        expected = sinkhorn(scores, r, **{key: v for key, v in kw.items() if key != "kernel"})
        assert torch.equal(q, expected.q[-step.batch.size:]) and not got.sparse
    kq = comp._kq
    assert kq.full and bool(kq.unlisted[:kq.rows].all()) and kq.classes.shape[1] == 1 and int(kq.count.sum()) == 0
    rows, cols = kq._entries(kq.rows)  # what a sparse solve would read: listed now, once
    want_rows, want_cols = candidate_entries(kq.cand[:kq.rows])
    assert torch.equal(rows, want_rows) and torch.equal(cols, want_cols) and not bool(kq.unlisted[:kq.rows].any())


def test_kernel_queue_rebuilt_after_a_restore():
    """A restored state (new tensors, as ``PLLState.load_state_dict`` makes) continues exactly as an
    uninterrupted run; the host copy of ``queue_filled`` is read once, from the restored state."""
    k, b = 5, 8
    run = SimpleNamespace(num_classes=k, config=SimpleNamespace(batch_size=b),
                          candidates=torch.ones(4, k, dtype=torch.bool), device=torch.device("cpu"))
    steps = _random_steps(9, k, b, seed=4, phi=0.5)
    prior = torch.tensor([0.3, 0.25, 0.2, 0.15, 0.1])

    def fresh():
        comp, state = SinkhornRefinery(RefineryHParams(queue_length=2)), PLLState({"prior": prior.clone()})
        comp.pllzoo_setup_stage(run, state)
        return comp, state

    comp, state = fresh()
    straight = [comp.pllzoo_label_update(s, state) for s in steps]
    comp, state = fresh()
    resumed = [comp.pllzoo_label_update(s, state) for s in steps[:3]]  # the queue (16 rows) is not full yet
    saved = state.state_dict()
    comp, state = fresh()  # a new process: new component, new state
    state.load_state_dict(saved, "cpu")
    resumed += [comp.pllzoo_label_update(s, state) for s in steps[3:]]
    for a, c in zip(straight, resumed):
        assert torch.equal(a, c)
    assert comp._kq.full and comp._kq.queue is state.queue


def _two_candidate_steps(n_steps: int, k: int, b: int, seed: int) -> list:
    """:func:`_random_steps` with exactly two candidates a row: density 2/K, sparse enough at K = 20 (0.1 ≤ 0.15)
    for the CSR path, which reads the queue's listed candidates."""
    steps = _random_steps(n_steps, k, b, seed=seed)
    g = torch.Generator().manual_seed(seed)
    for step in steps:
        cand = torch.zeros_like(step.batch.candidates)
        cand.scatter_(1, torch.rand(cand.shape, generator=g).argsort(1)[:, :2], 1.0)
        step.batch.candidates = cand
    return steps


def _refinery(k: int, b: int, queue_length: int = 3, **hp):
    """A refinery with a queue of ``queue_length`` batches of ``b`` rows, set up for ``k`` classes, prior uniform."""
    comp = SinkhornRefinery(RefineryHParams(queue_length=queue_length, **hp))
    state = PLLState({"prior": torch.full((k,), 1.0 / k)})
    comp.pllzoo_setup_stage(SimpleNamespace(num_classes=k, config=SimpleNamespace(batch_size=b),
                                            candidates=torch.ones(4, k, dtype=torch.bool),
                                            device=torch.device("cpu")), state)
    return comp, state


def test_kernel_queue_rebuilt_after_a_restore_lists_the_restored_rows(calls):
    """The restore of ``test_kernel_queue_rebuilt_after_a_restore`` where the solves take the sparse path (K = 20,
    two candidates a row): the rebuilt queue lists the restored rows' candidates, else the CSR mat-vecs would see
    only the rows pushed since (an outside mutation audit).  Step for step the uninterrupted run's q, bit for bit."""
    from pllzoo_solar.kernel import candidate_entries

    k, b = 20, 32
    steps = _two_candidate_steps(9, k, b, seed=4)
    comp, state = _refinery(k, b, queue_length=2)
    straight = [comp.pllzoo_label_update(s, state) for s in steps]
    comp, state = _refinery(k, b, queue_length=2)
    resumed = [comp.pllzoo_label_update(s, state) for s in steps[:3]]  # the queue (64 rows) is full after step 2
    saved = state.state_dict()
    comp, state = _refinery(k, b, queue_length=2)  # a new process
    state.load_state_dict(saved, "cpu")
    kq = comp._kernels(state, b)  # rebuilt from the restored queue (else at the next step)
    rows, cols = kq._entries(kq.rows)  # checked before a solve: a short list makes CSR indices run past the values
    want_rows, want_cols = candidate_entries(kq.cand[:kq.rows])
    assert torch.equal(rows, want_rows) and torch.equal(cols, want_cols)
    calls.clear()
    resumed += [comp.pllzoo_label_update(s, state) for s in steps[3:]]
    assert comp._kq is kq and sum(got.sparse for *_, got in calls) >= 3  # the path under test (relaxed: dense)
    for t, (a, c) in enumerate(zip(straight, resumed)):
        assert torch.equal(a, c), t


def test_a_sync_free_stretch_stops_the_listing_for_good():
    """Inside ``count_syncs`` host reads are not free, so the queue stops listing candidates (the list's width is a
    host read); the rows pushed then are unlisted, so it must not list again after the stretch (an outside mutation
    audit: a stale list fed the CSR mat-vecs).  The same q as a run that never entered the stretch: bit for bit
    outside it, to float32 rounding inside (the sync-free solve takes the dense mat-vecs)."""
    from pllzoo.syncs import count_syncs

    k, b = 20, 32
    steps = _two_candidate_steps(12, k, b, seed=2)
    comp, state = _refinery(k, b, queue_length=3)
    plain = [comp.pllzoo_label_update(s, state) for s in steps]
    comp, state = _refinery(k, b, queue_length=3)
    toggled = []
    for t, step in enumerate(steps):
        if 4 <= t < 6:  # the queue is full from step 3
            with count_syncs(cuda=False):
                toggled.append(comp.pllzoo_label_update(step, state))
        else:
            toggled.append(comp.pllzoo_label_update(step, state))
    assert not comp._kq.listed
    for t, (a, c) in enumerate(zip(plain, toggled)):
        if 4 <= t < 6:
            torch.testing.assert_close(a, c, atol=1e-6, rtol=0)
        else:
            assert torch.equal(a, c), t


def test_sparse_solves_read_the_queues_list_not_the_mask(monkeypatch, calls):
    """The point of the list: a sparse solve over [queue; batch] takes the queue's listed candidates
    (``KernelQueue._entries``, O(Ñ·s_max)) and never scans the [Ñ, K] mask (``candidate_entries`` in the kernel
    module, O(ÑK): most of a SoLar step at K = 1000, an outside review)."""
    import pllzoo_solar.kernel as kernel
    from pllzoo_solar.kernel_queue import KernelQueue

    seen = {"entries": 0, "scan": 0}
    real_entries, real_scan = KernelQueue._entries, kernel.candidate_entries

    def entries(self, hi):
        seen["entries"] += 1
        return real_entries(self, hi)

    def scan(cand):
        seen["scan"] += 1
        return real_scan(cand)

    monkeypatch.setattr(KernelQueue, "_entries", entries)
    monkeypatch.setattr(kernel, "candidate_entries", scan)
    k, b = 20, 32
    comp, state = _refinery(k, b, queue_length=3)
    for t, step in enumerate(_two_candidate_steps(12, k, b, seed=2)):
        if t == 3:  # the queue is full from here (3 batches of 32): the problems are [queue; batch]
            seen.update(entries=0, scan=0)
        comp.pllzoo_label_update(step, state)
    full_sparse = sum(got.sparse for *_, got in calls[3:])
    assert full_sparse >= 3 and seen["entries"] >= full_sparse and seen["scan"] == 0
