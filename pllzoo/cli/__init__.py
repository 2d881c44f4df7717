"""The ``pllzoo`` command group; one file per command group, each thin.

User errors (:class:`pllzoo.errors.PLLZooError`) end in one ``Error: ...`` line
and a non-zero exit (2 for unknown names, 1 otherwise), never a traceback — unless
``PLLZOO_DEBUG=1``, which prints the full traceback (and its cause) first.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
import warnings

import click

from pllzoo import __version__, best_effort, configfile, interrupts, procinfo
from pllzoo.errors import PLLZooError, UsageError
from pllzoo.isolation import callers_torch_kept


command_started = time.monotonic()
"""``time.monotonic()`` at the start of the command now running (of the process, for the ``pllzoo`` program):
``--time-limit`` counts from it."""


class _Group(click.Group):
    def main(self, *args, standalone_mode: bool = True, **extra):
        """With ``standalone_mode=False`` (the README's call from a notebook or script) a command that Ctrl-C
        stopped (status 130, after its clean stop saved what it had) raises ``KeyboardInterrupt`` to the caller,
        as any interrupted code does there (an outside review: it returned 130, and a loop of benches went on
        with the next one), also when the press came in the last epoch, which the bench then finished; other
        statuses are returned, as click does."""
        global command_started
        age = procinfo.age_s() if interrupts.ending else None  # the program: from the process's start
        command_started = time.monotonic() - (age or 0.0)
        stops = sys.modules.get("pllzoo.checkpoint")
        if stops is not None:
            stops.take_request()  # an earlier command's
        status = super().main(*args, standalone_mode=standalone_mode, **extra)
        stops = sys.modules.get("pllzoo.checkpoint")
        late = stops is not None and stops.take_request() == signal.SIGINT  # in the last epoch: the work ended
        if not standalone_mode and (status == 128 + signal.SIGINT or late):
            raise KeyboardInterrupt(f"pllzoo stopped by Ctrl-C (status {status})" if status == 128 + signal.SIGINT
                                    else "Ctrl-C (after the bench's last epoch, which it finished)")
        return status

    def make_context(self, info_name, args, parent=None, **extra):
        try:  # eager options (--help, --version) print while click parses the arguments, before invoke
            return super().make_context(info_name, args, parent=parent, **extra)
        except OSError as exc:  # (an outside review: `pllzoo --version >/dev/full` was a traceback)
            raise _os_error(exc) from None

    def invoke(self, ctx: click.Context):
        try:
            # a KeyboardInterrupt that a plugin raises is not Ctrl-C (checkpoint.from_signal)
            with interrupts.watch(), callers_torch_kept(keep=not interrupts.ending):
                return super().invoke(ctx)
        except UsageError as exc:  # an unknown name, a bad value from a config file: exit 2, as click's own
            _debug_traceback(exc)
            raise click.UsageError(configfile.locate(ctx, str(exc))) from None
        except PLLZooError as exc:
            _debug_traceback(exc)
            raise click.ClickException(configfile.locate(ctx, str(exc))) from None
        except KeyboardInterrupt as exc:  # Ctrl-C (130), or another stop signal (interrupts.Interrupted, 128 + N),
            interrupts.ignore_from_now()  # outside a bench's clean-stop window (loading, planning)
            signum = interrupts.signum_of(exc)
            click.echo("interrupted (Ctrl-C)" if signum == signal.SIGINT else
                       f"stopped by {signal.Signals(signum).name}", err=True)
            ctx.exit(128 + signum)
        except UnicodeEncodeError as exc:  # a non-ASCII path under a locale without UTF-8 (LC_ALL=C, no coercion)
            if exc.encoding.replace("-", "").lower() != sys.getfilesystemencoding().replace("-", "").lower():
                raise
            _debug_traceback(exc)
            raise click.ClickException(
                f"cannot encode {exc.object[exc.start:exc.end]!r} in this locale's encoding "
                f"({sys.getfilesystemencoding()}), e.g. in a file name; set a UTF-8 locale (e.g. LC_ALL=C.UTF-8) "
                "or use ASCII names") from None
        except OSError as exc:
            raise _os_error(exc) from None


def _os_error(exc: OSError) -> click.ClickException:
    """What no command turned into its own line: a full disk under stdout, a read-only folder.  A closed pipe
    (`| head`) is click's to end quietly: re-raised."""
    if exc.errno == errno.EPIPE:
        raise exc
    _debug_traceback(exc)
    try:
        sys.stdout.flush()
    except OSError:  # stdout itself failed: nothing more goes there (nor at the interpreter's exit)
        sys.stdout = open(os.devnull, "w")
    where = f" ({exc.filename})" if exc.filename else " (standard output?)" if exc.errno == errno.ENOSPC else ""
    written = exc.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG)
    verb = "write" if written or (exc.errno == errno.EBADF and not exc.filename) else "read or write"
    return click.ClickException(f"cannot {verb}: {exc.strerror or exc}{where}")


