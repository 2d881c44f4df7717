"""``pllzoo bench``: methods × seeds on one dataset, one table.

A clean stop (``--time-limit``, SIGINT/SIGTERM; :mod:`pllzoo.checkpoint`) prints one line
ending in the command that continues it (the same arguments plus ``--resume``) and exits
75 at the time limit, 128 + the signal number after a signal.  Failed runs do not stop the
bench (:mod:`pllzoo.bench`): the table marks them, and after it one ``Error:`` line names
them and the exit status is 1.

Bad input is refused before anything is written, with one ``Error:`` line: an ``--out`` that is a
file, lies under a file or is not writable (:func:`check_out`), and everything
:func:`pllzoo.bench.plan` checks (names, values, seeds, devices, data).  A repeated seed or method
runs once, with one ``Warning:`` line.  A write that fails later (a full or read-only file system)
is one ``Error:`` line too, leaving no half-written ``*.tmp`` file; finished runs stay for ``--resume``.
"""

from __future__ import annotations

import errno
import os
import shlex
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

import click

from pllzoo import atomic, configfile, replay  # click callbacks of --config/--from-run; neither loads torch
from pllzoo.atomic import write_atomic
from pllzoo.cli import cli, complete, warn_failed_plugins
from pllzoo.cli.listing import show_report
from pllzoo.cli.options import FINITE, PositiveFinite, UserPath, run_options
from pllzoo.errors import PLLZooError
from pllzoo.hparams import parse_value


def get_registry():
    """:func:`pllzoo.registry.get_registry`, imported when the bench runs: ``--help`` loads no torch."""
    from pllzoo.registry import get_registry as registry

    return registry()


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _seeds(text: str) -> list[int]:
    """``--seeds``: whole numbers in ASCII digits, comma-separated (``int`` alone also takes ``1_0`` and other
    scripts' digits, which would be recorded as a seed the command line does not show)."""
    try:
        return [parse_value(s, int, 0) for s in _csv(text)]
    except ValueError:
        raise PLLZooError(f"bad --seeds {text!r}; write e.g. 1,2,3") from None


class _KeepsArgs(click.Command):
    """Keeps the raw arguments in ``ctx.meta`` so a stopped bench can print the command that continues it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["pllzoo.bench.args"] = list(args)
        return super().parse_args(ctx, args)


def started_as() -> list[str]:
    """How pllzoo was started, for a command line that continues it: ``python -m pllzoo`` where there may be no
    ``pllzoo`` script on PATH (an outside review), else ``pllzoo``."""
    started = Path(sys.argv[0]) if sys.argv else Path()
    return [Path(sys.executable).name, "-m", "pllzoo"] if started.parts[-2:] == ("pllzoo", "__main__.py") \
        else ["pllzoo"]


def _continue_command(ctx: click.Context, resume: bool = True) -> str:
    """The command that continues this bench: its own arguments plus ``--resume``; under torchrun the same
    number of processes (``torchrun [--nnodes N] --nproc-per-node G``; another launcher takes the same arguments)."""
    from pllzoo import distributed

    args = ctx.meta.get("pllzoo.bench.args", [])
    dist = distributed.current()
    head = started_as()
    if dist.active:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", dist.world))
        nodes = ["--nnodes", str(dist.world // local)] if local < dist.world else []
        head = ["torchrun", *nodes, "--nproc-per-node", str(local), "-m", "pllzoo"]
    command = shlex.join([*head, "bench", *args, *([] if "--resume" in args or not resume else ["--resume"])])
    stdin = ctx.meta.get(configfile.META_STDIN)
    if stdin is not None:  # `--config -`: the same TOML again on standard input, in one runnable line
        escaped = stdin.replace("\\", "\\\\").replace("%", "%%").replace("\n", "\\n")
        command = f"printf {shlex.quote(escaped)} | {command}"
    return command



class _Folder(UserPath):
    """A folder path that is not empty: ``--out ""`` would write into the current folder (give ``.`` for it)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("is empty; give a folder (. for the current one)", param, ctx)
        return super().convert(value, param, ctx)


_OUT = _Folder()

@cli.command(cls=_KeepsArgs)
@click.option("--methods", required=True, shell_complete=complete.methods,
              help="Comma-separated method strings, e.g. proden,cc or proden+selection=X.")
@click.option("--dataset", default="synthetic-lt", show_default=True, shell_complete=complete.datasets,
              help="Dataset name (pllzoo datasets) or .mat path.")
