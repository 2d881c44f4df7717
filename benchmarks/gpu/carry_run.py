"""Carry an unfinished run folder between device sessions, within a device call's transfer limits.

    python benchmarks/gpu/carry_run.py pack OUT DEST [--part-mib 15] [--label NAME]
    python benchmarks/gpu/carry_run.py unpack SRC OUT

A device call sends at most 64 MiB (the working tree included) and brings back at most 8 files of
16 MiB (``/work/.library/device/README.md``); a ResNet-18 run's checkpoint is 90 MB, half of it SGD's
momentum buffers.  ``pack`` writes, for the ``pllzoo bench --out`` folder OUT, into DEST:

* ``run.tgz``: OUT without its checkpoints (config, env, log, results.csv: small);
* ``ckpt.partNN``: the one unfinished run's checkpoint (none when every run finished) *slimmed* (:func:`pllzoo.checkpoint.slim_checkpoint`:
  without the momentum buffers, 46 MB for ResNet-18) and cut into parts of at most ``--part-mib`` MiB;
* ``carry.json``: the run's folder, the parts and the checkpoint's sha256.

OUT's own checkpoint stays whole, so a run continued on the same machine keeps its momentum.  ``unpack``
rebuilds OUT from them on another machine (checking the sha256); ``pllzoo bench --resume`` then continues
the run with momentum restarted (the trainer warns and marks that epoch's record ``momentum_restarted``).
What a restart does to a result: ``benchmarks/momentum-restart/``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from pllzoo.checkpoint import NAME, slim_checkpoint

MANIFEST = "carry.json"


def _sha256(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


MAX_PARTS = 3
"""The checkpoint parts a call can bring back beside env.txt, paper.log, finals.tgz, run.tgz and carry.json (8 files),
and that the next call's tree (64 MiB, .devdata's 6.8 included) can take along."""


def pack(out: Path, dest: Path, part_mib: float, label: str | None = None, max_parts: int = MAX_PARTS) -> dict:
    """Pack ``out`` into ``dest`` (see the module doc); ``label`` (e.g. the paper run's name) goes into carry.json.
    A slim checkpoint of more than ``max_parts`` parts cannot travel: refused (exit) before any part is written
    (PiCO's, with its key encoder, is 96 MB).  Lock files stay behind: a lock of this machine's bench would make
    the next machine's ``--resume`` skip the run as in use."""
    if not (out / "runs").is_dir():
        sys.exit(f"carry_run: {out} is no pllzoo bench --out folder (no runs/ in it)")
    ckpts = sorted(p for p in out.glob(f"runs/*/{NAME}") if not (p.parent / "done").exists())
    if len(ckpts) > 1:
        sys.exit(f"carry_run: {out} holds {len(ckpts)} unfinished runs; pack carries one")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest / "run.tgz.tmp", "w:gz") as tar:
        tar.add(out, arcname=".", filter=lambda info: None if Path(info.name).name in (NAME, f"{NAME[:-3]}.tmp")
                or info.name.endswith(".lock") else info)
    (dest / "run.tgz.tmp").replace(dest / "run.tgz")
    manifest: dict = {"run": None, "parts": []}  # every run finished: the small files alone
    if label is not None:
        manifest["label"] = label
    if ckpts:
        with tempfile.TemporaryDirectory() as tmp:
            slim = Path(tmp) / NAME
            shutil.copyfile(ckpts[0], slim)
            full, size = slim_checkpoint(slim)
            part_bytes = int(part_mib * 2**20)
            if -(-size // part_bytes) > max_parts:
                sys.exit(f"carry_run: the slim checkpoint of {ckpts[0].parent.name} is {size / 2**20:.1f} MiB, more "
                         f"than {max_parts} parts of {part_mib:g} MiB: it cannot travel between device sessions")
            with slim.open("rb") as f:
                for i, block in enumerate(iter(lambda: f.read(part_bytes), b"")):
                    manifest["parts"].append(f"ckpt.part{i:02d}")
                    (dest / manifest["parts"][-1]).write_bytes(block)
            manifest.update(run=str(ckpts[0].parent.relative_to(out)), sha256=_sha256(slim.read_bytes()), bytes=size,
                            full_bytes=full)
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def label_of(src: Path) -> str | None:
    """The label ``src``'s carry.json was packed with (None: none, or no readable carry.json)."""
    try:
        label = json.loads((src / MANIFEST).read_text()).get("label")
    except (OSError, ValueError, AttributeError):
        return None
    return label if isinstance(label, str) else None


def read(src: Path) -> tuple[dict, bytes, bytes]:
    """``src``'s manifest, run.tgz and rebuilt checkpoint, checked (sha256); exits with the reason if any is not
    whole.  ``.paperrun/`` is committed between sessions, so a test checks it with this before a device call."""
    try:
        manifest = json.loads((src / MANIFEST).read_text())
        parts = [(src / part).read_bytes() for part in manifest["parts"]]
        archive = (src / "run.tgz").read_bytes()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.exit(f"carry_run: {src} is not a whole packed run ({type(exc).__name__}: {exc})")
    blob = b"".join(parts)
    if manifest["run"] is not None and _sha256(blob) != manifest.get("sha256"):
        sys.exit(f"carry_run: the parts in {src} do not rebuild the packed checkpoint (sha256 differs)")
    return manifest, archive, blob


def unpack(src: Path, out: Path) -> Path:
    """Rebuild OUT (a new folder) from ``src``; everything is checked before anything is written."""
    manifest, archive, blob = read(src)
    if out.exists() and any(out.iterdir()):
        sys.exit(f"carry_run: {out} is not empty; unpack into a new folder")
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(out, filter="data")
    if manifest["run"] is None:
        return out
    target = out / manifest["run"] / NAME
    target.write_bytes(blob)
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("pack")
    p.add_argument("out", type=Path)
    p.add_argument("dest", type=Path)
    p.add_argument("--part-mib", type=float, default=15.0)
    p.add_argument("--label", default=None, help="a name kept in carry.json (the paper run's)")
    u = sub.add_parser("unpack")
    u.add_argument("src", type=Path)
    u.add_argument("out", type=Path)
    args = ap.parse_args()
    if args.verb == "pack":
        m = pack(args.out, args.dest, args.part_mib, args.label)
        print(f"packed {m['run']}: checkpoint {m['full_bytes']} -> {m['bytes']} bytes (slim) in {len(m['parts'])} "
              f"part(s)" if m["run"] else f"packed {args.out}: every run finished, no checkpoint carried")
    else:
        print(f"unpacked {unpack(args.src, args.out)}")


if __name__ == "__main__":
    main()
