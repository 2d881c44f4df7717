"""SoLar-LA: post-hoc logit adjustment with the estimated prior (paper §4.4, App. C; not in the code).

``solar.la`` (slot ``predict``): predict argmax_j [ g_j(x) − ζ·log r_j ] with r SoLar's final
estimated prior; ζ ∈ {0.5, 1, 2} in the paper (``--hp predict.zeta=2``).  The maths is the host's
``pllzoo.logit_adjust`` (any prior estimate); this name keeps SoLar's recipes and recorded runs.
"""

from __future__ import annotations

from pllzoo.builtin import LogitAdjustment as _HostLogitAdjustment


class LogitAdjustment(_HostLogitAdjustment):
    """SoLar-LA: subtract ζ·log r (SoLar's estimated prior) from the test logits."""

    distributed = True  # reads the replicated prior at evaluation (the opt-in is not inherited)
