"""Plugin discovery: one PluginManager, built-ins plus the ``pllzoo`` entry-point group.

* Built-in plugins (:data:`BUILTIN_PLUGINS`) register through the same hooks as
  third-party ones.
* Entry points are loaded one by one; a plugin that fails to import is recorded
  in its :class:`PluginInfo` (``error``: one line; ``traceback``: the full one)
  and the others still load.
* The distributions shipped in this repository (:data:`SHIPPED`) keep their names:
  their entry points load first and the registry commits them first, whatever the
  entry-point order (an outside entry point naming a shipped module is refused), and an outside
  plugin whose names collide with them is refused as a whole (see
  :meth:`pllzoo.registry.Registry.build`).  An outside entry point that reuses a
  shipped entry point's name is refused too.
* A distribution whose ``Requires-Dist: pllzoo...`` excludes this version is refused before import.
* ``PLLZOO_LOAD_PLUGINS=a,b`` loads only those entry points (empty: none); the names of a shipped plugin it
  leaves out stay reserved (:func:`shipped_left_out`).
* ``PLLZOO_DEBUG=1`` (or ``pllzoo plugins --debug``) shows the full traceback of
  each plugin that failed to load; without it, one line per failure.
* ``PLLZOO_TRACE_PLUGINS=1`` prints every hook call (pluggy's hook-call monitoring).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata as md
import os
import sys
import time
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pluggy

from pllzoo import hookspecs
from pllzoo.isolation import put_back, torch_settings

GROUP = "pllzoo"
BUILTIN_PLUGINS: tuple[str, ...] = ("pllzoo.builtin",)
#: (entry-point name, distribution name) of the plugins shipped in this repository
SHIPPED: frozenset[tuple[str, str]] = frozenset({("solar", "pllzoo-solar"), ("baselines", "pllzoo-baselines"),
                                                 ("ltpll", "pllzoo-ltpll")})
DEBUG_ENV = "PLLZOO_DEBUG"
SLOW_IMPORT_S = 1.0  # `pllzoo plugins` names a plugin whose import takes longer: every command pays it
_clock = time.perf_counter


@dataclass(frozen=True)
class PluginInfo:
    """What ``pllzoo plugins`` shows for one plugin."""

    name: str
    version: str
    module: str
    builtin: bool
    error: str | None = None  # one line, set when the plugin failed to load
    dist: str = "in-process"  # the distribution that supplies it ("in-process": registered by code, e.g. a test)
    traceback: str | None = None  # the full traceback of the failure (shown with --debug / PLLZOO_DEBUG=1)
    import_s: float | None = None  # seconds its entry point took to import and register (outside plugins)

    @property
    def shipped(self) -> bool:
        """Built-in or one of the distributions of this repository (their names are never taken)."""
        return self.builtin or (self.name, self.dist) in SHIPPED

    @property
    def origin(self) -> str:
        """``'name' (distribution version)``, for messages that must name the distribution."""
        return f"{self.name!r} ({self.dist} {self.version})" if self.dist != "in-process" else f"{self.name!r} (in-process)"


def debug_enabled() -> bool:
    """Whether ``PLLZOO_DEBUG`` asks for full tracebacks."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in {"", "0", "false", "no", "off"}