@click.option("--seeds", default="1", show_default=True, help="Comma-separated seeds (data and training), 0 to 2**32-1; a repeat runs once.")
@run_options
@click.option("--holdout", type=FINITE, default=0.0, show_default=True,
              help="Hold out this fraction of training rows (partial labels only) for `report --select heldout`.")
@click.option("--subset", type=int, default=None, help="Keep N random train and N test rows (smoke runs, not results).")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda[:i].")
@click.option("--view-workers", type=click.IntRange(min=0), default=None,
              help="Processes computing the strong view ahead of the loop (default: 0 on CPU, up to 8 on CUDA). "
                   "0 keeps it in the loop; > 0 is another random stream, the same for any count.")
@click.option("--hp", "hps", multiple=True, help="Override: slot.field=value, train.field=value, or METHOD:slot.field=value.")
@click.option("--out", type=_OUT, default=Path("results/bench"), show_default=True)
@click.option("--resume/--no-resume", default=False,  # --no-X: undo a config file's X = true
              help="Reuse finished runs in OUT and resume unfinished ones from checkpoints.")
@click.option("--overwrite/--no-overwrite", default=False,
              help="Retrain finished runs in OUT (without it they are reused, with a note); the old run is "
                   "replaced only once the new one finished.")
@click.option("--offline/--no-offline", default=False, help="Never download data.")
@click.option("--check/--no-check", default=False,
              help="Check the components' outputs at every step, not only the first of each epoch (same results; "
                   "on a GPU it reads device values every step).")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Train up to N runs at once, one process each, on the same device. Pays on a GPU that one run "
                   "leaves idle (small models or batches, e.g. ResNet-18 on 32x32 images); memory grows N-fold.")
@click.option("--threads", type=click.IntRange(min=1, max=1024), default=None,  # (100000 ran OpenMP out of memory)
              help="Torch CPU threads per run (default: the CPUs this process may use, by affinity and cgroup quota, "
                   "capped at torch's own default, divided by --jobs; at least 1). CPU numbers can differ in the "
                   "last bits between counts; env.json records it.")
@click.option("--time-limit", type=PositiveFinite(), default=None, metavar="MINUTES",
              help="Stop the whole bench at an epoch boundary, with a checkpoint, before MINUTES; exit status 75. "
                   "Finished runs are kept; the same command with --resume continues.")
@click.option("--config", "config", type=UserPath(dir_okay=False), default=None, is_eager=True,
              expose_value=False, callback=configfile.use_config,
              help="Options from a TOML/YAML file, or - for TOML on standard input (keys: the long option names, hp: a "
                   "table or key=value list); "
                   "options given on the command line win (docs/config-example.toml).")
@click.option("--from-run", "from_run", type=UserPath(), default=None, is_eager=True,
              expose_value=False, callback=replay.use_run, metavar="RUN_DIR",
              help="Replay OUT/runs/<run-id> exactly from its config.json (from OUT/runs.jsonl.xz when the folder "
                   "is gone); beside it only options that change no "
                   "number (--out, --resume, ...) and --data-dir, --offline, --device.")
@click.option("--shard", default=None, metavar="I/N", callback=lambda ctx, param, v: _shard(v),
              help="Run only the I-th of N disjoint parts of the method x seed grid (1 <= I <= N), into the same "
                   "--out layout: N shards (a SLURM array, one process per GPU) cover the grid; report merges.")
@click.option("--observe", multiple=True, envvar="PLLZOO_OBSERVE", metavar="NAME[=ARG]",
              help="Send each run's start, epoch records and end to the observer NAME that a plugin registered "
                   "(pllzoo plugins lists them), e.g. an experiment tracker; repeatable (default: PLLZOO_OBSERVE, "
                   "space-separated). An observer that fails is one warning and is disabled for that run.")
@click.option("--tensorboard", type=_Folder(), default=None, metavar="DIR",
              help="Write every epoch's scalars (loss, lr, accuracies, method logs) to DIR/<run-id>/ for TensorBoard; "
                   "short for --observe pllzoo.tensorboard=DIR. Needs: pip install 'pllzoo[tensorboard]'.")
@click.option("--dry-run/--no-dry-run", default=False,
              help="Print the plan (runs, model, stages and epochs, device, estimated duration) and each run's "
                   "resolved config as JSON (what its config.json would hold); train and write nothing, exit 0.")
