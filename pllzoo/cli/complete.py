"""Shell completion of the names the installed plugins register (click's completion, README "Using it"):

    eval "$(_PLLZOO_COMPLETE=bash_source pllzoo)"    # bash; zsh_source or fish_source for those shells

Method strings complete one comma-separated item at a time, a mix's ``+slot=`` and its component too
(``proden+sel`` → ``proden+selection=``, then the selection components); ``--dataset`` completes the dataset names
(a path completes as the shell's own does, through click's file completion when nothing matches), ``--predict``
the predict components.  The registry is built quietly: a plugin that fails to load leaves its names out.
"""

from __future__ import annotations

import contextlib
import io
import warnings

from click.shell_completion import CompletionItem


def _registry():
    from pllzoo.registry import get_registry

    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):  # nothing on the user's prompt line
        warnings.simplefilter("ignore")
        return get_registry()


def methods(ctx, param, incomplete: str) -> list[CompletionItem]:
    """The last item of a comma-separated method list: a method name, or a mix's ``+slot=component``."""
    from pllzoo.components import OPTIONAL_SLOTS, SLOTS

    reg = _registry()
    head, comma, item = incomplete.rpartition(",")
    before = head + comma
    if "+" not in item:
        return [CompletionItem(before + m) for m in reg.list_methods() if m.startswith(item)]
    base, _, swap = item.rpartition("+")
    slot, eq, comp = swap.partition("=")
    if not eq:
        return [CompletionItem(f"{before}{base}+{s}=") for s in SLOTS if s.startswith(slot)]
    names = sorted(reg.components.get(slot, {})) + (["none"] if slot in OPTIONAL_SLOTS else [])
    return [CompletionItem(f"{before}{base}+{slot}={n}") for n in names if n.startswith(comp)]


def datasets(ctx, param, incomplete: str) -> list[CompletionItem]:
    """Dataset names; where none starts so, a file path (``.mat``, ``imagefolder:PATH``), as the shell completes it."""
    found = [CompletionItem(n) for n in sorted(_registry().datasets) if n.startswith(incomplete)]
    return found or [CompletionItem(incomplete, type="file")]


def predictors(ctx, param, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(n) for n in sorted(_registry().components.get("predict", {})) if n.startswith(incomplete)]