def _debug_traceback(exc: BaseException) -> None:
    """With ``PLLZOO_DEBUG=1``: the full traceback (with the chained cause, e.g. a plugin's own error) to stderr."""
    from pllzoo.plugins import debug_traceback

    debug_traceback(exc)


def failure_lines(reg, debug: bool = False) -> list[str]:
    """One line per plugin that failed to load; with ``debug``, each followed by its full traceback."""
    from pllzoo.plugins import unknown_allowed

    lines = [line for line in [unknown_allowed()] if line]
    for info in reg.failures():
        lines.append(f"plugin {info.origin} failed to load: {info.error}")
        if debug:
            lines.append((info.traceback or "(no traceback: refused before any of its code ran)").rstrip())
    return lines


def warn_failed_plugins(reg) -> None:
    """To stderr, one ``Warning:`` line per failed plugin (with ``PLLZOO_DEBUG=1``, its traceback too)."""
    from pllzoo.plugins import debug_enabled, unknown_allowed

    unknown = unknown_allowed()
    if unknown:
        click.echo(f"Warning: {unknown}", err=True)
    for info in reg.failures():
        click.echo(f"Warning: plugin {info.origin} failed to load: {info.error}; `pllzoo plugins --debug`", err=True)
        if debug_enabled() and info.traceback:
            click.echo(info.traceback.rstrip(), err=True)


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"Warning: {message}", file=file or sys.stderr)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="pllzoo")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """pllzoo: partial-label learning methods, head to head, on long-tailed data."""
    shown, warnings.showwarning = warnings.showwarning, _one_line_warning
    ctx.call_on_close(lambda: setattr(warnings, "showwarning", shown))  # the caller's, in-process
    _encodable_output()


def _encodable_output() -> None:
    """Standard output and error that cannot encode what pllzoo prints (φ, γ, ± in tables; an ASCII or Latin-1
    ``PYTHONIOENCODING``) write ``?`` for it instead of raising (an outside review: a traceback after the bench had
    written its results).  The files pllzoo writes are UTF-8 whatever the terminal."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if encoding and not encoding.startswith("utf") and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="replace")
            except (ValueError, OSError):  # a stream that cannot be reconfigured (closed, detached)
                pass


from pllzoo.cli import archive as _archive  # noqa: E402,F401  (registers commands)
from pllzoo.cli import bench as _bench  # noqa: E402,F401
from pllzoo.cli import check as _check  # noqa: E402,F401
from pllzoo.cli import evaluate as _evaluate  # noqa: E402,F401
from pllzoo.cli import plot as _plot  # noqa: E402,F401
from pllzoo.cli import plugins as _plugins  # noqa: E402,F401
from pllzoo.cli import report as _report  # noqa: E402,F401
from pllzoo.cli import sweep as _sweep  # noqa: E402,F401


def main() -> None:
    """The ``pllzoo`` program (the console script, ``python -m pllzoo``).  Called from other code (IPython's
    ``%run -m pllzoo``, a script), it leaves the caller's signal handlers, warnings and torch state as they were."""
    interrupts.ending = _the_program(sys._getframe(1))
    if interrupts.ending:  # a notice or progress line that cannot be written ends no run (a broken `| tee`)
        best_effort.install()
    try:
        cli()
    finally:  # the process is ending: a repeat Ctrl-C or SIGTERM must not land in torch's exit finalizers
        interrupts.ignore_from_now()


def _the_program(frame) -> bool:
    """Whether the process ends with the command: :func:`main` called by the console script or a script's
    module-level line (``python -m wrapper`` too: runpy's frames and ``pllzoo/__main__.py`` do not count), not
    from a session that goes on (an outside review: IPython's ``%run -m pllzoo`` left Ctrl-C ignored)."""
    own = []
    while frame is not None:
        spec = frame.f_globals.get("__spec__")
        if frame.f_globals.get("__name__") != "runpy" and getattr(spec, "name", None) != "pllzoo.__main__":
            own.append(frame)
        frame = frame.f_back
    return not own or (len(own) == 1 and own[0].f_code.co_name == "<module>")
