"""Real-world PLL sets stored as MATLAB ``.mat`` files (SoLar paper App. C.6).

Two layouts are read with ``scipy.io.loadmat``:

* PALM (the original files): ``data`` n x d, ``target`` and ``partial_target`` labels x
  examples, often scipy sparse;
* PRODEN/VALEN re-packs: ``features`` n x d, ``logitlabels`` (true) and ``p_labels``
  (candidates), transposed when ``shape[0] != n``.

``target`` may also be an index vector (1-based from MATLAB).  The rows are split with
the run seed (:mod:`pllzoo.data.splits`: ``uniform`` 80/20 or the paper's ``balanced``
test set), then features are z-scored with the training split's mean and std (std 0 -> 1).
The test split keeps only true labels.  Training defaults follow PRODEN's tabular
settings (official code: Lvcrezia77/PRODEN).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.io
import torch

from pllzoo.data.base import DataOptions, PLLData, TrainDefaults, text_name
from pllzoo.data.paths import search_roots
from pllzoo.data.splits import split_indices
from pllzoo.data.validate import PLLDataWarning, as_numpy, check_pll, exception_line
from pllzoo.errors import PLLZooError

MAT_FILES: dict[str, str] = {
    "lost": "lost.mat",
    "birdsong": "BirdSong.mat",
    "msrcv2": "MSRCv2.mat",
    "fgnet": "FG-NET.mat",
    "italian": "italian.mat",
    "soccer": "Soccer Player.mat",
    "yahoo": "Yahoo! News.mat",
}
# file stems (lower case) of known copies -> the built-in name whose defaults apply
STEM_ALIASES: dict[str, str] = {
    **{Path(f).stem.lower(): name for name, f in MAT_FILES.items()},
    "birdac": "birdsong", "spd": "soccer", "lyn": "yahoo", "soccer_player": "soccer",
    "yahoo_news": "yahoo", "fg_net": "fgnet",
}
LAYOUTS: dict[str, tuple[str, str, str]] = {  # layout -> (features, true labels, candidates)
    "palm": ("data", "target", "partial_target"),
    "proden": ("features", "logitlabels", "p_labels"),
}
PALM_SOURCE = "palm.seu.edu.cn/zhangml/Resources.htm#data"  # the PALM group's page; never downloaded
PRODEN_SOURCE = ("PRODEN parameter_settings.txt (Lv et al., ICML 2020; official code: Lvcrezia77/PRODEN): "
                 "linear, SGD m=0.9, bs 100, 500 epochs, no decay")
_LR_WD: dict[str, tuple[float, float]] = {  # PRODEN's per-dataset (lr, weight decay), its linear-model lines
    "lost": (1e-2, 1e-2), "birdsong": (1e-2, 1e-4), "msrcv2": (1e-1, 1e-3), "soccer": (1e-1, 1e-4),
    "yahoo": (1e-2, 1e-4),
}


def dataset_name_for(path: Path) -> str:
    """Return the dataset name of a user-given file: its stem, lower case, spaces as dashes."""
    return text_name(path.stem).lower().replace(" ", "-")


def mat_defaults(name: str | None) -> TrainDefaults:
    """Return PRODEN's tabular recipe for a built-in name; ours (lr 1e-2, wd 1e-4) otherwise."""
    if name in _LR_WD:
        lr, wd = _LR_WD[name]
        source = PRODEN_SOURCE
    else:
        lr, wd = 1e-2, 1e-4
        source = (f"{PRODEN_SOURCE}; lr/wd are pllzoo's choice (PRODEN's BirdSong/Yahoo values), "
                  "PRODEN gives none for this set")
    return TrainDefaults(model="linear", epochs=500, lr=lr, weight_decay=wd, batch_size=100,
                         schedule="constant", momentum=0.9, source=source)


def mat_files(name: str) -> tuple[str, ...]:
    """Where :func:`find_mat_file` looks for a built-in set under a data folder, in order."""
    return (MAT_FILES[name], f"pll/{MAT_FILES[name]}")


