"""Plugin discovery: one PluginManager, built-ins plus the ``pllzoo`` entry-point group.

* Built-in plugins (:data:`BUILTIN_PLUGINS`) register through the same hooks as
  third-party ones.
* Entry points are loaded one by one; a plugin that fails to import is recorded
  in :data:`FAILED` (name and reason) and the others still load.
* ``PLLZOO_LOAD_PLUGINS=a,b`` loads only those entry points (empty: none).
* ``PLLZOO_TRACE_PLUGINS=1`` prints every hook call (pluggy's hook-call monitoring).
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import sys
from dataclasses import dataclass
from types import ModuleType

import pluggy

from pllzoo import hookspecs

GROUP = "pllzoo"
BUILTIN_PLUGINS: tuple[str, ...] = ("pllzoo.builtin",)


@dataclass(frozen=True)
class PluginInfo:
    """What ``pllzoo plugins`` shows for one plugin."""

    name: str
    version: str
    module: str
    builtin: bool
    error: str | None = None  # set when the plugin failed to load


def _version(dist: md.Distribution | None) -> str:
    return dist.version if dist is not None else "builtin"


def make_plugin_manager(load_entrypoints: bool = True) -> tuple[pluggy.PluginManager, list[PluginInfo]]:
    """A fresh manager with the discovery specs, built-ins and (optionally) entry points."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs.DiscoverySpec)
    infos: list[PluginInfo] = []
    from pllzoo import __version__

    for modname in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(modname), name=modname)
        pm.check_pending()
        infos.append(PluginInfo(modname, __version__, modname, builtin=True))
    if load_entrypoints:
        infos += _load_entrypoints(pm)
    if os.environ.get("PLLZOO_TRACE_PLUGINS"):
        pm.trace.root.setwriter(lambda msg: print(msg, end="", file=sys.stderr))
        pm.enable_tracing()
    return pm, infos


def _allowed() -> set[str] | None:
    raw = os.environ.get("PLLZOO_LOAD_PLUGINS")
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def _load_entrypoints(pm: pluggy.PluginManager) -> list[PluginInfo]:
    infos: list[PluginInfo] = []
    allowed = _allowed()
    seen: set[str] = set()
    for ep in sorted(md.entry_points(group=GROUP), key=lambda e: e.name):
        if ep.name in seen or (allowed is not None and ep.name not in allowed):
            continue
        seen.add(ep.name)
        dist = getattr(ep, "dist", None)
        try:
            plugin = ep.load()
            if not isinstance(plugin, ModuleType) and not hasattr(plugin, "__dict__"):
                raise TypeError(f"entry point must name a module or object, got {type(plugin).__name__}")
            pm.register(plugin, name=ep.name)
            try:
                pm.check_pending()  # a misspelled hook is an error, not a silent no-op
            except pluggy.PluginValidationError:
                pm.unregister(name=ep.name)
                raise
            infos.append(PluginInfo(ep.name, _version(dist), ep.value, builtin=False))
        except Exception as exc:  # a broken plugin must not stop the others
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            infos.append(PluginInfo(ep.name, _version(dist), ep.value, builtin=False, error=reason))
    return infos


def plugin_hooks(pm: pluggy.PluginManager, name: str) -> list[str]:
    """Names of the hooks a registered plugin implements."""
    plugin = pm.get_plugin(name)
    if plugin is None:
        return []
    return sorted(h.name for h in pm.get_hookcallers(plugin) or [])
