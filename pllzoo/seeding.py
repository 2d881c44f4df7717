"""Seeds derived by name, so adding a random stream never reshuffles the others."""

from __future__ import annotations

import hashlib


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from ``parts`` (e.g. ``(seed, "epoch", stage, epoch)``), stable across runs."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1
