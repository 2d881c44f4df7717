"""What a run's config leaves out: the places on the machine that ran it (a light module: no torch, no pandas).

``data.data_dir`` (a command-line input, ``--data-dir``) and ``data.path`` (the ``.mat`` file a loader found
there) change no number, so they are neither recorded in ``config.json`` nor hashed into the run id
(:func:`pllzoo.results.run_id`); :mod:`pllzoo.migrate` moves runs recorded with them, and ``--from-run``
(:mod:`pllzoo.replay`) never compares them.
"""

from __future__ import annotations

import copy
from typing import Any

MACHINE_KEYS = ("data_dir", "path")
"""Keys of a config's ``data`` part that name places on the machine that ran it; never recorded or hashed."""
WHERE_FROM_KEYS = (*MACHINE_KEYS, "download")
"""Keys of a config's ``data`` part that say where and how the data came (``--offline``), not what they are."""


def portable(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without :data:`MACHINE_KEYS` in its ``data`` part, and with ``train.milestones`` as whole
    numbers (a copy; ``config`` is unchanged).  ``--hp train.milestones=700,800`` recorded ``[700.0, 800.0]``
    before the field's items were parsed by its annotation (``tuple[int, ...]``); such a run is moved to the id of
    its whole-number form, as a run with machine paths is (:mod:`pllzoo.migrate`)."""
    out = copy.deepcopy(config)
    data = out.get("data")
    if isinstance(data, dict):
        for key in MACHINE_KEYS:
            data.pop(key, None)
    train = out.get("train")
    steps = train.get("milestones") if isinstance(train, dict) else None
    if isinstance(steps, list) and all(isinstance(m, float) and m.is_integer() for m in steps) and steps:
        train["milestones"] = [int(m) for m in steps]
    return out
