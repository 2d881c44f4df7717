"""The built-in datasets, by name, and loading a ``.mat`` file given by path.

``builtin_datasets()`` is what the registry/CLI lists; each entry's ``load`` takes a
:class:`DataOptions`.  ``needs_files`` marks the real-world sets, which are never
downloaded (the PALM files must be in ``--data-dir``); ``files`` and ``source`` say what each set reads
offline and where it comes from (``pllzoo datasets``).
"""

from __future__ import annotations

from pathlib import Path

from pllzoo.data.base import GENERATED, SPLIT, DataOptions, DatasetSpec, PLLData
from pllzoo.data.cifar import DOWNLOADS, VARIANTS, cifar_loader, offline_files
from pllzoo.data.matfile import PALM_SOURCE, dataset_name_for, load_mat, mat_files, mat_loader
from pllzoo.data.synthetic import NAME as SYNTHETIC_NAME, load_synthetic

_CIFAR_DESCRIPTIONS = {
    "cifar10lt": "CIFAR-10-LT, uniform candidates (SoLar defaults phi=0.5, gamma=100, exp)",
    "cifar100lt": "CIFAR-100-LT, uniform candidates (SoLar defaults phi=0.1, gamma=20, exp)",
    "cifar100lt-h": "CIFAR-100-H-LT, candidates within the true label's superclass (phi=0.5, gamma=20)",
}
_MAT_DESCRIPTIONS = {
    "lost": "Lost (faces from the TV series, names from its scripts), 1122 x 108, 16 labels, PALM .mat",
    "birdsong": "BirdSong (bird song syllables), 4998 x 38, 13 labels, PALM .mat",
    "msrcv2": "MSRCv2 (image segments), 1758 x 48, 23 labels, PALM .mat",
    "fgnet": "FG-NET (facial age), 1002 x 262, 78 labels, PALM .mat",
    "italian": "Italian (POS tagging), 21878 x 519, 90 labels, PALM .mat",
    "soccer": "Soccer Player (faces in news), 17472 x 279, 171 labels, PALM .mat",
    "yahoo": "Yahoo! News (faces in captions), 22991 x 163, 219 labels, PALM .mat",
}


def builtin_datasets() -> list[DatasetSpec]:
    """Return every dataset pllzoo ships a loader for, synthetic first."""
    specs = [DatasetSpec(SYNTHETIC_NAME, load_synthetic,
                         "generated 10-class long-tailed tabular PLL set (gamma=100, phi=0.5); no download",
                         reads=GENERATED)]
    specs += [DatasetSpec(name, cifar_loader(name), desc, files=offline_files(VARIANTS[name].base),
                          source=DOWNLOADS[VARIANTS[name].base], reads=GENERATED)
              for name, desc in _CIFAR_DESCRIPTIONS.items()]
    specs += [DatasetSpec(name, mat_loader(name), desc, needs_files=True, files=mat_files(name), source=PALM_SOURCE,
                          reads=SPLIT)
              for name, desc in _MAT_DESCRIPTIONS.items()]
    return specs


def load_mat_path(path: Path | str, opts: DataOptions) -> PLLData:
    """Load a user-given ``.mat`` file (PALM or PRODEN/VALEN layout); named after its stem."""
    return load_mat(Path(path), opts)


def path_dataset(path: Path | str) -> DatasetSpec:
    """Return a :class:`DatasetSpec` that loads the ``.mat`` file at ``path`` (see :func:`load_mat_path`)."""
    p = Path(path).expanduser()

    def load(opts: DataOptions) -> PLLData:
        return load_mat_path(p, opts)

    return DatasetSpec(dataset_name_for(p), load, f"PLL .mat file {p}", needs_files=True, files=(str(p),),
                       reads=SPLIT)
