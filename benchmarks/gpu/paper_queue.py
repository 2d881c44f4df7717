"""Issue 17's paper runs, in order, for as long as a device call lasts: finish the carried run, then start the next.

    python benchmarks/gpu/paper_queue.py --dest $OUT --minutes M [--queue A,B,...] [--seed 1]
        [--carried .paperrun] [--work results] [--finished benchmarks/paper/results] [-- BENCH ARGS...]

For each paper run of ``--queue`` (names of ``benchmarks/paper/run.py list``; default: issue 17's row (a) at
φ = 0.5, γ = 100: SoLar, PRODEN, CC; PiCO cannot be carried, :data:`ROW_A`), with seed ``--seed``:

* finished already, in ``--finished/NAME`` (committed: its ``runs.jsonl.xz``) or ``--work/paper-NAME`` (this
  machine): skipped;
* else its folder is ``--work/paper-NAME``; on a fresh machine, the run carried in ``--carried``
  (:mod:`carry_run`) is unpacked there when its label is NAME (a carry.json without a label is the SoLar run,
  packed before labels existed);
* it trains with ``run.py run NAME`` and ``--time-limit`` the minutes left of ``--minutes``;
* finished (exit 0): its folder without checkpoints is added to ``DEST/finals.tgz`` (one file for all the runs
  finished in this call, ``NAME/`` each); a SoLar run is then re-scored with SoLar-LA at Table 6's ζ
  (``pllzoo evaluate --predict solar.la``, ``NAME/la-zZ.csv`` added to finals.tgz) while its model is still
  there, since the checkpoint does not come back; then the next run starts;
* a run before the carried part's label in the queue is skipped: it ended in an earlier call (its finals may
  not be in ``--finished`` yet), and training it again from epoch 0 would replace the carried part;
* stopped by the time limit (exit 75) or failed: it is packed for the next session (``carry_run.pack`` with
  label NAME: run.tgz, carry.json, the checkpoint's parts) and the queue ends.

So a call returns at most env.txt, paper.log, finals.tgz, run.tgz, carry.json and three checkpoint parts: the
device's 8 files.  ``BENCH ARGS`` go to every ``pllzoo bench`` after the recipe's (``--device cuda --data-dir
.devdata --offline --hp train.compile=...``).  Each step is one line on stdout; the runs' output goes to
``DEST/paper.log``.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import carry_run  # noqa: E402

RUN_PY = HERE.parent / "paper" / "run.py"
ROW_A = ("c10-phi0.5-g100-solar", "c10-phi0.5-g100-proden", "c10-phi0.5-g100-cc")
"""Issue 17's row (a) but PiCO: its slim checkpoint (a second ResNet-18, the key encoder) is 96 MB, six parts, which
no call can carry (:data:`carry_run.MAX_PARTS`), and 1000 epochs do not fit one session."""
UNLABELLED = ROW_A[0]  # the carry packed before labels: the SoLar run of the fourth and fifth H100 sessions
MIN_MINUTES = 2.0  # a run started with less would spend it compiling and packing
LA_ZETAS = ("0.5", "1", "2")  # Table 6's SoLar-LA cells (recipes.csv), from the SoLar model itself
LA_MIN_S = 40.0  # seconds left needed to start re-scoring one ζ (a device call takes ~20 s for CIFAR-10's test set)
STOPPED = 75  # pllzoo bench's exit status after a clean --time-limit stop


def finished(folder: Path, seed: int) -> bool:
    """``folder`` (a bench --out) holds a finished run of ``seed``: in ``runs/``, or in its ``runs.jsonl.xz``
    (git keeps the archive, not ``runs/``)."""
    from pllzoo import archive

    archived = archive.read(folder) if (folder / archive.NAME).exists() else {}
    return any(folder.glob(f"runs/*__s{seed}-*/done")) or any(
        run.done and f"__s{seed}-" in name for name, run in archived.items())


def add_final(folder: Path, name: str, finals: Path, only: list[Path] | None = None) -> None:
    """Add ``folder`` (checkpoints left out) as ``name/`` to the tgz ``finals``, keeping what it holds; ``only``:
    these files of ``folder`` alone."""
    old = finals.read_bytes() if finals.exists() else None
    tmp = finals.with_suffix(".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        if old is not None:
            with tarfile.open(fileobj=io.BytesIO(old), mode="r:gz") as prev:
                for member in prev.getmembers():
                    tar.addfile(member, prev.extractfile(member) if member.isfile() else None)
        if only is not None:
            for path in only:
                tar.add(path, arcname=f"{name}/{path.relative_to(folder)}")
        else:
            tar.add(folder, arcname=name,
                    filter=lambda info: None if info.name.endswith((".pt", ".pt.tmp")) else info)
    tmp.replace(finals)


def add_la(folder: Path, name: str, finals: Path, extra: list[str], log: Path, seconds_left) -> None:
    """Re-score a finished SoLar run in ``folder`` with SoLar-LA at each of :data:`LA_ZETAS` (``pllzoo evaluate
    --predict solar.la``, on the bench's ``--device`` and ``--data-dir``), each CSV added to ``finals`` as
    ``name/la-zZ.csv``; skipped for another method, or when fewer than :data:`LA_MIN_S` seconds are left (what
    ``seconds_left()`` says).  A failure is one line and leaves ``finals`` as it was: the run's own numbers are
    already there (an outside review: Table 6's route needed the model, which only the device had)."""
    runs = sorted(p.parent for p in folder.glob("runs/*/done"))
    try:
        methods = {json.loads((r / "config.json").read_text()).get("method") for r in runs}
    except (OSError, ValueError):
        methods = set()
    if methods != {"solar"}:
        return
    opts = [x for i, a in enumerate(extra) if a in ("--device", "--data-dir") and i + 1 < len(extra)
            for x in (a, extra[i + 1])]
    for zeta in LA_ZETAS:
        left = seconds_left()
        if left < LA_MIN_S:
            print(f"{name}: SoLar-LA zeta {zeta} not scored, {left:.0f} s left ({LA_MIN_S:g} needed)")
            return
        began = time.monotonic()
        csv = folder / f"la-z{zeta}.csv"
        cmd = [sys.executable, "-m", "pllzoo", "evaluate", *map(str, runs), "--predict", "solar.la",
               "--hp", f"predict.zeta={zeta}", *opts, "--csv", str(csv)]
        with log.open("a") as f:
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            try:
                rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=max(1.0, left - 15))
            except subprocess.TimeoutExpired:
                rc = "timeout"
        if rc != 0 or not csv.exists():
            print(f"{name}: SoLar-LA zeta {zeta} failed (rc {rc}, see paper.log)")
            return
        add_final(folder, name, finals, only=[csv])
        print(f"{name}: SoLar-LA zeta {zeta} scored in {time.monotonic() - began:.0f} s, in finals.tgz")


def replans(name: str, seed: int, folder: Path, run: str, extra: list[str], log: Path) -> str | None:
    """Why the command this queue trains ``name`` with would not resume the carried run ``folder/runs/run`` (None:
    it would).

    ``run.py run NAME --dry-run`` gives that very ``pllzoo bench`` command (the recipe, ``--resume``, the extra
    bench args of this call such as ``--hp train.compile=...``); run with ``--dry-run --jobs 2`` (no timing,
    nothing written) it prints its plan as JSON.  A run id other than the carried one, or a refusal, means the
    bench would start a new run from epoch 0 beside it and carry nothing back (a review found a session lost that
    way to a hyper-parameter added between sessions; another, that replaying the record alone misses a changed
    recipe or a ``COMPILE`` other than the earlier session's)."""
    import shlex

    shown = subprocess.run([sys.executable, str(RUN_PY), "run", name, "--seeds", str(seed), "--out", str(folder),
                            "--dry-run", *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if shown.returncode != 0:
        return f"run.py refuses it (rc {shown.returncode}): {shown.stdout.strip()[-200:]}"
    cmd = [*shlex.split(shown.stdout.strip().splitlines()[-1]), "--dry-run", "--jobs", "2"]
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, text=True)
    if done.returncode != 0:
        return f"its bench refuses to plan (rc {done.returncode}, see paper.log)"
    try:
        planned = [p["run"] for p in json.loads(done.stdout)]
    except (ValueError, TypeError, KeyError):
        return "its bench printed no plan (see paper.log)"
    return None if planned == [run] else f"the queue's command plans {', '.join(planned) or 'nothing'} instead"


def main(argv: list[str] | None = None, clock=time.monotonic) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dest", type=Path, required=True, help="where the call's files go ($OUT)")
    ap.add_argument("--minutes", type=float, required=True, help="device minutes for the whole queue")
    ap.add_argument("--queue", default=",".join(ROW_A))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--carried", type=Path, default=Path(".paperrun"))
    ap.add_argument("--work", type=Path, default=Path("results"))
    ap.add_argument("--finished", type=Path, default=HERE.parent / "paper" / "results")
    ap.add_argument("--part-mib", type=float, default=15.9)
    ap.add_argument("--grace-s", type=float, default=0.0,
                    help="seconds past --minutes that re-scoring a finished SoLar run may take: the caller's reserve "
                         "for packing, which a finished run does not need (next.sh: 30 of its 35)")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    extra = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    deadline = clock() + 60 * args.minutes
    args.dest.mkdir(parents=True, exist_ok=True)
    log = args.dest / "paper.log"
    names = [n.strip() for n in args.queue.split(",") if n.strip()]
    label = (carry_run.label_of(args.carried) or UNLABELLED) if (args.carried / carry_run.MANIFEST).exists() else None
    first = names.index(label) if label in names else 0
    for k, name in enumerate(names):
        folder = args.work / f"paper-{name}"
        if finished(args.finished / name, args.seed) or finished(folder, args.seed):
            print(f"{name} seed {args.seed}: finished before")
            continue
        if k < first:  # it ended in an earlier call: the carried part is a later run's (an outside review: it
            # started again from epoch 0, and its pack replaced the carried part)
            print(f"{name} seed {args.seed}: skipped, the carried part is {label}'s, later in the queue (this run "
                  f"ended before it: put its finals into {args.finished})")
            continue
        if not folder.exists() and (carry_run.label_of(args.carried) or UNLABELLED) == name \
                and (args.carried / carry_run.MANIFEST).exists():
            target = carry_run.unpack(args.carried, folder)  # folder/runs/<run id>/checkpoint.pt
            print(f"{name}: unpacked {target}")
            run = target.parent.name
            why = replans(name, args.seed, folder, run, extra, log)
            if why is not None:  # training would start the run afresh beside the carried one: stop, loudly
                print(f"{name}: the carried run {run} would not resume: {why}; not trained")
                return 3
        left = (deadline - clock()) / 60
        if left < MIN_MINUTES:
            print(f"{name}: not started, {left:.2f} min left ({MIN_MINUTES:g} needed)")
            return 0
        cmd = [sys.executable, str(RUN_PY), "run", name, "--seeds", str(args.seed), "--out", str(folder),
               "--time-limit", f"{left:.2f}", *extra]
        with log.open("a") as f:
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
        print(f"{name}: rc {rc}")
        if rc == 0 and finished(folder, args.seed):
            add_final(folder, name, args.dest / "finals.tgz")
            print(f"{name}: finished, in finals.tgz")
            add_la(folder, name, args.dest / "finals.tgz", extra, log, lambda: deadline + args.grace_s - clock())
            continue
        m = carry_run.pack(folder, args.dest, args.part_mib, label=name) if (folder / "runs").is_dir() else None
        print(f"{name}: packed {m['run'] if m else 'nothing (no run folder)'}"
              + ("" if rc == STOPPED else " after a failure: see paper.log"))
        return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
