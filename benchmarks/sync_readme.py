"""Copy generated tables into README.md between markers, so the README shows what the files say.

A block in README.md (or any Markdown file given) looks like::

    <!-- begin: benchmarks/realworld/table-uniform.md -->
    ...replaced by that file's content...
    <!-- end -->

    python benchmarks/sync_readme.py            # rewrite README.md in place
    python benchmarks/sync_readme.py --check    # exit 1 if a block differs from its file

tests/test_readme_tables.py runs the check.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- begin: (?P<path>[^ ]+) -->\n)(?P<body>.*?)(<!-- end -->)", re.S)


def render(text: str, root: Path = ROOT) -> str:
    """``text`` with every block's body replaced by the current content of its file."""
    return BLOCK.sub(lambda m: m.group(1) + (root / m.group("path")).read_text().strip() + "\n" + m.group(4), text)


def stale(text: str, root: Path = ROOT) -> list[str]:
    """Paths of the blocks whose body differs from their file."""
    return [m.group("path") for m in BLOCK.finditer(text)
            if m.group("body").strip() != (root / m.group("path")).read_text().strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=[ROOT / "README.md"])
    parser.add_argument("--check", action="store_true", help="report stale blocks instead of rewriting")
    args = parser.parse_args()
    bad = []
    for path in args.files:
        text = path.read_text()
        if args.check:
            bad += [f"{path}: {p}" for p in stale(text)]
        else:
            path.write_text(render(text))
    for line in bad:
        print(f"stale: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
