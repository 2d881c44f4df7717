"""Where pllzoo looks for data files and keeps its caches.

``$PLLZOO_CACHE`` (default ``~/.cache/pllzoo``) holds decoded-image caches and, under
``data/``, anything downloaded.  A loader searches ``opts.data_dir`` when one is given,
otherwise that default data folder.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Return ``$PLLZOO_CACHE`` or ``~/.cache/pllzoo`` (not created here)."""
    env = os.environ.get("PLLZOO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pllzoo"


def default_data_root() -> Path:
    """Return the folder downloads go to when no ``data_dir`` is given."""
    return cache_root() / "data"


def search_roots(data_dir: Path | str | None) -> list[Path]:
    """Return the folders to search: ``data_dir`` if given, else the default data root."""
    return [Path(data_dir).expanduser()] if data_dir is not None else [default_data_root()]
