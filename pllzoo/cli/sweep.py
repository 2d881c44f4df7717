"""``pllzoo sweep``: random hyper-parameter search over a space, each trial a bench, one winner per method and seed.

Bad input (a malformed ``--space``, a value of the space outside its field's declared range, anything
``pllzoo bench`` refuses) is one ``Error:`` line before anything trains.  A failed run leaves its trial out
of the selection, and the command ends with one ``Error:`` line naming the failed trials (exit 1).
Re-running the same command continues the sweep (:mod:`pllzoo.sweep`).  Heavy modules (torch, pandas)
are imported inside the command, so ``pllzoo --help`` stays light.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from pllzoo.atomic import write_atomic
from pllzoo.cli import cli, complete, warn_failed_plugins
from pllzoo.cli.bench import _csv, _KeepsArgs, _seeds, started_as
from pllzoo.cli.options import FINITE, INPUT_FILE, UserPath, run_options
from pllzoo.errors import PLLZooError
from pllzoo.model_selection import RULES


MAX_TRIALS = 1000
"""Every trial is planned before any trains (about 1.6 MB each, 60 s for 1000 on CPU): a typo such as 100000000
filled the machine's memory."""


@cli.command(cls=_KeepsArgs)
@click.option("--methods", required=True, shell_complete=complete.methods,
              help="Comma-separated method strings (each selected on its own).")
@click.option("--dataset", default="synthetic-lt", show_default=True, shell_complete=complete.datasets,
              help="Dataset name (pllzoo datasets) or .mat path.")
@click.option("--seeds", default="1", show_default=True, help="Comma-separated seeds; a winner is chosen per seed.")
@click.option("--space", "specs", multiple=True, metavar="KEY=DIST(ARGS)",
              help="A searched hyper-parameter, e.g. 'train.lr=loguniform(1e-3,1e-1)', 'loss.eta=uniform(0.5,1)', "
                   "'train.batch_size=choice(64,128,256)', 'train.epochs=randint(1,3)' (1, 2 or 3: both ends included). Repeat for more.")
@click.option("--space-file", type=INPUT_FILE, default=None,
              help="More --space specs, one per line (# comments).")
@click.option("--trials", type=click.IntRange(1, MAX_TRIALS), default=8, show_default=True,
              help=f"Number of trials drawn from the space (at most {MAX_TRIALS}: each is planned, with its data, "
                   "before any trains; a larger search is several sweeps with other --draw-seed).")
@click.option("--draw-seed", type=int, default=0, show_default=True,
              help="Seed of the draws: the same seed gives the same trials.")
@click.option("--select", "rule", type=click.Choice(RULES), default="approx", show_default=True,
              help="Model selection of each run's epoch and of the trials (oracle: by test accuracy, labelled).")
@click.option("--holdout", type=FINITE, default=0.1, show_default=True,
              help="Fraction of training rows held out, partial labels only, scoring approx/heldout/last (PLENCH: 0.1).")
@run_options
@click.option("--subset", type=int, default=None, help="Keep N random train and N test rows (smoke runs, not results).")
@click.option("--hp", "hps", multiple=True, help="A fixed override for every trial, as in pllzoo bench.")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda[:i].")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Runs at once (pllzoo bench).")
@click.option("--threads", type=click.IntRange(min=1, max=1024), default=None,
              help="Torch CPU threads per run, as pllzoo bench's --threads (default: the CPUs this process may use, "
                   "divided by --jobs).")
