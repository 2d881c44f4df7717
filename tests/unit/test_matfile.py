"""Real-world .mat sets: the shared files by name, both layouts, and every bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse
import torch

from pllzoo.data.base import DataOptions
from pllzoo.data.catalog import builtin_datasets, load_mat_path, path_dataset
from pllzoo.data.matfile import mat_defaults, mat_loader
from pllzoo.data.splits import balanced_test_counts
from pllzoo.data.validate import PLLDataWarning
from pllzoo.errors import PLLZooError

# data README: n, d, q, avg |S|
SHARED = {
    "lost": (1122, 108, 16, 2.2317),
    "birdsong": (4998, 38, 13, 2.1755),
    "msrcv2": (1758, 48, 23, 3.1564),
    "fgnet": (1002, 262, 78, 7.4770),
    "italian": (21878, 519, 90, 1.5958),
}


@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_file_by_name(shared_data: Path, name: str) -> None:
    n, d, q, avg = SHARED[name]
    data = mat_loader(name)(DataOptions(data_dir=shared_data, seed=1))
    assert (data.num_train + len(data.y_test), data.x_train.shape[1], data.num_classes) == (n, d, q)
    assert data.kind == "tabular" and data.name == name
    assert data.x_train.dtype == torch.float32 and data.candidates.dtype == torch.bool
    assert abs(data.candidates.sum(1).float().mean().item() - avg) < 0.15
    mean, std = data.x_train.mean(0), data.x_train.std(0, unbiased=False)
    assert mean.abs().max() < 1e-3 and ((std - 1).abs() < 1e-3).logical_or(std < 1e-6).all()
    assert data.defaults.model == "linear" and data.defaults.batch_size == 100


def test_found_under_pll_subfolder_and_root(shared_data: Path, tmp_path: Path) -> None:
    shutil.copy(shared_data / "pll" / "lost.mat", tmp_path / "lost.mat")
    a = mat_loader("lost")(DataOptions(data_dir=tmp_path))
    b = mat_loader("lost")(DataOptions(data_dir=shared_data))  # shared_data/pll/lost.mat
    assert a.num_train == b.num_train and (a.y_train == b.y_train).all()


def test_proden_layout_matches_palm(shared_data: Path) -> None:
    opts = DataOptions(seed=3, split="balanced")
    palm = load_mat_path(shared_data / "pll" / "MSRCv2.mat", opts)
    with pytest.warns(PLLDataWarning, match=r"MSRCv2.mat: its folds \(tr, te\) are not used; pllzoo splits every "
                                            r"set by --split and the seed"):
        proden = load_mat_path(shared_data / "pll" / "variants_proden_format" / "MSRCv2.mat", opts)
    assert proden.info["layout"] == "proden" and palm.info["layout"] == "palm"
    assert (palm.y_train == proden.y_train).all() and (palm.candidates == proden.candidates).all()
    assert (palm.y_test == proden.y_test).all()
    birdac = path_dataset(shared_data / "pll" / "variants_proden_format" / "birdac.mat")
    with pytest.warns(PLLDataWarning, match="folds"):
        data = birdac.load(DataOptions())
    assert birdac.name == "birdac" and data.num_classes == 13 and data.defaults.weight_decay == 1e-4


def test_balanced_protocol_on_a_real_set(shared_data: Path) -> None:
    data = mat_loader("birdsong")(DataOptions(data_dir=shared_data, split="balanced"))
    all_labels = np.concatenate([data.y_train.numpy(), data.y_test.numpy()])
    expected = balanced_test_counts(np.bincount(all_labels, minlength=13))
    np.testing.assert_array_equal(np.bincount(data.y_test.numpy(), minlength=13), expected)


def test_defaults_and_catalog() -> None:
    specs = {s.name: s for s in builtin_datasets()}
    assert {"lost", "birdsong", "msrcv2", "fgnet", "italian", "soccer", "yahoo"} <= {
        n for n, s in specs.items() if s.needs_files}
    assert not specs["synthetic-lt"].needs_files
    lost = mat_defaults("lost")
    assert (lost.lr, lost.weight_decay, lost.epochs, lost.schedule) == (1e-2, 1e-2, 500, "constant")
    assert "choice" in mat_defaults("fgnet").source
    # PRODEN's parameter_settings.txt, linear model: every PALM set it lists has its (lr, weight decay)
    released = {"lost": (1e-2, 1e-2), "birdsong": (1e-2, 1e-4), "msrcv2": (1e-1, 1e-3), "soccer": (1e-1, 1e-4),
                "yahoo": (1e-2, 1e-4)}
    for name, (lr, wd) in released.items():
        got = mat_defaults(name)
        assert (got.lr, got.weight_decay, got.batch_size) == (lr, wd, 100), name
        assert "choice" not in got.source, name


def test_missing_named_file(tmp_path: Path) -> None:
    with pytest.raises(PLLZooError, match="Soccer Player.mat") as e:
        mat_loader("soccer")(DataOptions(data_dir=tmp_path))
    assert "\n" not in str(e.value) and str(tmp_path) in str(e.value)


# ----------------------------------------------------------------------- small files
def _palm(tmp_path: Path, name: str = "toy.mat", n: int = 8, q: int = 3, **override) -> Path:
    """Write a small PALM-layout file: labels x examples, sparse like the originals."""
    y = np.arange(n) % q
    onehot = np.eye(q)[y].T  # q x n
    cand = onehot.copy()
    cand[(y + 1) % q, np.arange(n)] = 1
    fields = {"data": np.random.RandomState(0).randn(n, 4), "target": scipy.sparse.csc_matrix(onehot),
              "partial_target": scipy.sparse.csc_matrix(cand)}
    fields.update(override)
    path = tmp_path / name
    scipy.io.savemat(path, fields)
    return path


def _error(path: Path | str, match: str) -> str:
    with pytest.raises(PLLZooError, match=match) as e:
        load_mat_path(path, DataOptions())
    assert "\n" not in str(e.value)
    return str(e.value)


def test_small_palm_and_index_vectors(tmp_path: Path) -> None:
    data = load_mat_path(_palm(tmp_path), DataOptions())
    assert data.name == "toy" and data.num_classes == 3 and data.num_train == 6 and len(data.y_test) == 2
    y = np.arange(8) % 3
    for target in (y + 1, (y + 1).reshape(-1, 1), y):  # 1-based row/column vectors, 0-based
        path = _palm(tmp_path, target=target.astype(float).reshape(1, -1) if target.ndim == 1 else target)
        d = load_mat_path(path, DataOptions())
        np.testing.assert_array_equal(np.sort(np.concatenate([d.y_train, d.y_test])), np.sort(y))


def test_features_as_many_as_labels_in_every_orientation(tmp_path: Path) -> None:
    """d = q: which side of the candidates is the examples' is the layout's guess; a file whose labels do not fit
    it is read the other way (an outside review: PALM keys with labels stored n x q, and a PRODEN re-pack with
    labels q x n, were refused as bad one-hot rows).  Every orientation loads the same 40 examples."""
    n, q = 40, 4
    y = np.arange(n) % q
    onehot, cand = np.eye(q)[y], np.eye(q)[y]
    cand[np.arange(n), (y + 1) % q] = 1
    x = np.random.RandomState(0).randn(n, q)
    loaded = []
    for keys in (("data", "target", "partial_target"), ("features", "logitlabels", "p_labels")):
        for x_t, labels_t in ((False, False), (False, True), (True, False), (True, True)):
            path = tmp_path / f"dq_{keys[0]}_{x_t}_{labels_t}.mat"
            scipy.io.savemat(path, {keys[0]: x.T if x_t else x, keys[1]: onehot.T if labels_t else onehot,
                                    keys[2]: cand.T if labels_t else cand})
            data = load_mat_path(path, DataOptions(split="uniform"))
            assert data.num_classes == q and data.num_train + len(data.y_test) == n, path.name
            loaded.append((data.x_train, data.y_train, data.candidates))
    for x_tr, y_tr, c_tr in loaded[1:]:
        assert torch.equal(x_tr, loaded[0][0]) and torch.equal(y_tr, loaded[0][1]) and torch.equal(c_tr, loaded[0][2])


def test_missing_path_directory_and_not_a_mat(tmp_path: Path) -> None:
    _error(tmp_path / "nope.mat", "no such file")
    _error(tmp_path, "is not a file")
    (tmp_path / "notes.mat").write_text("hello, I am not MATLAB\n" * 20)
    _error(tmp_path / "notes.mat", "not a readable .mat file")
    (tmp_path / "empty.mat").write_bytes(b"")
    _error(tmp_path / "empty.mat", "not a readable .mat file")


def test_missing_fields_lists_found_fields(tmp_path: Path) -> None:
    path = tmp_path / "partial.mat"
    scipy.io.savemat(path, {"data": np.zeros((3, 2)), "target": np.eye(3)})
    msg = _error(path, "missing required fields")
    assert "['data', 'target']" in msg and "partial_target" in msg


def test_bad_contents(tmp_path: Path) -> None:
    cand = np.eye(3)[np.arange(8) % 3].T
    cand[:, 5] = 0
    _error(_palm(tmp_path, partial_target=cand), r"empty candidate sets in 1 of 8 rows \(first: row 5")
    _error(_palm(tmp_path, target=np.array([[1, 2, 3, 1, 2, 7, 1, 2]])), "label indices outside")
    twohot = np.eye(3)[np.arange(8) % 3].T
    twohot[:, 2] = 1
    _error(_palm(tmp_path, target=twohot), "without exactly one 1 in 1 of 8 rows")
    x = np.random.RandomState(0).randn(8, 4)
    x[6, 2] = np.nan
    _error(_palm(tmp_path, data=x), "NaN/inf features in 1 of 8 rows")
    _error(_palm(tmp_path, partial_target=np.ones((3, 7))), "'partial_target' has shape")
    _error(_palm(tmp_path, target=np.eye(4)[np.arange(8) % 4].T), "true labels have shape")
    _error(_palm(tmp_path, data=np.array(["abc"])), "expected")
    _error(_palm(tmp_path, data=np.random.RandomState(0).randn(8, 4) + 1j),
           r"'data' holds complex numbers \(dtype complex128\); expected real values")  # was cast, with a warning


def test_true_label_outside_candidates_warns(tmp_path: Path) -> None:
    cand = np.zeros((3, 8))
    cand[(np.arange(8) + 1) % 3, np.arange(8)] = 1  # true label never a candidate
    cand[np.arange(8)[:5] % 3, np.arange(5)] = 1  # ... except for the first 5 rows
    with pytest.warns(PLLDataWarning, match="3 of 8 true labels are outside"):
        load_mat_path(_palm(tmp_path, partial_target=cand), DataOptions())


@pytest.mark.parametrize("stored", ["n x d", "d x n"])
def test_features_with_as_many_columns_as_labels_load_either_way(tmp_path: Path, stored: str) -> None:
    """d = q = 4 features and labels: the features stored d x n were read as 4 examples (an outside review: a
    one-hot error instead of a load); the PALM layout says the candidates are q x n."""
    x = np.random.RandomState(0).randn(40, 4)
    path = _palm(tmp_path, n=40, q=4, data=x if stored == "n x d" else x.T)
    data = load_mat_path(path, DataOptions())
    assert data.num_train + len(data.y_test) == 40 and data.info["d"] == 4


def test_proden_layout_small(tmp_path: Path) -> None:
    y = np.arange(10) % 4
    path = tmp_path / "small.mat"
    scipy.io.savemat(path, {"features": np.random.RandomState(1).randn(10, 3), "logitlabels": np.eye(4)[y],
                            "p_labels": np.minimum(1, np.eye(4)[y] + np.eye(4)[(y + 2) % 4])})
    data = load_mat_path(path, DataOptions(seed=2))
    assert data.info["layout"] == "proden" and data.num_classes == 4
    assert (data.candidates.sum(1) == 2).all()


def test_zscore_of_a_column_too_large_to_square_is_not_zeroed():
    """A finite feature column around 1e160 overflowed in std() (its squares are inf) and became all zeros; it is
    now standardised like the others, which keep their values to the bit."""
    import warnings

    from pllzoo.data.matfile import _zscore

    x = np.random.RandomState(0).randn(50, 3)
    plain = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
    big = x.copy()
    big[:, 1] *= 1e160
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow on the way
        z, z_test = _zscore(big, big[:5])
    assert np.array_equal(z[:, [0, 2]], plain[:, [0, 2]]) and np.allclose(z[:, 1], plain[:, 1], atol=1e-5)
    assert np.array_equal(z_test, z[:5])
    assert np.array_equal(_zscore(x, x[:5])[0], plain)
