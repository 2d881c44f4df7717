"""Progress of a bench: every run with its stages and epochs, ETA per run and overall.

:class:`Tracker` is the bookkeeping, with no I/O: where each run is (epochs done over all its stages)
and how long is left.  A run's ETA is its remaining epochs times its mean epoch time so far (the
records' ``wall_s``); before its first epoch, the mean of another run of the same method, else the
estimate of :mod:`pllzoo.costs`, else the mean epoch over all runs.  The overall ETA is the sum over
unfinished runs divided by the runs trained at once (``--jobs``, at most the runs left).

:class:`BenchProgress` shows it: on a terminal a rich display (one bar per run, its stage, accuracy,
loss and ETA; one bar for all runs); elsewhere (nohup, SLURM, a pipe, click's CliRunner) plain lines,
one per epoch and run (``proden seed 1 [train 1/1] epoch 3/40 (run 3/40) loss 0.512 acc 61.3 elapsed
0:00:12 ETA run 0:04:01, all 0:20:05``), at most one per run every ``every_s`` seconds except the
first and last epoch of each stage; and one line per run status (started, reused, failed, ...).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pllzoo.costs import RunCost


def clock_text(seconds: float | None) -> str:
    """``H:MM:SS`` (``-:--:--`` when unknown)."""
    if seconds is None:
        return "-:--:--"
    s = int(round(max(seconds, 0.0)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def live_on(console: Any) -> bool:
    """Whether ``console`` takes a live (redrawn) display: an interactive terminal (not ``TERM=dumb``, where rich
    would not refresh and nothing showed until the run ended) that its stream really is (``FORCE_COLOR`` makes
    rich call a file a terminal, and the redraws filled the log).  Otherwise the plain per-stage lines.  An
    outside review found both."""
    try:
        tty = console.file.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    return bool(console.is_interactive and tty)


@dataclass
class _RunState:
    cost: RunCost
    estimate_s: float | None
    done: int = 0  # epochs finished, over all stages
    epoch_s: list[float] = field(default_factory=list)  # wall_s of the epochs seen by this bench
    finished: bool = False


class Tracker:
    """Epochs done and ETAs of a bench's runs (see the module doc); fed with the trainer's records."""

    def __init__(self, costs: list[RunCost], estimates: dict[str, float] | None = None, jobs: int = 1) -> None:
        self.runs = {c.run_id: _RunState(c, (estimates or {}).get(c.run_id)) for c in costs}
        self.jobs = jobs
        for r in self.runs.values():
            if r.cost.reused:
                r.done, r.finished = r.cost.epochs, True
            else:
                r.done = r.cost.done  # a resumed run starts where its checkpoint left it

    def position(self, run_id: str, record: dict[str, Any]) -> int:
        """Epochs done over all stages after ``record`` (its ``stage_index`` and ``epoch``)."""
        stages = self.runs[run_id].cost.stages
        i = int(record.get("stage_index", 0))
        return sum(e for _, e in stages[:i]) + int(record["epoch"])

    def epoch_done(self, run_id: str, record: dict[str, Any]) -> None:
        r = self.runs[run_id]
        r.done = min(self.position(run_id, record), r.cost.epochs)
        if "wall_s" in record:
            r.epoch_s.append(float(record["wall_s"]))

    def run_done(self, run_id: str) -> None:
        """The run finished, failed or was reused: nothing is left of it."""
        self.runs[run_id].finished = True

    def _epoch_s(self, r: _RunState) -> float | None:
        if r.epoch_s:
            return sum(r.epoch_s) / len(r.epoch_s)
        same = [s for o in self.runs.values() if o.cost.method == r.cost.method for s in o.epoch_s]
        if same:
            return sum(same) / len(same)
        if r.estimate_s is not None and r.cost.epochs > r.cost.done:
            return r.estimate_s / (r.cost.epochs - r.cost.done)  # the estimate covers the epochs left
        seen = [s for o in self.runs.values() for s in o.epoch_s]
        return sum(seen) / len(seen) if seen else None

    def run_eta(self, run_id: str) -> float | None:
        """Seconds left of one run (0 once it is done; None when nothing is known yet)."""
        r = self.runs[run_id]
        if r.finished:
            return 0.0
        per = self._epoch_s(r)
        return None if per is None else per * (r.cost.epochs - r.done)

    def eta(self) -> float | None:
        """Seconds left of the bench: the unfinished runs' ETAs summed, over the runs trained at once."""
        left = [rid for rid, r in self.runs.items() if not r.finished]
        etas = [self.run_eta(rid) for rid in left]
        if any(e is None for e in etas):
            return None
        return sum(etas) / max(1, min(self.jobs, len(left))) if left else 0.0

    @property
    def total(self) -> int:
        return sum(r.cost.epochs for r in self.runs.values())

    @property
    def completed(self) -> int:
        return sum(r.cost.epochs if r.finished and r.cost.reused else r.done for r in self.runs.values())


