"""What every dataset loader returns, and the options it is called with."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import torch

Kind = Literal["image", "tabular"]


@dataclass(frozen=True)
class DataOptions:
    """Options shared by all loaders; a loader ignores what does not apply to it.

    ``phi``/``imb``/``imb_type`` default to ``None`` meaning "the dataset's own default".
    """

    seed: int = 1
    data_dir: Path | None = None
    split: Literal["uniform", "balanced"] = "uniform"
    phi: float | None = None  # partial rate (CIFAR); phi < 0 selects the non-uniform matrix
    imb: float | None = None  # imbalance ratio gamma = n_0 / n_{K-1}
    imb_type: Literal["exp", "step"] | None = None
    download: bool = True  # allow torchvision to download when data_dir has no copy
    holdout: float = 0.0  # fraction of training rows held out, partially labelled, for model selection
    subset: int | None = None  # keep this many random train and test rows (smoke runs only)

    def __post_init__(self) -> None:
        # every phi < 0 selects the same fixed non-uniform matrix: one value, so one setting and one run id
        # (an outside review: --phi -1 and --phi -0.5 trained the same data under two ids and labels)
        if self.phi is not None and self.phi < 0 and self.phi != -1.0:
            object.__setattr__(self, "phi", -1.0)


@dataclass(frozen=True)
class TrainDefaults:
    """Sensible training defaults a dataset carries, so a bench with no flags does the right thing."""

    model: str
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int
    schedule: Literal["step", "cosine", "constant"] = "constant"
    milestones: tuple[int, ...] = ()
    momentum: float = 0.9
    source: str = ""  # where these numbers come from (a paper, a released command)


@dataclass
class PLLData:
    """A partially labelled, possibly long-tailed dataset held in memory.

    Images are ``uint8 [N, 3, H, W]`` (augmented on the fly by the trainer); tabular
    features are ``float32 [N, d]``.  ``y_train`` is the hidden true label: the
    trainer uses it for logging and metrics only, never for learning.
    """

    name: str
    kind: Kind
    x_train: torch.Tensor
    y_train: torch.Tensor  # long [N]
    candidates: torch.Tensor  # bool [N, K]
    x_test: torch.Tensor
    y_test: torch.Tensor  # long [M]
    num_classes: int
    class_names: list[str]
    defaults: TrainDefaults
    mean: tuple[float, ...] | None = None  # per-channel normalisation for images
    std: tuple[float, ...] | None = None
    info: dict[str, Any] = field(default_factory=dict)  # generation parameters, provenance
    x_val: torch.Tensor | None = None  # held-out training rows (pllzoo.data.holdout), no true labels
    candidates_val: torch.Tensor | None = None  # bool [V, K], their candidate sets

    @property
    def num_train(self) -> int:
        return int(self.y_train.shape[0])

    @property
    def train_counts(self) -> torch.Tensor:
        """True-label counts of the training set, ``long [K]``."""
        return torch.bincount(self.y_train, minlength=self.num_classes)

    def replace(self, **changes: Any) -> "PLLData":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class DatasetSpec:
    """A named dataset: how to load it, what it is, and what loading it without a network needs.

    ``files`` are paths under the data folder (``--data-dir``, else ``$PLLZOO_CACHE/data``) or absolute,
    any one of which the loader reads; none (and ``needs_files`` false) means it is generated.  ``source`` is
    where the files come from: the download when ``needs_files`` is false, a page to fetch them by
    hand when it is true.  ``pllzoo datasets`` lists all three.
    """

    name: str
    load: Callable[[DataOptions], PLLData]
    description: str
    needs_files: bool = False  # True when it cannot be generated/downloaded on the fly
    files: tuple[str, ...] = ()  # alternatives under the data folder; e.g. "cifar-10-batches-py/"
    source: str = ""  # the download (needs_files False) or where to get the files (True)
    # which of DataOptions' phi, imb, imb_type, split the loader reads (None: it does not say); a bench that
    # sets another is refused, as the run would record a setting its data never had
    reads: frozenset[str] | None = None


#: ``reads`` of a drawn set: its candidates and long tail (φ, γ, the tail's shape)
GENERATED = frozenset({"phi", "imb", "imb_type"})
SPLIT = frozenset({"split"})  # ``reads`` of a fixed set: only the test protocol is chosen


def text_name(name: str) -> str:
    """``name`` (of a user's file or folder) as text every writer takes: a byte that is no UTF-8, which Python keeps
    as a lone surrogate, becomes ``\\xNN``; any other name stays as it is (so run ids stand).  An outside review: a
    dataset named after such a file trained, then crashed writing results.csv."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def fingerprint(data: PLLData) -> str:
    """A short hash of what a run learns from and is tested on: training features, labels and candidates, test
    features and labels (sha256, first 16 hex digits).  ``env.json`` keeps it, so that resuming or re-scoring
    a run on other data (another ``--data-dir`` copy with other features) is said, not silent."""
    import hashlib

    h = hashlib.sha256()
    for t in (data.x_train, data.y_train, data.candidates, data.x_test, data.y_test):
        a = t.detach().cpu().contiguous()
        h.update(f"{a.dtype}{tuple(a.shape)}".encode())
        h.update(a.numpy().tobytes() if a.dtype != torch.bfloat16 else a.float().numpy().tobytes())
    return h.hexdigest()[:16]