def find_mat_file(name: str, data_dir: Path | str | None) -> Path:
    """Return the path of a built-in set's file, searching ``<root>`` and ``<root>/pll``."""
    fname = MAT_FILES[name]
    looked = [root / rel for root in search_roots(data_dir) for rel in mat_files(name)]
    for path in looked:
        if path.is_file():
            return path
    raise PLLZooError(
        f"{name}: {fname!r} not found (looked in {', '.join(str(p.parent) for p in looked)}); "
        f"pass --data-dir pointing at a folder holding it (PALM sets: {PALM_SOURCE})"
    )


def read_mat(path: Path) -> dict[str, Any]:
    """Load a ``.mat`` file, turning every reader failure into a one-line PLLZooError."""
    if not path.exists():
        raise PLLZooError(f"{path}: no such file")
    if not path.is_file():
        raise PLLZooError(f"{path}: is not a file; pass the path of a .mat file")
    try:
        return scipy.io.loadmat(str(path), appendmat=False)
    except NotImplementedError:
        raise PLLZooError(
            f"{path.name}: MATLAB v7.3 (HDF5) files are not supported; re-save it with save(..., '-v7')"
        ) from None
    except Exception as e:  # scipy raises ValueError, TypeError, MatReadError, OSError, ...
        raise PLLZooError(f"{path.name}: not a readable .mat file ({exception_line(e)})") from None


def _layout(mat: dict[str, Any], where: str) -> str:
    """Return which layout the file uses, or raise naming the fields found."""
    for layout, keys in LAYOUTS.items():
        if all(k in mat for k in keys):
            return layout
    found = sorted(k for k in mat if not k.startswith("__"))
    wanted = " or ".join("/".join(keys) for keys in LAYOUTS.values())
    raise PLLZooError(f"{where}: missing required fields; found {found}, expected {wanted}")


def _orient(a: np.ndarray, n: int, q: int | None, labels_major: bool, field: str, where: str) -> np.ndarray:
    """Return a label matrix as ``[n, q]``; a true-label index vector (``q`` given) is returned flat."""
    if q is not None and q > 1 and a.size == n and (a.ndim == 1 or (a.ndim == 2 and 1 in a.shape)):
        return a.reshape(-1)
    if a.ndim != 2 or n not in a.shape:
        raise PLLZooError(f"{where}: '{field}' has shape {a.shape} but the features have {n} rows")
    if a.shape[0] == n and (a.shape[1] != n or not labels_major):
        return a
    return a.T