def _name(cost: RunCost) -> str:
    return f"{cost.method} seed {cost.seed}"


class BenchProgress:
    """``on_run``/``on_epoch`` for :func:`pllzoo.bench.execute`; a context manager around it.

    :param live: a rich display (a terminal) or plain lines through ``write``.
    :param console: the rich console of the live display (None: stderr).
    :param write: where plain lines go (default: stderr, flushed).
    :param every_s: at most one plain line per run this often (first and last epoch of a stage always).
    :param clock: seconds, for the elapsed time and the throttle (a fake in tests).
    """

    def __init__(self, costs: list[RunCost], estimates: dict[str, float] | None = None, jobs: int = 1,
                 live: bool = False, console: Any = None, write: Callable[[str], None] | None = None,
                 every_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.tracker = Tracker(costs, estimates, jobs)
        self.costs = {c.run_id: c for c in costs}
        self.live, self.console, self.every_s, self.clock = live, console, every_s, clock
        self.write = write or _stderr_line
        self.start = clock()
        self.last_line: dict[str, float] = {}
        self.progress: Any = None
        self.tasks: dict[str, Any] = {}

    # ------------------------------------------------------------------ context
    def __enter__(self) -> BenchProgress:
        if self.live:
            self._start_live()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.stop()

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("ETA {task.fields[eta]}"))
        self.progress = Progress(*columns, console=self.console or Console(stderr=True), transient=False)
        self.progress.start()
        t = self.tracker
        self.tasks["*"] = self.progress.add_task(f"all {len(self.costs)} runs", total=t.total, completed=t.completed,
                                                 eta=clock_text(t.eta()))
        for rid, c in self.costs.items():
            state = "reused" if c.reused else "waiting"
            self.tasks[rid] = self.progress.add_task(
                f"{escape(_name(c))} ({state}) {escape(c.stage_text())}", total=c.epochs,
                completed=c.epochs if c.reused else c.done, start=False, eta=clock_text(t.run_eta(rid)))

    # ------------------------------------------------------------------ callbacks
    def on_run(self, p: Any, status: str) -> None:
        rid = p.run_id
        if status in ("reused", "stopped", "not started") or status.startswith("failed"):
            self.tracker.run_done(rid)
        if self.progress is not None:
            from rich.markup import escape

            task = self.tasks[rid]
            if status in ("started", "resumed"):
                self.progress.start_task(task)
            self.progress.update(task, description=f"{escape(_name(self.costs[rid]))} ({escape(status)})",
                                 eta=clock_text(self.tracker.run_eta(rid)))
            self._update_all()
            return
        c = self.costs[rid]
        self.write(f"{_name(c)} {status}" + (f" ({c.stage_text()})" if status in ("started", "resumed") else ""))

    def on_epoch(self, p: Any, rec: dict[str, Any]) -> None:
        rid, c = p.run_id, self.costs[p.run_id]
        self.tracker.epoch_done(rid, rec)
        if rec.get("final_stage") and self.tracker.runs[rid].done >= c.epochs:
            self.tracker.run_done(rid)
        i = int(rec.get("stage_index", 0))
        where = f"[{rec['stage']} {i + 1}/{len(c.stages)}]"
        run_eta, all_eta = clock_text(self.tracker.run_eta(rid)), clock_text(self.tracker.eta())
        if self.progress is not None:
            from rich.markup import escape

            self.progress.update(self.tasks[rid], completed=self.tracker.runs[rid].done, eta=run_eta, description=(
                f"{escape(_name(c))} {escape(where)} acc {rec['acc_all']:.1f} loss {rec['loss']:.3f}"))
            self._update_all()
            return
        now = self.clock()
        edge = rec["epoch"] in (1, rec["epochs"])
        if not edge and now - self.last_line.get(rid, -float("inf")) < self.every_s:
            return
        self.last_line[rid] = now
        self.write(f"{_name(c)} {where} epoch {rec['epoch']}/{rec['epochs']} "
                   f"(run {self.tracker.runs[rid].done}/{c.epochs}) loss {rec['loss']:.4f} acc {rec['acc_all']:.2f} "
                   f"elapsed {clock_text(now - self.start)} ETA run {run_eta}, all {all_eta}")

    def _update_all(self) -> None:
        t = self.tracker
        self.progress.update(self.tasks["*"], completed=t.completed, eta=clock_text(t.eta()))


def _stderr_line(line: str) -> None:
    import sys

    print(line, file=sys.stderr, flush=True)