@click.pass_context
def bench(ctx, methods, dataset, seeds, epochs, batch_size, data_dir, split, phi, imb, imb_type, holdout, subset,
          device, view_workers, hps, out, resume, overwrite, offline, check, jobs, threads, time_limit, shard,
          observe, tensorboard, dry_run) -> None:
    """Run METHODS head-to-head on DATASET over SEEDS and print All/Many/Medium/Few.

    Under ``torchrun --nproc-per-node G -m pllzoo bench ...`` each run trains data-parallel on G processes
    (docs/distributed.md); rank 0 writes everything and prints the progress and the table; every process prints
    its own stop and Error: lines.

    Before training it prints the plan and an estimated duration from a timing of the first steps, and
    warns when the plan looks too long (pllzoo.costs); --dry-run stops there.
    """
    from pllzoo import distributed

    dist = distributed.init_from_env(device)
    status = 0
    try:
        _bench(ctx, dist, methods, dataset, seeds, epochs, batch_size, data_dir, split, phi, imb, imb_type, holdout,
               subset, device, view_workers, hps, out, resume, overwrite, offline, check, jobs, threads, time_limit,
               shard, observe, tensorboard, dry_run)
    except (PLLZooError, click.ClickException) as exc:
        if not dist.active:
            raise
        # torchrun stops the other processes (SIGTERM) as soon as one exits non-zero: each says its line before
        # the closing barrier, not after it, or the first to leave would cut the others' short
        status = _say_error(exc)
        alone = isinstance(exc, distributed.FailedAlone)
        distributed.shutdown(wait=not alone)  # after a run failed on some ranks only the others may wait in a
    finally:  # collective: no barrier.  Every other way out (a table, failed runs, a stop) is reached by all ranks
        if dist.active and status == 0:
            distributed.shutdown(wait=not isinstance(sys.exc_info()[1], distributed.FailedAlone))
    if status:
        ctx.exit(status)


def _say_error(exc: PLLZooError | click.ClickException) -> int:
    """``Error: <line>`` to stderr, as the command group says it; its exit status (2 for a name or usage error)."""
    from pllzoo.cli import _debug_traceback
    from pllzoo.errors import UsageError

    _debug_traceback(exc)
    text = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
    click.echo(f"Error: {text}", err=True)
    return 2 if isinstance(exc, (UsageError, click.UsageError)) else getattr(exc, "exit_code", 1) or 1


def _bench(ctx, dist, methods, dataset, seeds, epochs, batch_size, data_dir, split, phi, imb, imb_type, holdout,
           subset, device, view_workers, hps, out, resume, overwrite, offline, check, jobs, threads, time_limit,
           shard, observe=(), tensorboard=None, dry_run=False) -> None:
    from pllzoo import bench as bench_lib
    from pllzoo import checkpoint

    import pllzoo.cli

    # --time-limit counts from the command's start (the process's: its imports, loading and planning count)
    started = checkpoint.clock() - max(0.0, time.monotonic() - pllzoo.cli.command_started)

    if not dist.is_main:  # torchrun: rank 0 reports warnings (the data's, reused runs, ...) once
        warnings.simplefilter("ignore")
    try:
        reg, plans, observers, part = _plans(ctx, dist, methods, dataset, seeds, epochs, batch_size, data_dir, split,
                                             phi, imb, imb_type, holdout, subset, device, view_workers, hps, out,
                                             resume, overwrite, offline, check, jobs, shard, observe, tensorboard,
                                             dry_run)
    except Exception as exc:  # torchrun: a process refused alone would leave the others waiting in the plans'
        bench_lib.agree_on_plans(None, failed=exc)  # comparison (a 300 s timeout, then gloo's traceback)
        raise
    bench_lib.agree_on_plans(plans)  # torchrun: every process planned rank 0's runs, or one line on each
    _run_plans(ctx, dist, reg, plans, observers, part, out, resume, overwrite, jobs, threads, time_limit, dry_run,
               started)