@click.option("--offline", is_flag=True, help="Never download data.")
@click.option("--out", type=UserPath(), default=Path("results/sweep"), show_default=True)
@click.option("--dry-run", is_flag=True, help="Print the plan and the estimate, then stop: nothing trained or written.")
def sweep(methods, dataset, seeds, specs, space_file, trials, draw_seed, rule, holdout, epochs, batch_size,
          data_dir, split, phi, imb, imb_type, subset, hps, device, jobs, threads, offline, out, dry_run) -> None:
    """Draw TRIALS hyper-parameter settings from --space, train each as a bench under OUT/trials/<k>/, and
    pick the best trial per method and seed by --select; prints the trials table and the winners.

    Before training it prints the plan (every trial), an estimated duration from a timing of the first steps
    and a warning when the plan looks too long, as pllzoo bench does; then the progress of every run."""
    import dataclasses
    from types import SimpleNamespace

    from rich.console import Console

    from pllzoo import checkpoint
    from pllzoo import sweep as sw
    from pllzoo.bench import parse_overrides
    from pllzoo.cli.bench import check_out
    from pllzoo.cli.bench_plan import show_estimate
    from pllzoo.progress import BenchProgress, live_on
    from pllzoo.data.base import DataOptions
    from pllzoo.registry import get_registry
    from pllzoo.cli.listing import show_report
    from pllzoo.report import fmt, to_markdown
    from pllzoo.search_space import parse_space, read_space_file
    from pllzoo.trial_selection import score_trials, trials_report, winners

    import os

    world = os.environ.get("WORLD_SIZE", "1")
    if world.isdigit() and int(world) > 1:  # each process would run the whole sweep into one --out (a review)
        raise PLLZooError(f"pllzoo sweep runs in one process; under torchrun (WORLD_SIZE={world}) each process would "
                          "run every trial: run it without torchrun (--jobs N trains several runs at once)")
    if rule != "oracle" and not holdout:
        raise PLLZooError(f"--select {rule} scores held-out rows; give --holdout > 0 (e.g. 0.1) or --select oracle")
    space = parse_space([*specs, *(read_space_file(space_file) if space_file else [])])
    seed_list = _seeds(seeds)
    reg = get_registry()
    warn_failed_plugins(reg)
    check_out(Path(out), write=not dry_run)
    options = DataOptions(data_dir=data_dir, split=split, phi=phi, imb=imb, imb_type=imb_type,
                          download=not offline, holdout=holdout, subset=subset)
    fixed = parse_overrides(hps)
    planned = sw.plan_sweep(reg, _csv(methods), dataset, seed_list, options, space, trials, draw_seed, fixed,
                            epochs, batch_size, device)
    ident = sw.identity(_csv(methods), dataset, seed_list, options, space, draw_seed, fixed, epochs, batch_size)
    if dry_run:
        sw.check_claim(Path(out), ident)
    else:
        sw.claim(Path(out), ident, planned)
    # the cost guard of pllzoo bench over every trial (pllzoo.cli.bench_plan): the plan, the estimate, the warning
    per_trial = sw.trial_costs(reg, planned, Path(out))
    for line in sw.plan_lines(planned, per_trial, jobs):
        click.echo(line, err=True)
    flat_plans, flat = [p for t in planned for p in t.plans], [c for cs in per_trial for c in cs]
    seconds, _ = show_estimate(reg, flat_plans, flat, threads, jobs, jobs == 1, "with --jobs", dry_run)
    if dry_run:
        click.echo("dry run: nothing trained or written", err=True)
        return
    # the progress names each run by its trial; a run id is keyed by its trial too (two trials may draw alike)
    shown = [dataclasses.replace(c, method=f"trial {t.index} {c.method}", run_id=f"{t.index}:{c.run_id}")
             for t, cs in zip(planned, per_trial) for c in cs]
    estimates = {f"{t.index}:{c.run_id}": seconds[c.run_id] for t, cs in zip(planned, per_trial) for c in cs
                 if c.run_id in seconds}
    err = Console(stderr=True)
    try:
        with BenchProgress(shown, estimates, jobs, live=live_on(err), console=err) as progress:
            failed = sw.run_sweep(
                reg, planned, Path(out), jobs=jobs, threads=threads,
                on_run=lambda t, p, status: progress.on_run(SimpleNamespace(run_id=f"{t.index}:{p.run_id}"), status),
                on_epoch=lambda t, p, rec: progress.on_epoch(SimpleNamespace(run_id=f"{t.index}:{p.run_id}"), rec))
    except (checkpoint.Stopped, KeyboardInterrupt) as exc:  # finished runs stay; each trial resumes its runs
        code = getattr(exc, "exit_code", 130)  # Stopped, Abandoned (a second signal): 128 + its number
        what = (str(exc) if isinstance(exc, checkpoint.Stopped) else
                f"abandoned by a second {exc}" if isinstance(exc, checkpoint.Abandoned) else "interrupted")
        args = shlex.join([*started_as(), "sweep", *click.get_current_context().meta.get("pllzoo.bench.args", [])])
        click.echo(f"{what}; the sweep continues where it stopped with the same command: {args}", err=True)
        raise SystemExit(code) from None
    except OSError as exc:  # a trial folder that cannot be written (a file where its runs/ should be, a full disk)
        where = f" ({exc.filename})" if exc.filename else ""
        raise PLLZooError(f"cannot write the sweep under --out {out}: {exc.strerror or exc}{where}; finished runs "
                          "are kept, free the path or pick another --out, then rerun") from None
    records = sw.trial_records(Path(out), planned)
    if records.empty:
        raise PLLZooError(f"no trial finished; see {Path(out) / 'trials'}")
    scores = score_trials(records, rule)
    best = winners(scores)
    runs = {(t.index, p.run_id): t.label_of(p) for t in planned for p in t.plans}  # the overrides that reached
    table = trials_report(scores, best, rule, runs)  # each trial's run (two trials may share a run id)
    show_report(table)
    for r in best.itertuples():
        click.echo(f"{'ORACLE ' if rule == 'oracle' else ''}winner {r.method} seed {r.seed}: trial {r.trial} "
                   f"({runs[(r.trial, r.run)]}), score {r.score:.2f}, test accuracy {r.acc_all:.2f} (epoch {r.epoch})")
    for method, rows in best.groupby("method", sort=False):
        if len(rows) > 1:  # PLENCH reports the mean over trial seeds of each seed's winner
            click.echo(f"{method}: test accuracy of the winners, mean ± sample std over {len(rows)} seeds: "
                       f"{fmt(rows['acc_all'].mean(), rows['acc_all'].std(ddof=1))}")
    keys = list(zip(scores["trial"], scores["run"]))
    scores = scores.assign(overrides=[runs[k] for k in keys], winner=[k in set(zip(best["trial"], best["run"]))
                                                                      for k in keys])
    write_atomic(Path(out) / "sweep.csv", scores.to_csv(index=False, float_format="%.4f"))
    write_atomic(Path(out) / "sweep.md", to_markdown(table))
    click.echo(f"sweep: {Path(out) / 'sweep.csv'}")
    if failed:
        first = min(failed)
        raise PLLZooError(f"{len(failed)} trial(s) with failed runs left out of the selection: "
                          f"{', '.join(map(str, sorted(failed)))} (trial {first}, {failed[first]}); tracebacks in "
                          f"{Path(out) / 'trials'}/<k>/runs/<run-id>/error.txt; rerunning the sweep retries them")
