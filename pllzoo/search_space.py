"""Random-search spaces of ``pllzoo sweep``: ``key=dist(args)`` specs, parsed, and drawn reproducibly.

A spec is an ``--hp`` key (``train.lr``, ``loss.eta``, ``METHOD:slot.field``) and a distribution:

* ``uniform(a, b)``    — a float in [a, b);
* ``loguniform(a, b)`` — ``exp`` of a uniform float in [log a, log b), 0 < a < b (PLENCH's lr = 10^U(−4.5, −2.5));
* ``randint(a, b)``    — an integer in a..b, both included;
* ``choice(v1, ...)``  — one of the values, each taken as ``--hp`` text (``choice(64,128,256)``, ``choice(step,cosine)``).

Trial k draws dimension ``key`` from its own stream, seeded by ``derive_seed(seed, "sweep", k, key)``
(DomainBed's ``seed_hash`` per name): the same seed gives the same trials, and adding a dimension or
more trials changes no value already drawn.  Values are ``--hp`` strings: floats by ``repr``, which
reads back to the same float.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from pllzoo.errors import PLLZooError
from pllzoo.planning import parse_overrides
from pllzoo.seeding import derive_seed

DISTRIBUTIONS = ("uniform", "loguniform", "randint", "choice")
_CALL = re.compile(r"^([A-Za-z_]\w*)\s*\((.*)\)$", re.S)
_EXAMPLE = "e.g. train.lr=loguniform(1e-3,1e-1), loss.eta=uniform(0.5,1) or train.batch_size=choice(64,128,256)"


@dataclass(frozen=True)
class Dimension:
    """One hyper-parameter of a search space: its ``--hp`` key, distribution and arguments."""

    key: str
    dist: str
    args: tuple[str, ...]  # the arguments as written (choice) or as checked numbers (the others)

    def __str__(self) -> str:
        return f"{self.key}={self.dist}({','.join(self.args)})"

    def value(self, u: float) -> str:
        """The ``--hp`` value at quantile ``u`` ∈ [0, 1) of the distribution."""
        if self.dist == "choice":
            return self.args[min(int(u * len(self.args)), len(self.args) - 1)]
        if self.dist == "randint":
            a, b = int(self.args[0]), int(self.args[1])
            return str(a + min(int(u * (b - a + 1)), b - a))
        a, b = float(self.args[0]), float(self.args[1])
        if self.dist == "loguniform":
            return repr(math.exp(math.log(a) + (math.log(b) - math.log(a)) * u))
        return repr(a + (b - a) * u)

    def support(self) -> tuple[str, ...]:
        """The values that bound what a draw can be (the ends, or every choice): checked against the field."""
        if self.dist == "choice":
            return self.args
        if self.dist == "randint":
            return self.args
        return tuple(repr(float(a)) for a in self.args)

    def draw(self, seed: int, trial: int) -> str:
        """Trial ``trial``'s value (see the module doc)."""
        return self.value(random.Random(derive_seed(seed, "sweep", trial, self.key)).random())


def parse_dimension(text: str) -> Dimension:
    """``"train.lr=loguniform(1e-3,1e-1)"`` → :class:`Dimension`.

    :raises PLLZooError: one line naming the spec and what is wrong with it.
    """
    bad = f"bad --space {text!r}"
    if "=" not in text:
        raise PLLZooError(f"{bad}: write key=distribution(args), {_EXAMPLE}")
    try:
        ((key, call),) = parse_overrides([text]).items()
    except PLLZooError:
        raise PLLZooError(f"{bad}: write key=distribution(args), {_EXAMPLE}") from None
    found = _CALL.match(call.strip())
    if not found:
        raise PLLZooError(f"{bad}: the value must be a distribution, one of {', '.join(DISTRIBUTIONS)}; {_EXAMPLE}")
    dist, args = found.group(1), tuple(a.strip() for a in found.group(2).split(","))
    if dist not in DISTRIBUTIONS:
        raise PLLZooError(f"{bad}: unknown distribution {dist!r}; valid: {', '.join(DISTRIBUTIONS)}")
    if dist == "choice":
        if not all(args):
            raise PLLZooError(f"{bad}: choice needs one or more non-empty values, e.g. choice(64,128,256)")
        if len(set(args)) < len(args):
            raise PLLZooError(f"{bad}: choice lists a value twice")
        return Dimension(key, dist, args)
    if len(args) != 2:
        raise PLLZooError(f"{bad}: {dist} takes two bounds, {dist}(low,high)")
    kind = int if dist == "randint" else float
    try:
        low, high = (kind(a) for a in args)
    except ValueError:
        raise PLLZooError(f"{bad}: {dist}'s bounds must be {'integers' if kind is int else 'numbers'}") from None
    if not all(math.isfinite(v) for v in (low, high)):
        raise PLLZooError(f"{bad}: {dist}'s bounds must be finite")
    if not (low <= high if dist == "randint" else low < high):
        raise PLLZooError(f"{bad}: low must be {'≤' if dist == 'randint' else '<'} high")
    if dist == "loguniform" and low <= 0:
        raise PLLZooError(f"{bad}: loguniform needs 0 < low")
    return Dimension(key, dist, (str(low), str(high)))


def parse_space(texts: Iterable[str]) -> list[Dimension]:
    """Every spec of ``texts`` parsed; a key given twice is an error (one line)."""
    space: list[Dimension] = []
    for text in texts:
        dim = parse_dimension(text)
        if any(d.key == dim.key for d in space):
            raise PLLZooError(f"--space {dim.key} is given twice")
        space.append(dim)
    return space


def read_space_file(path: Path) -> list[str]:
    """The specs of a space file: one per line; blank lines and ``#`` comments skipped."""
    try:  # UTF-8 past a byte-order mark (an outside review: it became part of the first key)
        lines = Path(path).read_bytes().decode("utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise PLLZooError(f"--space-file {path}: cannot read it ({type(exc).__name__})") from None
    specs = [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]
    if not specs:  # not "no --space given": the file was given (an outside review)
        raise PLLZooError(f"--space-file {path} holds no spec (blank lines and # comments only); write one per line, "
                          "e.g. train.lr=loguniform(1e-3,1e-1)")
    return specs


def draw_trials(space: list[Dimension], n: int, seed: int) -> list[dict[str, str]]:
    """``n`` trials, each an ``--hp`` override dict ``{key: value}`` in the order of ``space``."""
    return [{d.key: d.draw(seed, k) for d in space} for k in range(n)]