def _plans(ctx, dist, methods, dataset, seeds, epochs, batch_size, data_dir, split, phi, imb, imb_type, holdout,
           subset, device, view_workers, hps, out, resume, overwrite, offline, check, jobs, shard, observe, tensorboard,
           dry_run):
    """(registry, plans, observers, shard) of the bench's arguments, checked; nothing trained or written."""
    from pllzoo import bench as bench_lib
    from pllzoo.data.base import DataOptions
    from pllzoo.planning import check_batches

    reg = get_registry()
    if dist.active and jobs > 1:  # before rank 0 and the others part ways
        raise PLLZooError(f"--jobs {jobs} under torchrun: the {dist.world} processes train one run at a time")
    warn_failed_plugins(reg)  # one line each, to stderr: a method may be missing because of it
    check_out(Path(out), write=not dry_run)
    from pllzoo.observers import TENSORBOARD, choose

    src = click.core.ParameterSource
    if ctx.get_parameter_source("observe") == src.ENVIRONMENT and "observe" in (ctx.default_map or {}):
        # a config file's observe over PLLZOO_OBSERVE, a shell-wide default (click ranks an environment variable
        # above a default_map: an outside review saw a study's tracker dropped without a word)
        file_observe = ctx.default_map["observe"]
        observe = tuple([file_observe] if isinstance(file_observe, str) else file_observe)
    tb_from, observe_from = ctx.get_parameter_source("tensorboard"), ctx.get_parameter_source("observe")
    if tensorboard is not None and (tb_from == src.COMMANDLINE and observe_from != src.COMMANDLINE or
                                    tb_from == src.DEFAULT_MAP and observe_from == src.ENVIRONMENT):
        # the command line wins over PLLZOO_OBSERVE's, and a config file's tensorboard over it too (a second review)
        observe = [t for t in observe if t.strip().partition("=")[0].strip() != TENSORBOARD]  # or a file's choice
    observers = choose(reg, observe, tensorboard)  # names and arguments checked before anything is written
    if resume and overwrite:
        raise PLLZooError("--overwrite and --resume exclude each other; --overwrite retrains finished runs, "
                          "--resume keeps them")
    options = DataOptions(data_dir=data_dir, split=split, phi=phi, imb=imb, imb_type=imb_type, download=not offline,
                          holdout=holdout, subset=subset)
    part = shard
    plans = bench_lib.plan(
        reg, _csv(methods), dataset, _seeds(seeds), options, epochs=epochs, batch_size=batch_size,
        hp=configfile.overrides(ctx, hps), device=device, view_workers=view_workers, check=check, shard=part,
    )
    replay.check(ctx, plans)  # --from-run: the recorded config, or one line
    check_batches(plans, reg)
    if dist.active:  # a component not ready for DDP: the bench is refused before any run, not each run failed
        from pllzoo import archive
        from pllzoo.ddp import NOT_READY_ADVICE, not_ready

        done = set() if overwrite else {n for n, r in archive.read(Path(out)).items() if r.done} | \
            {d.parent.name for d in Path(out).glob("runs/*/done")}  # finished runs are reused, not trained
        unready = {p.method.name: not_ready(reg.build_components(p.method, p.component_overrides,
                                                                 (p.data.name, p.data.kind)))
                   for p in plans if p.run_id not in done}
        told = "; ".join(f"{m}: {why}" for m, why in unready.items() if why)
        if told:
            raise PLLZooError(f"not ready for {dist.world} processes (DDP): {told}; {NOT_READY_ADVICE}")
    return reg, plans, observers, part


