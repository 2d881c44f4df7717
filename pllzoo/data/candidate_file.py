"""Candidate-set files for image datasets: one row per image, in the dataset's order.

Formats, by suffix:

* ``.npy`` — a bool or 0/1 array ``[N, K]`` (``numpy.save``; no pickles);
* ``.pt``  — a bool or 0/1 tensor ``[N, K]`` (``torch.save``; loaded with ``weights_only=True``);
* ``.csv`` — N lines of K comma-separated 0/1 values, no header;
* ``.txt`` — N lines, each the candidate labels of one image as class names (the class folder
  names), separated by commas or blanks, e.g. ``cat dog``.

:func:`check_candidates` then refuses, with one line naming the file, the first offending row and
how many rows are affected: a row count other than the dataset's N, a column count other than K,
entries other than 0/1, empty rows and, where the true labels are known, rows whose true label is
not a candidate (for a file meant to be aligned with the images, that is almost always a file in
another order).
"""

from __future__ import annotations

import io

from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from pllzoo.data.validate import exception_line
from pllzoo.errors import PLLZooError

SUFFIXES = (".npy", ".pt", ".csv", ".txt")


def read_candidates(path: Path, class_names: Sequence[str]) -> np.ndarray:
    """Read ``path`` (format by suffix, see the module docstring) into a bool array ``[N, K]``.

    :raises PLLZooError: an unknown suffix, an unreadable file, entries other than 0/1, ragged rows,
        an unknown class name.
    """
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise PLLZooError(f"{path.name}: unknown candidate file type {suffix!r}; use one of {', '.join(SUFFIXES)}")
    if suffix == ".txt":
        return _read_label_lists(path, class_names)
    try:
        if suffix == ".npy":
            raw = np.load(path, allow_pickle=False)
        elif suffix == ".pt":
            raw = torch.load(path, map_location="cpu", weights_only=True)
            raw = raw.numpy() if isinstance(raw, torch.Tensor) else np.asarray(raw)
        else:  # UTF-8 with or without a byte-order mark (Excel's "CSV UTF-8" writes one)
            raw = np.loadtxt(io.StringIO(_text(path)), delimiter=",", ndmin=2, dtype=np.float64)
    except PLLZooError:  # said already (_text)
        raise
    except Exception as exc:  # a broken file, whatever the reader says
        raise PLLZooError(f"{path.name}: cannot read the candidate file ({exception_line(exc)})") from None
    raw = np.asarray(raw)
    if raw.ndim != 2:
        raise PLLZooError(f"{path.name}: candidate matrix has shape {tuple(raw.shape)}, expected [N, K]")
    if raw.dtype != np.bool_:
        bad = np.flatnonzero(~((raw == 0) | (raw == 1)).all(axis=1))
        if bad.size:
            raise PLLZooError(f"{path.name}: entries other than 0/1 in {bad.size} of {raw.shape[0]} rows "
                              f"(first: row {bad[0]}, 0-based); mark each candidate with 1, the others with 0")
    return raw != 0


def _text(path: Path) -> str:
    """The file's text: UTF-8, a byte-order mark read past (Notepad's and Excel's "UTF-8" write one).

    :raises PLLZooError: one line, for another encoding (an outside review: Latin-1 and UTF-16 files were a
        traceback)."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PLLZooError(f"{path.name}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at {exc.start}); save it "
                          "as UTF-8") from None
    except OSError as exc:
        raise PLLZooError(f"{path.name}: cannot read the candidate file ({exc.strerror or exc})") from None


def _read_label_lists(path: Path, class_names: Sequence[str]) -> np.ndarray:
    """One line per image: its candidate class names, separated by commas or blanks.  Names are compared in
    Unicode's composed form (NFC): macOS writes folder names decomposed (NFD), an editor the file composed."""
    import unicodedata

    index = {unicodedata.normalize("NFC", name): j for j, name in enumerate(class_names)}
    lines = _text(path).splitlines()
    while lines and not lines[-1].strip():  # a trailing newline, not an image
        lines.pop()
    out = np.zeros((len(lines), len(class_names)), dtype=bool)
    for i, line in enumerate(lines):
        for token in unicodedata.normalize("NFC", line).replace(",", " ").split():
            if token not in index:
                raise PLLZooError(f"{path.name}: line {i + 1} names {token!r}, not a class; "
                                  f"classes: {', '.join(class_names)}")
            out[i, index[token]] = True
    return out


def check_candidates(cand: np.ndarray, where: str, num_classes: int, names: Sequence[str],
                     labels: np.ndarray | None = None) -> None:
    """Refuse a candidate matrix that does not fit its dataset (one line each; see the module docstring).

    :param cand: bool ``[N', K']`` as read.
    :param where: the file, for messages.
    :param names: one name per image of the dataset (its N), in the dataset's order, for messages.
    :param labels: the true labels ``[N]`` when known; each must be among its row's candidates.
    """
    n = len(names)
    if cand.shape[0] != n:
        raise PLLZooError(f"{where}: {cand.shape[0]} candidate rows for {n} images; one row per image, "
                          f"in the dataset's order")
    if cand.shape[1] != num_classes:
        raise PLLZooError(f"{where}: {cand.shape[1]} candidate columns for {num_classes} classes")
    _refuse(~cand.any(axis=1), where, names, "empty candidate sets", "every image needs at least one candidate")
    if labels is not None:
        _refuse(~cand[np.arange(n), labels], where, names, "true labels that are not candidates",
                "are its rows in the dataset's order, and its columns in the classes' (sorted as text: "
                "docs/extending.md)?")


def _refuse(bad_rows: np.ndarray, where: str, names: Sequence[str], what: str, hint: str) -> None:
    bad = np.flatnonzero(bad_rows)
    if bad.size:
        raise PLLZooError(f"{where}: {what} in {bad.size} of {len(names)} rows "
                          f"(first: row {bad[0]}, 0-based, {names[bad[0]]}); {hint}")
