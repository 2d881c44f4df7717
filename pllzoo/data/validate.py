"""Sanity checks every loader runs on (features, true labels, candidates) before returning.

Problems a user can fix (a broken file, an empty candidate row, a label out of range)
become a one-line :class:`PLLZooError` naming the source, the first offending row and
how many rows are affected.  A true label outside its candidate set is legal in noisy
PLL, so it only warns, with a count.

True labels may come as an index vector (0- or 1-based, MATLAB files are 1-based) or as
one-hot rows; :func:`check_pll` returns them as a 0-based ``int64`` vector.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from pllzoo.data.base import PLLData
from pllzoo.errors import PLLZooError


class PLLDataWarning(UserWarning):
    """A dataset is usable but unusual (e.g. true labels outside their candidate sets)."""


def as_numpy(a: Any, where: str = "a sparse matrix") -> np.ndarray:
    """Return a numpy view of a tensor / array / scipy sparse matrix (sparse is densified).

    :param where: what names ``a`` in the one-line error when a sparse one is too large to make dense.
    """
    if isinstance(a, torch.Tensor):
        return a.detach().cpu().numpy()
    if hasattr(a, "toarray"):
        try:
            return np.asarray(a.toarray())
        except MemoryError:  # an outside review: a 58 KB .mat declaring 20000 x 40000 was numpy's traceback
            shape = " x ".join(map(str, a.shape))
            raise PLLZooError(f"{where} is a sparse {shape} matrix of {a.dtype}: too large to make dense in this "
                              "machine's memory; store fewer rows or features, or use a machine with more") from None
    return np.asarray(a)


def exception_line(e: BaseException, limit: int = 160) -> str:
    """Return ``"Type: first line of the message"`` cut to ``limit`` characters."""
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:limit]


def _bad_rows(mask: np.ndarray, where: str, what: str, fix: str) -> None:
    """Raise if any row of the bool vector ``mask`` is set."""
    bad = np.flatnonzero(mask)
    if bad.size:
        raise PLLZooError(
            f"{where}: {what} in {bad.size} of {mask.shape[0]} rows (first: row {bad[0]}, 0-based); {fix}"
        )


def _index_base(idx: np.ndarray, num_classes: int, cand: np.ndarray | None) -> int:
    """Guess whether an index vector is 0- or 1-based.

    A 0 means 0-based and a value of ``num_classes`` means 1-based.  Otherwise the base
    under which more true labels fall inside their candidate sets wins, and 1-based
    (MATLAB's convention) breaks ties.
    """
    if idx.size == 0 or idx.min() <= 0:
        return 0
    if idx.max() >= num_classes or cand is None or cand.shape != (idx.shape[0], num_classes):
        return 1
    rows = np.arange(idx.shape[0])
    hits0 = int(cand[rows, idx].sum())
    hits1 = int(cand[rows, idx - 1].sum())
    return 0 if hits0 > hits1 else 1


def labels_from_target(
    target: Any,
    num_classes: int,
    where: str,
    candidates: np.ndarray | None = None,
    one_based: bool | None = None,
) -> np.ndarray:
    """Decode true labels given as one-hot ``[n, K]`` rows or an index vector.

    :param target: one-hot ``[n, num_classes]`` or indices ``[n]`` / ``[n, 1]`` / ``[1, n]``.
    :param candidates: bool ``[n, K]``, only used to tell 0- from 1-based indices.
    :param one_based: force the index base; ``None`` guesses it (see :func:`_index_base`).
    :returns: int64 ``[n]`` with values in ``0..num_classes-1``.
    """
    t = as_numpy(target)
    n = candidates.shape[0] if candidates is not None else None
    one_hot = t.ndim == 2 and t.shape[1] == num_classes > 1 and (n is None or t.shape[0] == n)
    if not (t.ndim == 1 or (t.ndim == 2 and 1 in t.shape and not one_hot)):
        if t.ndim != 2 or t.shape[1] != num_classes:
            raise PLLZooError(f"{where}: true labels have shape {t.shape}, "
                              f"expected [n, {num_classes}] one-hot or an index vector")
        ones = (t != 0).sum(axis=1)
        _bad_rows(ones != 1, where, "one-hot true-label rows without exactly one 1",
                  "each example needs exactly one true label")
        return np.argmax(t != 0, axis=1).astype(np.int64)
    v = t.reshape(-1)
    _bad_rows(~(np.isfinite(v) & (v == np.round(v))), where, "non-integer label indices",
              "labels must be class indices")
    _bad_rows(v < 0, where, "negative label indices", f"labels must be class indices 0..{num_classes - 1} "
              f"or 1..{num_classes}")  # before guessing the base: a -1 would make a 1-based vector look 0-based
    idx = v.astype(np.int64)
    base = _index_base(idx, num_classes, candidates) if one_based is None else int(one_based)
    idx = idx - base
    _bad_rows((idx < 0) | (idx >= num_classes), where,
              f"label indices outside {base}..{num_classes - 1 + base}",
              f"there are {num_classes} classes")
    return idx


def check_pll(
    x: Any,
    y: Any,
    candidates: Any,
    num_classes: int,
    where: str,
    one_based: bool | None = None,
) -> np.ndarray:
    """Validate one PLL split and return its true labels as 0-based int64 ``[n]``.

    Raises :class:`PLLZooError` (one line) for mismatched row counts, a candidate matrix
    that is not ``[n, num_classes]``, fewer than 2 classes, candidate entries other than
    0/1 (or False/True), empty candidate rows, negative or out-of-range true labels,
    malformed one-hot rows, and NaN/inf features.  Warns (:class:`PLLDataWarning`) with a
    count when true labels fall outside their candidate sets.

    :param x: features ``[n, ...]`` (tensor or array).
    :param y: true labels, index vector or one-hot ``[n, K]``.
    :param candidates: ``[n, K]``, 1 (or True) marks a candidate, 0 (or False) the others.
    :param where: the file or dataset name used in messages.
    :param one_based: index base of ``y`` when it is a vector; ``None`` guesses.
    """
    xa, ca = as_numpy(x), as_numpy(candidates)
    n = xa.shape[0] if xa.ndim else 0
    if n == 0:
        raise PLLZooError(f"{where}: no examples (0 feature rows)")
    if xa.ndim > 1 and xa[0].size == 0:
        raise PLLZooError(f"{where}: the examples have no features (shape {tuple(xa.shape)})")
    if ca.ndim != 2 or ca.shape != (n, num_classes):
        raise PLLZooError(
            f"{where}: candidate matrix has shape {tuple(ca.shape)} but features have {n} rows "
            f"and there are {num_classes} classes (expected [{n}, {num_classes}])"
        )
    if num_classes < 2:
        raise PLLZooError(f"{where}: {num_classes} class; partial-label learning needs at least 2 classes")
    if ca.dtype != np.bool_:
        _bad_rows(~((ca == 0) | (ca == 1)).all(axis=1), where, "candidate entries other than 0/1",
                  "mark each candidate label with 1 and every other label with 0")
    cand = ca != 0
    labels = labels_from_target(y, num_classes, where, cand, one_based)
    if labels.shape[0] != n:
        raise PLLZooError(f"{where}: {labels.shape[0]} true labels for {n} feature rows")
    _bad_rows(~cand.any(axis=1), where, "empty candidate sets",
              "every example needs at least one candidate label")
    if np.issubdtype(xa.dtype, np.floating) or np.issubdtype(xa.dtype, np.complexfloating):
        _bad_rows(~np.isfinite(xa.reshape(n, -1)).all(axis=1), where, "NaN/inf features",
                  "clean or drop those rows")
    outside = ~cand[np.arange(n), labels]
    if outside.any():
        first = int(np.flatnonzero(outside)[0])
        warnings.warn(
            f"{where}: {int(outside.sum())} of {n} true labels are outside their candidate sets "
            f"(first: row {first}); methods assume they are inside",
            PLLDataWarning,
            stacklevel=2,
        )
    return labels


def check_loaded(data: Any, where: str) -> None:
    """What an outside plugin's loader returned, checked as the shipped loaders check their own: a
    :class:`PLLData` whose training split passes :func:`check_pll` (0-based label indices) and whose test
    split has as many labels as rows, each in ``0..K-1``, and finite features.

    :raises PLLZooError: one line naming ``where`` (the dataset and its plugin)."""
    if not isinstance(data, PLLData):
        raise PLLZooError(f"{where}: the loader returned {type(data).__name__}, not a pllzoo PLLData")
    wrong = _layout_error(data)
    if wrong is not None:
        raise PLLZooError(f"{where}: {wrong}")
    k = data.num_classes
    check_pll(data.x_train, data.y_train, data.candidates, k, f"{where}, training split", one_based=False)
    xt = as_numpy(data.x_test)
    m = xt.shape[0] if xt.ndim else 0
    yt = labels_from_target(data.y_test, k, f"{where}, test split", None, one_based=False)
    if yt.shape[0] != m:
        raise PLLZooError(f"{where}, test split: {yt.shape[0]} true labels for {m} feature rows")
    if np.issubdtype(xt.dtype, np.floating):
        _bad_rows(~np.isfinite(xt.reshape(m, -1)).all(axis=1), f"{where}, test split", "NaN/inf features",
                  "clean or drop those rows")


def _layout_error(data: PLLData) -> str | None:
    """What in ``data``'s types and shapes differs from :class:`PLLData`'s layout, or None: the kind, an int
    ``num_classes`` and its ``class_names``; tensors everywhere; long ``[N]`` labels; ``[N, K]`` candidates (bool,
    or 0/1 numbers); ``uint8 [N, C, H, W]`` images with ``mean`` and ``std`` of C values, or ``float32 [N, d]``
    features; the test (and held-out) rows shaped as the training rows."""
    k = data.num_classes
    if data.kind not in ("image", "tabular"):
        return f"kind {data.kind!r}; expected 'image' or 'tabular'"
    if isinstance(k, bool) or not isinstance(k, int):
        return f"num_classes is {k!r} ({type(k).__name__}); expected an int"
    if not isinstance(data.class_names, (list, tuple)) or len(data.class_names) != k:
        return f"class_names has {len(data.class_names) if hasattr(data.class_names, '__len__') else '?'} " \
               f"entries for {k} classes; give one name per class"
    tensors = ["x_train", "y_train", "candidates", "x_test", "y_test"]
    if (data.x_val is None) != (data.candidates_val is None):
        return "x_val and candidates_val go together (held-out rows and their candidate sets); give both or neither"
    tensors += ["x_val", "candidates_val"] if data.x_val is not None else []
    for name in tensors:
        value = getattr(data, name)
        if not isinstance(value, torch.Tensor):
            return f"{name} is a {type(value).__module__}.{type(value).__name__}; expected a torch.Tensor " \
                   "(torch.as_tensor(...))"
    shape = lambda t: "[" + ", ".join(map(str, t.shape)) + "]"  # noqa: E731
    for name in ("y_train", "y_test"):
        t = getattr(data, name)
        if t.ndim != 1 or t.dtype != torch.long:
            return f"{name} is {t.dtype} of shape {shape(t)}; expected long [rows] (0-based class indices)"
    for name in ["candidates"] + (["candidates_val"] if data.candidates_val is not None else []):
        t = getattr(data, name)
        if t.ndim != 2 or t.is_complex():  # bool, or 0/1 numbers (their values: check_pll)
            return f"{name} is {t.dtype} of shape {shape(t)}; expected bool [rows, {k}]"
    x = data.x_train
    if data.kind == "image":
        if x.dtype != torch.uint8 or x.ndim != 4 or x.shape[1] not in (1, 3):
            return (f"x_train is {x.dtype} of shape {shape(x)}; images are uint8 [N, C, H, W] (channels first, "
                    "C = 1 or 3)")
        for name in ("mean", "std"):
            v = getattr(data, name)
            if not isinstance(v, (tuple, list)) or len(v) != x.shape[1] or not all(
                    isinstance(c, (int, float)) and not isinstance(c, bool) and np.isfinite(c) for c in v) \
                    or name == "std" and min(v) <= 0:
                return f"{name} is {v!r}; images need {x.shape[1]} finite per-channel values" + \
                    (", each > 0" if name == "std" else "") + " (on the 0..1 scale) to normalise them"
    elif x.dtype != torch.float32 or x.ndim != 2:
        return f"x_train is {x.dtype} of shape {shape(x)}; tabular features are float32 [N, d] (.float())"
    for name in ("x_test", "x_val"):
        t = getattr(data, name)
        if t is not None and (t.dtype != x.dtype or t.shape[1:] != x.shape[1:]):
            return f"{name} is {t.dtype} of shape {shape(t)}, x_train {x.dtype} of shape {shape(x)}; each row " \
                   "must have the training rows' type and shape"
    return None


def check_training_set(data: PLLData) -> None:
    """Check the training split a run will see (after ``--subset``/``--holdout``), before anything is written.

    Raises :class:`PLLZooError` (one line) for fewer training rows than classes, or no test rows.  Warns
    (:class:`PLLDataWarning`, one line each) when classes have no training rows (they cannot be
    learnt; :func:`pllzoo.metrics.shot_groups` counts them in Few) and when every label is a
    candidate on every row (the partial labels carry nothing to learn from).
    """
    n, k = data.num_train, data.num_classes
    if k < 2:
        raise PLLZooError(f"{data.name}: {k} class; partial-label learning needs at least 2 classes")
    if n < k:  # what made the training set so small, if a flag did (an outside review: "raise --subset 300"
        # under --holdout 0.99, and "raise --subset 1" to a --subset 1)
        held = data.info.get("n_val") or 0
        if held and n + held >= k:
            hint = f" (--holdout {data.info['holdout']} holds out {held} of {n + held}: hold out less)"
        elif data.info.get("subset"):
            hint = f" (--subset {data.info['subset']} keeps {n + held}: raise it to at least {k + held})"
        else:
            hint = ""
        raise PLLZooError(f"{data.name}: {n} training rows for {k} classes; at least as many rows as classes are "
                          f"needed{hint}")
    if int(data.y_test.shape[0]) == 0:  # an outside review: the run failed in its first evaluation (torch.cat)
        split = f" ({data.info['split']} split)" if data.info.get("split") else ""
        raise PLLZooError(f"{data.name}: no test rows{split}; every run is scored on the test split"
                          + (" (the balanced split tests floor(n_j/2) of each label, none of a label with one "
                             "example: try --split uniform)" if data.info.get("split") == "balanced" else ""))
    empty = np.flatnonzero(as_numpy(data.train_counts) == 0)
    if empty.size:
        warnings.warn(f"{data.name}: {empty.size} of {k} classes have no training rows (first: class {empty[0]}); "
                      f"they cannot be learnt and count in Few", PLLDataWarning, stacklevel=2)
    if n and bool(data.candidates.all()):
        warnings.warn(f"{data.name}: every label is a candidate on every training row: the partial labels carry "
                      f"nothing to learn from", PLLDataWarning, stacklevel=2)
