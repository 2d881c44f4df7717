"""Run observers: objects that see each run's start, every epoch's record and its end.

Plugins offer observer classes (:meth:`pllzoo.hookspecs.DiscoverySpec.pllzoo_register_observers`);
the user selects them per bench (``--observe NAME[=ARG]``, repeatable, default from the
``PLLZOO_OBSERVE`` environment variable; ``--tensorboard DIR`` for the built-in one).  Selected,
not merely installed: an installed tracking plugin must not start sending every bench (tests and CI
included) to a server nobody asked for, and most observers need an argument (a folder, a project).

The bench checks the selection before anything is written (:func:`choose`), each
:class:`~pllzoo.planning.RunPlan` carries it (``observers``; never part of the run id), and the
process that trains a run (the bench, a ``--jobs`` worker, rank 0 under torchrun) makes one
instance per selected observer and calls its hooks (:func:`observing`, :class:`RunObservers`).

Failure rule: an observer must never change a run.  An exception in its constructor or in one of
its hooks becomes one warning — ``observer 'NAME' failed in HOOK for run ID: Type: message; it is
disabled for the rest of this run`` — and the observer is dropped for that run: its later epoch hooks
are not called, but its ``pllzoo_observe_run_end`` still is, once, so that it can close what it opened
(a tracking client's active run: otherwise the next run's start fails too, an outside review), and
whatever that call raises is not reported again.  The run trains on, its files and the exit status are
unaffected.  Each call runs with the process-wide state it may change put back afterwards: torch's settings
(:func:`pllzoo.isolation.torch_globals_kept`; a float64 default dtype changed the saved losses), the warnings
filters (``simplefilter("error")`` turned pllzoo's own warnings into a traceback) and the working
directory (a relative ``--out`` moved).  ``PLLZOO_DEBUG=1`` adds the traceback.  ``KeyboardInterrupt`` is
not caught: one an observer raises, rather than Ctrl-C, fails the run.

This module imports neither torch nor any client library: the CLI imports it to check ``--observe``.
"""

from __future__ import annotations

import copy
import difflib
import inspect
import sys
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from contextlib import contextmanager
from typing import Any, ClassVar, Iterable, Iterator, Mapping

from pllzoo.errors import PLLZooError

#: the observer statuses a run can end with (:attr:`RunSummary.status`)
STATUSES: tuple[str, ...] = ("finished", "failed", "stopped")


class Observer:
    """Base class of run observers; subclasses implement observer hooks with ``@pllzoo.hookimpl``.

    ``cls(arg)`` is made once per run that selects it, in the process that trains the run; ``arg``
    is the text after ``=`` in ``--observe NAME=ARG`` (``None`` without one) and is kept as
    ``self.arg``.  Override :meth:`check` to refuse a bad ``arg`` before any run starts.
    ``name`` is set by the registry.
    """

    name: ClassVar[str] = ""

    def __init__(self, arg: str | None = None) -> None:
        self.arg = arg

    @classmethod
    def check(cls, arg: str | None) -> None:
        """Refuse ``--observe NAME=ARG`` before any run starts: raise :class:`pllzoo.PLLZooError` (one line).

        Called once per bench, in the bench process, before anything is written.  Default: any ``arg``.
        """

    def __repr__(self) -> str:
        return f"<observer {self.name or type(self).__qualname__!r}>"


@dataclass(frozen=True)
class RunInfo:
    """The run an observer sees (the same object for all its hooks of that run)."""

    run_id: str  # the run's folder name under OUT/runs/ (a hash of its configuration)
    method: str  # the method string, e.g. "proden" or "proden+selection=solar.smallloss"
    dataset: str  # the dataset's name
    seed: int  # the run's seed
    run_dir: Path  # the folder it trains into (a temporary one when --overwrite retrains a finished run)
    config: Mapping[str, Any]  # config.json: recipe, hyper-parameters, data, train config
    env: Mapping[str, Any]  # env.json: versions, device, plugins
    resumed: bool  # True when training continues from a checkpoint (--resume)


@dataclass(frozen=True)
class RunSummary:
    """How a run ended, for :meth:`pllzoo.hookspecs.ObserverSpec.pllzoo_observe_run_end`."""

    status: str  # "finished", "failed" or "stopped" (time limit, signal)
    records: tuple[dict[str, Any], ...]  # every epoch record so far, the checkpointed ones of a resumed run included
    error: str | None = None  # one line: why it failed or stopped; None when finished

    @property
    def final(self) -> dict[str, Any] | None:
        """The last epoch record, or ``None`` when no epoch finished."""
        return self.records[-1] if self.records else None