def _run_plans(ctx, dist, reg, plans, observers, part, out, resume, overwrite, jobs, threads, time_limit,
               dry_run, started=None) -> None:
    """Train ``plans`` (every process under torchrun) and print the table (rank 0)."""
    from rich.console import Console

    from pllzoo import bench as bench_lib
    from pllzoo import checkpoint, distributed
    from pllzoo import report as rep
    from pllzoo.cli.bench_plan import show_plan
    from pllzoo.jobs import RunsFailed
    from pllzoo.progress import BenchProgress, live_on
    from pllzoo.results import load
    from pllzoo.runfolders import ResultsBusy

    if dist.active and any(p.train.sync_bn and not p.config["device"].startswith("cuda") for p in plans):
        raise PLLZooError("train.sync_bn=true needs CUDA (torch's SyncBatchNorm works on GPU modules only); on "
                          "the CPU each process normalises its own rows: leave it out")
    for p in plans:  # each run's process makes its observers (pllzoo.observers); not part of the run id
        p.observers = observers
    if part is not None and dist.is_main:
        click.echo(f"shard {part[0]}/{part[1]}: {len(plans)} run(s) of the grid", err=True)
    if not plans:  # more shards than runs (a large array job): nothing to do is not an error
        return
    if not overwrite:  # runs of OUT trained with(out) --offline: their ids, before the plan and progress use them
        bench_lib.take_fetch_twins(plans, Path(out))
    if not dist.is_main:  # torchrun: train rank 0's runs with it, write and print nothing
        if dry_run:
            return
        try:
            bench_lib.follow(reg, plans, time_limit, started)
        except checkpoint.Stopped as exc:  # the collective stop: its line and exit status here too
            _stop(ctx, exc, Path(out))
        return
    err = Console(stderr=True)
    costs, estimates = show_plan(reg, plans, Path(out), overwrite=overwrite, jobs=jobs, threads=threads,
                                 time=not dist.active and jobs == 1, dry_run=dry_run, resume=resume)
    if dry_run:
        return
    stopped: BaseException | None = None
    failure: RunsFailed | distributed.FailedAlone | None = None
    with BenchProgress(costs, estimates, jobs, live=live_on(err), console=err) as progress:
        try:
            rows = bench_lib.execute(reg, plans, out, resume=resume, on_epoch=progress.on_epoch,
                                     on_run=progress.on_run, jobs=jobs, threads=threads, time_limit=time_limit,
                                     started=started, overwrite=overwrite)
        except (RunsFailed, distributed.FailedAlone) as exc:  # the others finished (a lone failure under torchrun:
            failure, rows = exc, exc.rows  # those before it): their table, then one line naming the failed runs
        except (checkpoint.Stopped, KeyboardInterrupt) as exc:
            stopped = exc
        except OSError as exc:  # a full or read-only file system, a folder removed under us
            raise _write_error(exc, Path(out)) from None
    if stopped is not None and not Path(out).is_dir():  # stopped before anything was written
        _stop(ctx, stopped, Path(out))
    if stopped is not None:  # the summary of the finished runs is still rebuilt; no table is printed
        import pandas as pd

        try:
            rows = pd.read_csv(Path(out) / "results.csv")
        except (OSError, ValueError):
            rows = pd.DataFrame(columns=["seed", "epoch", "status"])
    try:
        # every finished run under --out, as results.csv (bench._write_rows); a stopped bench waits briefly only,
        # as the bench holding the lock rebuilds the summary with this one's runs too (a review: a Ctrl-C during
        # the wait for results.csv began a second wait of two minutes, ending in exit 1, not 130)
        with bench_lib.results_lock(Path(out), wait_s=120.0 if stopped is None else 5.0):
            failed_configs = [p.config for p, _ in failure.failed] if failure is not None else []
            labels: list[str] = []  # the failed runs' settings, told apart as the finished runs' are
            records = load(out, beside=failed_configs, beside_labels=labels)
            order = list(dict.fromkeys([m for p in plans for m in (p.methods or (p.method.name,))]
                                       + list(records["method"])))  # --methods' order, whichever --shard this is
            summary = rep.summary(records, "last", order)
            if failure is not None:
                failed = [(label, p.method.name, p.config["data"]["train_counts"])
                          for label, (p, _) in zip(labels, failure.failed)]
                summary = rep.with_failures(summary, failed, order)
            ok = rows[rows["status"] == "ok"]
            epochs = set(ok["epoch"].dropna().astype(int))  # one count, or runs of other lengths: no count
            note = f": {epochs.pop()} epochs" if len(epochs) == 1 else ""  # seeds: each row's n (runs of other
            # benches under --out may have more)
            tables = rep.long_reports(summary, "last", note)
            write_atomic(Path(out) / "summary.csv", rep.to_csv(summary, "last"))
            write_atomic(Path(out) / "summary.md", "\n".join(rep.to_markdown(t) for t in tables))
    except OSError as exc:
        raise _write_error(exc, Path(out)) from None
    except ResultsBusy:
        if stopped is None:
            raise
    if stopped is not None:
        _stop(ctx, stopped, Path(out))
    try:
        for t in tables:
            show_report(t)
        click.echo(f"results: {Path(out) / 'results.csv'}")
    except OSError as exc:  # standard output closed or full: the runs are done all the same (a review: the line
        if exc.errno == errno.EPIPE:  # did not say so)
            raise
        raise PLLZooError(f"cannot print the table ({exc.strerror or exc}); the runs are done: "
                          f"{Path(out) / 'results.csv'} and summary.md hold them") from None
    if failure is not None:
        raise failure


def _shard(text: str | None) -> tuple[int, int] | None:
    """``--shard``'s value as ``(i, n)``; a bad one is a usage error (exit 2), one line."""
    from pllzoo.planning import parse_shard

    try:
        return parse_shard(text) if text is not None else None
    except PLLZooError as exc:
        raise click.BadParameter(str(exc)) from None