def _arrange(x: np.ndarray, target: np.ndarray, cand: np.ndarray, layout: str,
             where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """With the features ``x`` as ``[n, d]``: the candidates ``[n, q]``, the true labels and their indices, checked."""
    fx, fy, fs = LAYOUTS[layout]
    n = x.shape[0]
    cand = _orient(cand, n, None, layout == "palm", fs, where)
    q = cand.shape[1]
    target = _orient(target, n, q, layout == "palm", fy, where)
    return x, cand, target, check_pll(x, target, cand, q, where)


def _zscore(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standardise both splits with the training mean/std (constant columns get std 1).  A column whose values
    are so large that their squares overflow (|x| > 1e150) is first divided by its largest training value
    (z-scores do not change with the scale; every other column is computed as before, to the bit)."""
    with np.errstate(invalid="ignore"):
        peak = np.abs(x_train).max(axis=0) if len(x_train) else np.ones(x_train.shape[1])
    huge = peak > 1e150
    if huge.any():
        scale = np.where(huge, peak, 1.0)
        x_train, x_test = x_train / scale, x_test / scale
    mean = x_train.mean(axis=0) if len(x_train) else np.zeros(x_train.shape[1])
    std = x_train.std(axis=0) if len(x_train) else np.ones(x_train.shape[1])
    std = np.where(std < 1e-12, 1.0, std)
    return ((x_train - mean) / std).astype(np.float32), ((x_test - mean) / std).astype(np.float32)


def load_mat(path: Path | str, opts: DataOptions, name: str | None = None) -> PLLData:
    """Load any ``.mat`` PLL set in either layout, split and standardise it.

    :param name: the dataset name to report; defaults to the file stem (lower case).
    """
    path = Path(path).expanduser()
    where = path.name
    mat = read_mat(path)
    layout = _layout(mat, where)
    fx, fy, fs = LAYOUTS[layout]
    x, target, cand = (as_numpy(mat[k], f"{where}: '{k}'") for k in (fx, fy, fs))
    if x.ndim != 2:
        raise PLLZooError(f"{where}: '{fx}' has shape {x.shape}, expected [n, d]")
    for field, a in ((fx, x), (fy, target), (fs, cand)):
        if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
            raise PLLZooError(f"{where}: '{field}' is not numeric (MATLAB class gives dtype {a.dtype})")
        if np.issubdtype(a.dtype, np.complexfloating):  # a real copy would drop the imaginary part silently
            raise PLLZooError(f"{where}: '{field}' holds complex numbers (dtype {a.dtype}); expected real values")
    if x.shape[0] in cand.shape and x.shape[1] in cand.shape and x.shape[0] != x.shape[1]:
        # d equals the number of labels: the layout says which side of the candidates is the examples' (PALM: q x n);
        # a file whose labels do not fit that reading is read the other way (an outside review: PALM keys with the
        # labels stored n x q and d = q were refused as bad one-hot rows)
        first = x.shape[1] == (cand.shape[1] if layout == "palm" else cand.shape[0])
        try:
            x, cand, target, labels = _arrange(x.T if first else x, target, cand, layout, where)
        except PLLZooError as exc:
            try:
                x, cand, target, labels = _arrange(x if first else x.T, target, cand, layout, where)
            except PLLZooError:
                raise exc from None
    else:
        if x.shape[0] not in cand.shape and x.shape[1] in cand.shape:
            x = x.T  # stored d x n
        x, cand, target, labels = _arrange(x, target, cand, layout, where)
    n, q = x.shape[0], cand.shape[1]
    folds = [k for k in ("tr", "te") if k in mat]
    if folds:  # PRODEN's copies carry 5 folds; every layout is split the same way here, so runs compare
        warnings.warn(f"{where}: its folds ({', '.join(folds)}) are not used; pllzoo splits every set by --split "
                      "and the seed", PLLDataWarning, stacklevel=2)
    stem = path.stem.lower()
    known = name or STEM_ALIASES.get(stem)
    rng = np.random.RandomState(opts.seed)
    tr, te = split_indices(opts.split, labels, q, rng)
    x_tr, x_te = _zscore(x[tr].astype(np.float64), x[te].astype(np.float64))
    cand_tr = torch.from_numpy(cand[tr] != 0)
    return PLLData(
        name=name or dataset_name_for(path),
        kind="tabular",
        x_train=torch.from_numpy(x_tr),
        y_train=torch.from_numpy(labels[tr]),
        candidates=cand_tr,
        x_test=torch.from_numpy(x_te),
        y_test=torch.from_numpy(labels[te]),
        num_classes=q,
        class_names=[str(j) for j in range(q)],
        defaults=mat_defaults(known),
        info={
            "path": str(path), "layout": layout, "split": opts.split, "seed": opts.seed,
            "n": n, "d": int(x.shape[1]), "n_train": int(len(tr)), "n_test": int(len(te)),
            "avg_candidates": float(cand_tr.sum(1).float().mean()) if len(tr) else 0.0,
            "labels_without_examples": int((np.bincount(labels, minlength=q) == 0).sum()),
            "features": "z-scored with the training split's mean/std (std 0 -> 1)",
        },
    )


def mat_loader(name: str) -> Callable[[DataOptions], PLLData]:
    """Return the loader of a built-in ``.mat`` set (looked up in ``opts.data_dir``)."""
    if name not in MAT_FILES:
        raise PLLZooError(f"unknown .mat dataset {name!r}; known: {', '.join(MAT_FILES)}")

    def load(opts: DataOptions) -> PLLData:
        return load_mat(find_mat_file(name, opts.data_dir), opts, name=name)

    load.__name__ = f"load_{name}"
    return load
