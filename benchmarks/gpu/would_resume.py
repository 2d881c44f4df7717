"""Before a GPU session, on the CPU: would the next session's queue resume the carried paper run?

    python benchmarks/gpu/would_resume.py [--carried .paperrun] [--data-dir .devdata] [--compile reduce-overhead]

The queue (``paper_queue.py``, from ``next.sh``) stops with rc 3 and trains nothing when its command would plan
another run id than the carried one: a default or a recipe changed since the last session.  That costs a call's
start-up of scarce device time, so this asks the same question here first: it unpacks the carried part into a
temporary folder and runs ``paper_queue.replans`` with next.sh's bench arguments, in processes that believe a
CUDA device is there (a ``sitecustomize`` that answers torch's CUDA queries; the plan is a ``--dry-run``, which
never touches the device).  Prints ``resumes RUN`` and exits 0, or prints why not and exits 1.  Needs
``.devdata`` (``slim_cifar.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

FAKE_CUDA = """\
import torch
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.get_device_name = lambda *a, **k: "planned on the CPU (benchmarks/gpu/would_resume.py)"
"""

CHECK = """\
import sys
from pathlib import Path
sys.path.insert(0, {here!r})
import carry_run, paper_queue
carried, folder, log = Path({carried!r}), Path({folder!r}), Path({log!r})
name = carry_run.label_of(carried) or paper_queue.UNLABELLED
target = carry_run.unpack(carried, folder)
why = paper_queue.replans(name, 1, folder, target.parent.name, {extra!r}, log)
print(f"resumes {{target.parent.name}} ({{name}})" if why is None else f"would not resume {{target.parent.name}}: {{why}}")
sys.exit(0 if why is None else 1)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--carried", type=Path, default=ROOT / ".paperrun")
    ap.add_argument("--data-dir", type=Path, default=ROOT / ".devdata")
    ap.add_argument("--compile", default="reduce-overhead", help="next.sh's COMPILE (default reduce-overhead)")
    args = ap.parse_args(argv)
    if not (args.carried / "carry.json").exists():
        print(f"no carried run in {args.carried}")
        return 1
    if not args.data_dir.is_dir():
        print(f"no {args.data_dir}: python benchmarks/gpu/slim_cifar.py --data-dir ../shared/data --out .devdata")
        return 1
    # the same bench arguments as next.sh's queue (paper_queue.py ... -- BENCH ARGS)
    extra = ["--device", "cuda", "--data-dir", str(args.data_dir), "--offline", "--hp", f"train.compile={args.compile}"]
    with tempfile.TemporaryDirectory(prefix="would-resume-") as tmp:
        fake = Path(tmp) / "fake"
        fake.mkdir()
        (fake / "sitecustomize.py").write_text(FAKE_CUDA)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), *filter(None, [os.environ.get("PYTHONPATH")])])}
        code = CHECK.format(here=str(HERE), carried=str(args.carried.resolve()), folder=str(Path(tmp) / "work"),
                            log=str(Path(tmp) / "paper.log"), extra=extra)
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT)
        if done.returncode != 0 and (Path(tmp) / "paper.log").exists():
            print((Path(tmp) / "paper.log").read_text()[-2000:])
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