def debug_traceback(exc: BaseException) -> None:
    """With ``PLLZOO_DEBUG=1``: ``exc``'s full traceback (with its chained cause, e.g. a plugin's own error) to
    stderr, where a command turns it into one line or a verdict (the CLI's errors, a failed run of a bench, a
    failed check)."""
    if debug_enabled():
        print("".join(traceback.format_exception(exc)).rstrip(), file=sys.stderr, flush=True)


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (pluggy's validation errors span several lines: joined with '; ')."""
    text = str(exc).strip()
    if isinstance(exc, pluggy.PluginValidationError):
        text = "; ".join(line.strip() for line in text.splitlines() if line.strip())
    else:
        text = (text.splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _version(dist: md.Distribution | None) -> str:
    return dist.version if dist is not None else "unknown"


def _dist_name(dist: md.Distribution | None) -> str:
    name = dist.metadata["Name"] if dist is not None else None
    return name or "unknown"


def make_plugin_manager(load_entrypoints: bool = True, only: set[str] | None = None
                        ) -> tuple[pluggy.PluginManager, list[PluginInfo]]:
    """A fresh manager with the discovery specs, built-ins and (optionally) entry points: those
    ``PLLZOO_LOAD_PLUGINS`` allows, or the entry points named in ``only``."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs.DiscoverySpec)
    infos: list[PluginInfo] = []
    from pllzoo import __version__

    for modname in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(modname), name=modname)
        pm.check_pending()
        infos.append(PluginInfo(modname, __version__, modname, builtin=True, dist="pllzoo"))
    if load_entrypoints:
        infos += _load_entrypoints(pm, only)
    if os.environ.get("PLLZOO_TRACE_PLUGINS"):
        pm.trace.root.setwriter(lambda msg: print(msg, end="", file=sys.stderr))
        pm.enable_tracing()
    return pm, infos


def _allowed() -> set[str] | None:
    raw = os.environ.get("PLLZOO_LOAD_PLUGINS")
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def unknown_allowed() -> str | None:
    """One line naming what ``PLLZOO_LOAD_PLUGINS`` lists that no installed entry point has (a typo loads
    nothing of it), with the installed names; None when it lists none such, or is not set."""
    allowed = _allowed()
    installed = sorted({ep.name for ep in md.entry_points(group=GROUP)}) if allowed is not None else []
    unknown = sorted((allowed or set()) - set(installed))
    if not unknown:
        return None
    return (f"PLLZOO_LOAD_PLUGINS names {', '.join(map(repr, unknown))}, which no installed plugin is "
            f"(installed: {', '.join(installed) or 'none'})")


def _entry_points() -> list[tuple[md.EntryPoint, str, str]]:
    """``(entry point, distribution, version)``: the shipped ones first, then the others, each in name order.

    Shipped first, not merely first among equal names: an outside entry point that sorts before them
    and names a shipped module (``aaa = "pllzoo_baselines.plugin"``) would register that module under its
    own name, and the shipped entry point would then fail to register it."""
    found = []
    for i, ep in enumerate(md.entry_points(group=GROUP)):
        dist = getattr(ep, "dist", None)
        found.append(((ep.name, _dist_name(dist)) not in SHIPPED, ep.name, i, ep, _dist_name(dist), _version(dist)))
    return [(ep, dist, version) for *_, ep, dist, version in sorted(found, key=lambda f: f[:3])]


def shipped_left_out() -> list[tuple[md.EntryPoint, str, str]]:
    """The shipped entry points installed here that ``PLLZOO_LOAD_PLUGINS`` leaves out: their names stay theirs
    (:meth:`pllzoo.registry.Registry.build` reserves them), so leaving a shipped plugin out never lets an outside
    one run under a shipped method's name."""
    allowed = _allowed()
    if allowed is None:
        return []
    return [(ep, dist, version) for ep, dist, version in _entry_points()
            if (ep.name, dist) in SHIPPED and ep.name not in allowed]


def _load_entrypoints(pm: pluggy.PluginManager, only: set[str] | None = None) -> list[PluginInfo]:
    infos: list[PluginInfo] = []
    allowed = _allowed() if only is None else only
    taken: dict[str, PluginInfo] = {}
    for ep, dist, version in _entry_points():
        if allowed is not None and ep.name not in allowed:
            continue
        if ep.name in taken:
            first = taken[ep.name]
            if first.dist != dist:  # the same distribution found twice on the path is no conflict
                infos.append(PluginInfo(
                    ep.name, version, ep.value, builtin=False, dist=dist,
                    error=f"entry point name {ep.name!r} is already used by {first.origin}; "
                          f"{ep.name!r} ({dist} {version}) is refused"))
            continue
        unmet = _unmet_pllzoo_requirement(getattr(ep, "dist", None))
        if unmet is not None:  # not even imported: it was written against another pllzoo
            info = PluginInfo(ep.name, version, ep.value, builtin=False, dist=dist, error=unmet)
            taken[ep.name] = info
            infos.append(info)
            continue
        started = _clock()
        defaults = _torch_defaults()
        try:
            plugin = ep.load()
            _check_torch_defaults(defaults)
            if not isinstance(plugin, ModuleType) and not hasattr(plugin, "__dict__"):
                raise TypeError(f"entry point must name a module or object, got {type(plugin).__name__}")
            holder = pm.get_name(plugin)
            if holder is not None:  # pluggy's "already registered under a different name" names no distribution
                first = taken.get(holder)
                raise ValueError(f"it names the object {first.origin if first else repr(holder)} registered "
                                 "already; one object is one plugin")
            pm.register(plugin, name=ep.name)
            try:
                pm.check_pending()  # a misspelled hook is an error, not a silent no-op
            except pluggy.PluginValidationError as exc:
                pm.unregister(name=ep.name)
                raise _unknown_hooks(plugin) or exc
            info = PluginInfo(ep.name, version, ep.value, builtin=False, dist=dist, import_s=_clock() - started)
        except (Exception, SystemExit) as exc:  # a broken plugin (sys.exit at import too) must not stop the others
            info = PluginInfo(ep.name, version, ep.value, builtin=False, dist=dist, error=one_line(exc),
                              traceback=traceback.format_exc(), import_s=_clock() - started)
            with contextlib.suppress(RuntimeError):  # what a failed import changed goes back too (an outside
                _check_torch_defaults(defaults)  # review: grad mode turned off, then ImportError, failed every run)
        taken[ep.name] = info
        infos.append(info)
    return infos


def _unknown_hooks(plugin: Any) -> ValueError | None:
    """A plugin's hook implementations that name no discovery hook, each with the near name, e.g. ``unknown
    hook pllzoo_register_selection (did you mean pllzoo_register_selections?)``; None when it has none."""
    import difflib

    specs = sorted(n for n in dir(hookspecs.DiscoverySpec) if n.startswith("pllzoo_"))
    lines = []
    for attr in sorted(dir(plugin)):
        opts = getattr(getattr(plugin, attr, None), f"{hookspecs.PROJECT}_impl", None)
        hook = (opts.get("specname") or attr) if isinstance(opts, dict) else None
        if hook is not None and hook not in specs:
            near = difflib.get_close_matches(hook, specs, n=1)
            lines.append(f"unknown hook {hook}" + (f" (did you mean {near[0]}?)" if near else ""))
    if not lines:
        return None
    return ValueError(f"{'; '.join(lines)}; a plugin module implements discovery hooks: {', '.join(specs)}")


def _torch_defaults() -> tuple[dict[str, Any], str]:
    """torch's process-wide settings (:func:`pllzoo.isolation.torch_settings`) and default device now (torch's
    own when no one imported torch yet: the CLI does not)."""
    torch = sys.modules.get("torch")
    device = getattr(torch, "get_default_device", None) if torch is not None else None  # torch >= 2.3
    return torch_settings(), str(device()) if device is not None else "cpu"


def _check_torch_defaults(before: tuple[dict[str, Any], str]) -> None:
    """Refuse (:class:`RuntimeError`, one line) a plugin whose import changed one of torch's process-wide settings
    (default dtype or device, grad mode, deterministic algorithms, ...: an outside review, grad mode turned off
    at import failed every method with a line naming a shipped loss): every run of every method would then
    compute in it, with nothing naming the plugin.  The settings are put back."""
    settings, device = before
    what = put_back(settings)
    now = _torch_defaults()[1]
    if now != device:
        torch = sys.modules["torch"]
        torch.set_default_device(None if device == "cpu" else device)  # "cpu" would leave a device mode on
        what.append(f"default device ({now}; torch.set_default_device)")
    if what:
        raise RuntimeError(f"its import changes torch's {', '.join(what)}, which every run would compute with; "
                           "set them inside your own code, not at import")


def _unmet_pllzoo_requirement(dist: md.Distribution | None) -> str | None:
    """Why ``dist`` cannot run on this pllzoo (its ``Requires-Dist: pllzoo...`` excludes this version), or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    from pllzoo import __version__

    for text in (dist.requires or []) if dist is not None else []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name.lower() != "pllzoo" or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        if not req.specifier.contains(__version__, prereleases=True):
            return f"it requires pllzoo{req.specifier}, and this is pllzoo {__version__}; refused before import"
    return None


def plugin_hooks(pm: pluggy.PluginManager, name: str) -> list[str]:
    """Names of the hooks a registered plugin implements."""
    plugin = pm.get_plugin(name)
    if plugin is None:
        return []
    return sorted(h.name for h in pm.get_hookcallers(plugin) or [])
