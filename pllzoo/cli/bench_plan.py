"""``pllzoo bench``'s cost guard on screen: the plan, the estimate, the warning, and ``--dry-run``'s configs.

The plan, the estimate and a warning go to stderr, beside the progress (:mod:`pllzoo.costs` says what
they hold and how the estimate is made); with ``--dry-run`` each run's resolved config goes to stdout
as one JSON list, so ``pllzoo bench ... --dry-run 2>/dev/null | jq`` reads it.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import click

from pllzoo import costs as cost_lib
from pllzoo.errors import PLLZooError
from pllzoo.planning import RunPlan
from pllzoo.registry import Registry

FAILED_STEPS = "the first steps of "  # how estimate() says a timing failed (the run will): a dry run's error
TIMING_BUDGET_S = 3.0  # seconds of timed steps per bench; a method not timed in it costs what the first did


def estimate(registry: Registry, plans: list[RunPlan], costs: list[cost_lib.RunCost], threads: int | None,
             jobs: int, budget_s: float = TIMING_BUDGET_S) -> tuple[dict[str, float], list[str], str | None]:
    """Seconds per run to train (run id → seconds), the runs timed, and why no estimate (None: there is one).

    The first run of each method to train is timed (:func:`pllzoo.timing.time_steps`) while the budget
    lasts; the others of the method, and the methods past the budget, take the first timing's numbers.
    """
    from pllzoo.threads import default_threads, set_threads
    from pllzoo.timing import time_steps

    todo = [(p, c) for p, c in zip(plans, costs) if not c.reused]
    if not todo:
        return {}, [], None
    compiled = next((p for p, _ in todo if p.train.compile != "none"), None)
    if compiled is not None:  # its first step compiles for many seconds (8 s + 25 s more in epoch 2 for SoLar on
        # an H100, benchmarks/gpu/results-speed5/): timed, a 1,100-epoch run was estimated at 12.8 days, not 25 min
        return {}, [], (f"{compiled.method.name} compiles its network (train.compile={compiled.train.compile}), "
                        "so its first steps would time the compilation; the progress gives the ETA from the first "
                        "epochs")
    set_threads(threads or default_threads(jobs))  # as each run will (pllzoo.bench._train)
    timings, timed, start = {}, [], time.perf_counter()
    for p, _ in todo:
        spent = time.perf_counter() - start
        if p.method.name in timings or (timings and spent >= budget_s):
            continue
        try:
            with warnings.catch_warnings():  # the run itself warns, once, when it trains
                warnings.simplefilter("ignore")
                timings[p.method.name] = time_steps(registry, p, budget_s=max(budget_s - spent, 0.0))
        except Exception as exc:  # the run itself will fail the same way, and say so then
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            why = why if isinstance(exc, PLLZooError) else why[:160]  # a one-line error of ours, whole (a review:
            # the missing pretrained weights' message lost its environment variable and URL)
            return {}, [], f"{FAILED_STEPS}{p.method.name} seed {p.seed} failed ({why})"
        timed.append(f"{p.method.name} seed {p.seed}")
    fallback = next(iter(timings.values()))
    seconds = {}
    for p, c in todo:
        t = timings.get(p.method.name, fallback)
        seconds[c.run_id] = cost_lib.run_seconds(c, t.step_s, t.eval_row_s)
    return seconds, timed, None


def show_estimate(registry: Registry, plans: list[RunPlan], costs: list[cost_lib.RunCost], threads: int | None,
                  jobs: int, time: bool, untimed: str, dry_run: bool = False) -> tuple[dict[str, float], float | None]:
    """Print the estimate (from a timing of the first steps when ``time``; else a line that the progress gives it,
    ``untimed`` saying when that is) and the cost warning; ``pllzoo sweep`` shows its trials' with it too.

    :returns: the estimated seconds per run id (empty without an estimate) and their total (None: none).
    """
    seconds: dict[str, float] = {}
    total = None
    if time:
        seconds, timed, why = estimate(registry, plans, costs, threads, jobs)
        if why is not None and why.startswith(FAILED_STEPS) and dry_run:  # a pre-flight check: a run that would
            # fail is its error, not exit 0
            raise PLLZooError(f"dry run: {why}; the bench would fail that run")
        if why is not None:
            click.echo(f"estimate: none, {why}", err=True)
        elif timed:
            click.echo(cost_lib.estimate_line(costs, seconds, timed, jobs), err=True)
            total = cost_lib.bench_seconds(list(seconds.values()), jobs)
    else:
        click.echo(f"estimate: from the first epochs, in the progress (no timing here {untimed})", err=True)
    warning = cost_lib.cost_warning(costs, total)
    if warning is not None:
        click.echo(warning, err=True)
    return seconds, total


def show_plan(registry: Registry, plans: list[RunPlan], out: Path, overwrite: bool = False, jobs: int = 1,
              threads: int | None = None, time: bool = True, dry_run: bool = False, resume: bool = False,
              ) -> tuple[list[cost_lib.RunCost], dict[str, float]]:
    """Print the plan, the estimate (when ``time``) and the cost warning; with ``dry_run`` the configs too.

    ``time=False`` under ``--jobs N`` (each run's code runs in its own process, never in this one: a run
    that kills its process must not take the bench with it) and under torchrun: the progress gives the
    ETA from the first epochs instead.

    :returns: the runs' costs and their estimated seconds (run id → seconds; empty without an estimate),
        for the progress display (:mod:`pllzoo.progress`).
    """
    costs = cost_lib.run_costs(registry, plans, out, overwrite=overwrite, resume=resume)
    for line in cost_lib.plan_lines(costs, jobs):
        click.echo(line, err=True)
    seconds, total = show_estimate(registry, plans, costs, threads, jobs, time, "with --jobs or torchrun", dry_run)
    tip = cost_lib.graphs_tip(costs, all(p.train.compile != "none" for p in plans), total)
    if tip is not None:
        click.echo(tip, err=True)
    if dry_run:
        click.echo(cost_lib.dry_run_json(plans, out))
        click.echo("dry run: nothing trained or written", err=True)
    return costs, seconds