def check_out(out: Path, write: bool = True) -> None:
    """Refuse, before anything is written, an ``--out`` that is a file, lies under a file, or (``write``; a
    ``--dry-run`` writes nothing and only reads the runs already there) cannot be written.

    :raises PLLZooError: one line naming the problem.
    """
    if out.exists() and not out.is_dir():
        raise PLLZooError(f"--out {out} is a file; pass a folder (it is created if missing)")
    existing = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise PLLZooError(f"--out {out}: {existing} is a file, not a folder")
    runs = out / "runs"
    if runs.exists() and not runs.is_dir():
        raise PLLZooError(f"--out {out}: {runs} is a file, where the run folders go; move it or pick another --out")
    if not write:
        return
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PLLZooError(f"--out {out}: {existing} is not writable (read-only file system or no permission)")
    try:  # os.access says yes to root, also where nothing can be made (/proc, a read-only mount): try it
        os.rmdir(tempfile.mkdtemp(prefix=".pllzoo-probe-", dir=existing))
    except OSError as exc:
        raise PLLZooError(f"--out {out}: nothing can be created in {existing} ({exc.strerror or exc})") from None


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a link loop
        return True


def _write_error(exc: OSError, out: Path) -> PLLZooError:
    """One line for a write that failed under ``out`` (:func:`pllzoo.atomic.write_atomic` left nothing
    half-written)."""
    target = exc.filename2 or exc.filename  # os.replace(tmp, target) names both: the target is what failed
    if target and str(target).endswith(".tmp") and not Path(target).is_dir():
        target = atomic.target(str(target))  # the file that the temporary one was to become
    if isinstance(exc, IsADirectoryError) and target and Path(target).is_dir():
        return PLLZooError(f"cannot write the results under --out {out}: {target} is a folder, not pllzoo's "
                           "file; move it away, then rerun with --resume (finished runs are kept)")
    if isinstance(exc, NotADirectoryError) and target:  # a file where pllzoo keeps a folder (e.g. runs/<id>)
        blocker = next((p for p in Path(target).parents if p.is_file()), None)
        if blocker is not None:  # an outside review: the line advised freeing space
            return PLLZooError(f"cannot write the results under --out {out}: {blocker} is a file, where pllzoo keeps "
                               "a folder; move it away, then rerun with --resume (finished runs are kept)")
    where = f" ({target})" if target else ""
    why = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno is None or (target and not _inside(Path(target), out)):  # not the results' write: no advice
        # about --out (a review: a long TMPDIR's "AF_UNIX path too long", the forkserver's socket, was blamed on it)
        hint = ("; set a shorter TMPDIR (--jobs and --view-workers start their processes through a socket there)"
                if "AF_UNIX path too long" in why else "")
        return PLLZooError(f"{why}{where}{hint}; finished runs are kept, rerun with --resume")
    return PLLZooError(f"cannot write the results under --out {out}: {why}{where}; "
                       f"finished runs are kept, free space or pick another --out, then rerun with --resume")


def _stop(ctx: click.Context, exc: BaseException, out: Path) -> None:
    """One line and the exit status of a stopped bench (summary.* hold the finished runs, as results.csv)."""
    from pllzoo import checkpoint, interrupts

    interrupts.ignore_from_now()  # the stop is taken: a repeat signal from here on would only break the exit
    if isinstance(exc, checkpoint.Stopped):
        message, code = str(exc), exc.exit_code
    elif isinstance(exc, checkpoint.Abandoned):  # a second SIGINT/SIGTERM abandoned the epoch
        message, code = f"abandoned by a second {exc}; each unfinished run continues from its last checkpoint", \
            exc.exit_code
    else:  # Ctrl-C (another stop signal: interrupts.Interrupted) outside a clean-stop window
        signum = interrupts.signum_of(exc)
        name = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        message, code = f"interrupted{name}; each unfinished run continues from its last checkpoint", 128 + signum
    if ctx.params.get("overwrite") and not isinstance(exc, checkpoint.Skipped):  # (--resume excludes it, from the
        # command line or a config file; runs another bench holds: no advice on room for whole runs)
        click.echo(f"{message}; an --overwrite starts each run it retrains over (the earlier finished run stays "
                   f"until the new one finishes): rerun it with room for whole runs: "
                   f"{_continue_command(ctx, resume=False)}", err=True)
    else:
        click.echo(f"{message}; continue with: {_continue_command(ctx)}", err=True)
    ctx.exit(code)
