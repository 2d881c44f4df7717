"""PRODEN's label update on a hand-computed 3-sample case."""

from __future__ import annotations

import torch

from pllzoo import PLLState, Stage
from pllzoo.run import Batch, Step
from pllzoo_baselines.proden import Confidence, ConfidenceHParams

CANDS = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
# softmax outputs of the (pre-step) forward pass
PROBS = torch.tensor([[0.2, 0.6, 0.2], [0.5, 0.1, 0.4], [0.3, 0.3, 0.4]])


class _Run:
    candidates = CANDS.bool()


def _step(idx=(0, 1, 2)):
    idx = torch.tensor(idx)
    batch = Batch(index=idx, x=torch.zeros(len(idx), 1), candidates=CANDS[idx], y_true=torch.zeros(len(idx)).long())
    return Step(batch=batch, logits=PROBS[idx].log(), probs=PROBS[idx], forward=None, generator=None, epoch=0,
                stage=Stage(), nominal_batch_size=3)


def test_initial_confidence_is_uniform_on_candidates():
    state, comp = PLLState(), Confidence()
    comp.pllzoo_setup_stage(_Run(), state)
    expected = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    torch.testing.assert_close(state.confidence, expected)
    torch.testing.assert_close(comp.pllzoo_label_update(_step(), state), expected)


def test_update_by_hand():
    state, comp = PLLState(), Confidence()
    comp.pllzoo_setup_stage(_Run(), state)
    comp.pllzoo_post_step(_step(), state)
    # w_i = p_i * s_i / sum_j p_ij s_ij
    expected = torch.tensor([
        [0.2 / 0.8, 0.6 / 0.8, 0.0],  # candidates {0,1}: 0.2+0.6
        [0.0, 0.1 / 0.5, 0.4 / 0.5],  # candidates {1,2}: 0.1+0.4
        [0.3, 0.3, 0.4],  # all candidates: unchanged softmax
    ])
    torch.testing.assert_close(state.confidence, expected)
    torch.testing.assert_close(state.confidence.sum(1), torch.ones(3))


def test_update_touches_only_batch_rows():
    state, comp = PLLState(), Confidence()
    comp.pllzoo_setup_stage(_Run(), state)
    before = state.confidence.clone()
    comp.pllzoo_post_step(_step((1,)), state)
    torch.testing.assert_close(state.confidence[[0, 2]], before[[0, 2]])
    torch.testing.assert_close(state.confidence[1], torch.tensor([0.0, 0.2, 0.8]))


def test_mask_modes():
    """'support' (official) drops a candidate whose weight reached 0; 'candidates' revives it."""
    for mode, expected in [("support", [0.0, 1.0, 0.0]), ("candidates", [0.25, 0.75, 0.0])]:
        state, comp = PLLState(), Confidence(ConfidenceHParams(mask=mode))
        comp.pllzoo_setup_stage(_Run(), state)
        state.confidence[0] = torch.tensor([0.0, 1.0, 0.0])  # candidate 0 underflowed to exactly 0
        comp.pllzoo_post_step(_step((0,)), state)
        torch.testing.assert_close(state.confidence[0], torch.tensor(expected))


def test_loss_by_hand():
    from pllzoo_baselines.protocol import ProtocolHParams
    from pllzoo_baselines.proden import ProdenLoss

    import math

    w = torch.tensor([[0.25, 0.75, 0.0]])
    # -(0.25 log 0.2 + 0.75 log 0.6)
    expected = -(0.25 * math.log(0.2) + 0.75 * math.log(0.6))
    got = ProdenLoss(ProtocolHParams(cr=False, mixup=False)).per_sample(PROBS[:1].log(), w)
    torch.testing.assert_close(got, torch.tensor([expected]))