@dataclass(frozen=True)
class ObserverChoice:
    """One ``--observe NAME[=ARG]``: carried by each :class:`~pllzoo.planning.RunPlan` to the process that trains it."""

    name: str
    arg: str | None = None

    def __str__(self) -> str:
        return self.name if self.arg is None else f"{self.name}={self.arg}"


TENSORBOARD = "pllzoo.tensorboard"  # the built-in observer that --tensorboard DIR selects


def parse_choice(text: str) -> ObserverChoice:
    """``NAME`` or ``NAME=ARG`` (split at the first ``=``) as an :class:`ObserverChoice`."""
    name, eq, arg = text.strip().partition("=")
    if not name.strip():
        raise PLLZooError(f"bad --observe {text!r}; write NAME or NAME=ARG, e.g. --observe {TENSORBOARD}=runs/tb")
    return ObserverChoice(name.strip(), arg.strip() if eq else None)  # " x = y": the name and its argument alike


def choose(registry: Any, texts: Iterable[str], tensorboard: str | Path | None = None) -> tuple[ObserverChoice, ...]:
    """The bench's observers, checked before anything is written: each name is registered, each class's
    :meth:`Observer.check` accepts its argument, and no observer is selected twice.  ``tensorboard``
    (``--tensorboard DIR``) adds ``pllzoo.tensorboard=DIR`` (made absolute).

    :raises UnknownNameError: an unknown name (one line, listing the registered observers).
    :raises PLLZooError: a refused argument or a name given twice (one line).
    """
    choices = [parse_choice(t) for t in texts]
    if tensorboard is not None:
        choices.append(ObserverChoice(TENSORBOARD, str(Path(tensorboard).expanduser().absolute())))
    seen: set[str] = set()
    for c in choices:
        if c.name in seen:
            raise PLLZooError(f"observer {c.name!r} is selected twice (--observe, --tensorboard or PLLZOO_OBSERVE); "
                              "select it once")
        seen.add(c.name)
        cls = registry.observer_class(c.name)
        try:
            cls.check(c.arg)
        except PLLZooError:
            raise
        except (Exception, SystemExit) as exc:  # an outside observer's own bug: one line, naming it
            raise PLLZooError(f"observer {c.name!r} failed in {cls.__qualname__}.check({c.arg!r}): "
                              f"{_one_line(exc)}") from None
    return tuple(choices)


# ---------------------------------------------------------------------- registration check
def check_observer(cls: Any) -> None:
    """Raise ``PLLZooError`` (one line) unless ``cls`` is a valid observer class.

    Checked when a plugin registers it: an :class:`Observer` subclass whose ``@hookimpl`` methods all
    name observer hooks (a misspelled one would never be called) with arguments their spec has, and
    at least one of them.
    """
    from pllzoo import hookspecs

    if not (isinstance(cls, type) and issubclass(cls, Observer)):
        raise PLLZooError(f"{cls!r} is not a pllzoo.Observer subclass")
    spec_args = {n: tuple(list(inspect.signature(f).parameters)[1:])
                 for n, f in vars(hookspecs.ObserverSpec).items() if n.startswith("pllzoo_")}
    found = 0
    for attr in sorted(dir(cls)):
        fn = getattr(cls, attr, None)
        opts = getattr(fn, "pllzoo_impl", None)
        if not isinstance(opts, dict) or not callable(fn):
            continue
        hook = opts.get("specname") or attr
        if hook not in spec_args:
            near = difflib.get_close_matches(hook, spec_args, n=1)
            hint = f" (did you mean {near[0]}?)" if near else f"; observer hooks: {', '.join(spec_args)}"
            raise PLLZooError(f"{cls.__qualname__}.{attr}: {hook!r} is not an observer hook{hint}")
        params = [p for p in list(inspect.signature(fn).parameters.values())[1:] if p.default is p.empty]
        unknown = [p.name for p in params if p.name not in spec_args[hook]]
        if unknown:
            raise PLLZooError(f"{cls.__qualname__}.{attr}: argument(s) {', '.join(map(repr, unknown))} not in the "
                              f"spec {hook}({', '.join(spec_args[hook])})")
        found += 1
    if not found:
        raise PLLZooError(f"{cls.__qualname__} implements no observer hook ({', '.join(spec_args)}) with @hookimpl")


# ---------------------------------------------------------------------- calling them
def _one_line(exc: BaseException) -> str:
    from pllzoo.plugins import one_line

    if isinstance(exc, PLLZooError):
        return (str(exc).strip().splitlines() or [""])[0]
    return one_line(exc)


class RunObservers:
    """The selected observers of one run: one instance each, their hooks called one by one.

    A constructor or hook that raises is reported once (a warning) and its observer is dropped for
    the rest of the run (module docstring).
    """

    def __init__(self, registry: Any, choices: Iterable[ObserverChoice], run: RunInfo) -> None:
        import pluggy

        from pllzoo import hookspecs

        self.run = run
        self.records: list[dict[str, Any]] = []
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs.ObserverSpec)
        self.dropped: dict[str, Any] = {}  # name → the instance of an observer that failed (its run end is still due)
        for c in choices:
            cls = registry.observer_class(c.name)
            try:
                with _kept():
                    self.pm.register(cls(c.arg), name=c.name)
            except (Exception, SystemExit) as exc:  # sys.exit in an outside observer ends no run
                self._disable(c.name, f"{cls.__qualname__}({c.arg!r})", exc)

    @property
    def active(self) -> list[str]:
        """The names of the observers still enabled for this run."""
        return [name for name, _ in self.pm.list_name_plugin()]

    def _disable(self, name: str, where: str, exc: BaseException) -> None:
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.dropped[name] = plugin
            self.pm.unregister(name=name)
        warnings.warn(f"observer {name!r} failed in {where} for run {self.run.run_id}: {_one_line(exc)}; "
                      "it is disabled for the rest of this run", stacklevel=2)
        from pllzoo.plugins import debug_enabled

        if debug_enabled():
            traceback.print_exception(exc, file=sys.stderr)

    def call(self, hook: str, **kwargs: Any) -> None:
        """Call ``hook`` on every enabled observer that implements it (in selection order), with the
        arguments each asks for, each its own deep copy (an observer that edits the record it is given
        changes neither the run's ``log.jsonl`` nor what the next observer sees); a failure disables that
        observer only."""
        impls = {i.plugin_name: i for i in getattr(self.pm.hook, hook).get_hookimpls()}
        for name in self.active:
            impl = impls.get(name)
            if impl is None:
                continue
            try:
                with _kept():
                    impl.function(*[copy.deepcopy(kwargs[a]) for a in impl.argnames])
            except (Exception, SystemExit) as exc:
                self._disable(name, hook, exc)

    def seen(self, records: list[dict[str, Any]]) -> None:
        """A resumed run's checkpointed records (not replayed to the observers; :attr:`RunSummary.records`)."""
        self.records = list(records)

    def epoch(self, records: list[dict[str, Any]]) -> None:
        """The run's records after an epoch: the newest, ``records[-1]``, is observed at step ``len(records)``."""
        self.records = list(records)
        self.call("pllzoo_observe_epoch", run=self.run, record=records[-1], step=len(records))

    def end(self, status: str, error: str | None = None) -> None:
        summary = RunSummary(status, tuple(self.records), error)
        earlier = dict(self.dropped)  # failed before the run end: theirs is still due (not one failing in it)
        self.call("pllzoo_observe_run_end", run=self.run, summary=summary)
        given = {"run": self.run, "summary": summary}
        for name, plugin in earlier.items():  # a failed observer's chance to close what it opened (module doc)
            self.pm.register(plugin, name=name)  # pluggy's own view of its hook (argument names), for this call
            try:
                for impl in self.pm.hook.pllzoo_observe_run_end.get_hookimpls():
                    if impl.plugin_name == name:
                        with _kept():
                            impl.function(*[copy.deepcopy(given[a]) for a in impl.argnames])
            except (Exception, SystemExit):  # reported once already, when it failed
                pass
            finally:
                self.pm.unregister(name=name)
        self.dropped = {}


@contextmanager
def _kept() -> Iterator[None]:
    """Around one observer call: torch's settings, the warnings filters and the working directory as before."""
    import os

    from pllzoo.isolation import torch_globals_kept

    cwd = os.getcwd()
    try:
        with torch_globals_kept(), warnings.catch_warnings():
            yield
    finally:
        if os.getcwd() != cwd:
            os.chdir(cwd)


def _status(exc: BaseException) -> str:
    from pllzoo.checkpoint import Stopped, from_signal

    return "stopped" if isinstance(exc, Stopped) or isinstance(exc, KeyboardInterrupt) and from_signal(exc) \
        else "failed"  # a KeyboardInterrupt that a plugin raised fails its run (pllzoo.bench.execute)


@contextmanager
def observing(registry: Any, choices: Iterable[ObserverChoice], run: RunInfo) -> Iterator[RunObservers]:
    """Observe one run: make the observers, call ``pllzoo_observe_run_start``, yield, and call
    ``pllzoo_observe_run_end`` however the block ends (``"finished"``, or ``"failed"``/``"stopped"``
    with the exception's one line, which is then re-raised)."""
    observers = RunObservers(registry, choices, run)
    observers.call("pllzoo_observe_run_start", run=run)
    try:
        yield observers
    except BaseException as exc:
        status = _status(exc)
        observers.end(status, "interrupted" if isinstance(exc, KeyboardInterrupt) and status == "stopped" else
                      _one_line(exc))
        raise
    observers.end("finished")
