"""Names to things: components per slot, method recipes, datasets.

Built once from the plugin manager (:func:`get_registry`); duplicate names are
errors naming both plugins.  :meth:`Registry.method` turns a method string such
as ``proden+selection=pllzoo.all`` into a :class:`~pllzoo.components.Method`, and
:meth:`Registry.build_components` instantiates its components with resolved
hyper-parameters.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pluggy

from pllzoo import hookspecs
from pllzoo.components import OPTIONAL_SLOTS, SLOTS, Component, Method, check_compatible, parse_method_string
from pllzoo.data.base import DatasetSpec
from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.hparams import override
from pllzoo.plugins import PluginInfo, make_plugin_manager


@dataclass
class Registry:
    pm: pluggy.PluginManager
    plugins: list[PluginInfo]
    components: dict[str, dict[str, tuple[type[Component], str]]] = field(default_factory=dict)
    methods: dict[str, tuple[Method, str]] = field(default_factory=dict)
    datasets: dict[str, tuple[DatasetSpec, str]] = field(default_factory=dict)

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, pm: pluggy.PluginManager, plugins: list[PluginInfo]) -> "Registry":
        known = {p.name for p in plugins}
        plugins = list(plugins) + [  # plugins registered in-process, e.g. by a test
            PluginInfo(name, "unknown", getattr(obj, "__name__", type(obj).__name__), builtin=False)
            for name, obj in pm.list_name_plugin() if name not in known
        ]
        reg = cls(pm=pm, plugins=plugins, components={s: {} for s in SLOTS})
        calls = [(h, reg._component_registrar(slot)) for slot, h in hookspecs.SLOT_REGISTER_HOOKS.items()]
        calls += [
            ("pllzoo_register_methods", lambda p: lambda m: reg._add(reg.methods, m.name, m, p, "method")),
            ("pllzoo_register_datasets", lambda p: lambda d: reg._add(reg.datasets, d.name, d, p, "dataset")),
        ]
        for hook_name, registrar in calls:
            for impl in getattr(pm.hook, hook_name).get_hookimpls():
                try:
                    impl.function(register=registrar(impl.plugin_name))
                except Exception as exc:  # a plugin that breaks while registering is reported, not fatal
                    reg._fail(impl.plugin_name, f"{hook_name}: {type(exc).__name__}: {exc}")
        return reg

    def _fail(self, plugin: str, reason: str) -> None:
        for i, info in enumerate(self.plugins):
            if info.name == plugin and info.error is None:
                self.plugins[i] = dataclasses.replace(info, error=reason.splitlines()[0])

    def _component_registrar(self, slot: str):
        return lambda plugin: self._registrar_for(slot, plugin)

    def _registrar_for(self, slot: str, plugin: str):
        role = hookspecs.SLOT_HOOKS[slot]

        def register(name: str, component: type[Component]) -> None:
            if not (isinstance(component, type) and issubclass(component, Component)):
                raise PLLZooError(f"plugin {plugin!r}: {slot} {name!r} must be a pllzoo.Component subclass")
            if not callable(getattr(component, role, None)):
                raise PLLZooError(f"plugin {plugin!r}: {slot} {name!r} does not implement {role}")
            component.name, component.slot = name, slot
            self._add(self.components[slot], name, component, plugin, slot)

        return register

    @staticmethod
    def _add(table: dict, name: str, obj: Any, plugin: str, what: str) -> None:
        if name in table:
            raise PLLZooError(f"{what} {name!r} is registered by both {table[name][1]!r} and {plugin!r}")
        table[name] = (obj, plugin)

    # ------------------------------------------------------------------ lookup
    def component_class(self, slot: str, name: str) -> type[Component]:
        try:
            return self.components[slot][name][0]
        except KeyError:
            valid = ", ".join(sorted(self.components[slot])) or "(none)"
            raise UnknownNameError(f"unknown {slot} component {name!r}; valid: {valid}") from None

    def list_methods(self, pattern: str = "*") -> list[str]:
        return sorted(n for n in self.methods if fnmatch.fnmatch(n, pattern))

    def method(self, text: str) -> Method:
        """Resolve a method string (``base+slot=component...``); the string becomes its name."""
        base, swaps = parse_method_string(text)
        if base not in self.methods:
            raise UnknownNameError(f"unknown method {base!r}; valid: {', '.join(self.list_methods())}")
        method = self.methods[base][0]
        for slot, comp in swaps.items():
            if comp is not None:
                self.component_class(slot, comp)
        name = "+".join([base] + [f"{s}={c or 'none'}" for s, c in swaps.items()])
        method = dataclasses.replace(method, name=name, **swaps)
        for slot, comp in method.slots().items():
            if comp is not None:
                self.component_class(slot, comp)
            elif slot not in OPTIONAL_SLOTS:
                raise PLLZooError(f"method {name!r} leaves slot {slot!r} empty")
        return method

    def dataset(self, name_or_path: str) -> DatasetSpec:
        if name_or_path in self.datasets:
            return self.datasets[name_or_path][0]
        if name_or_path.endswith(".mat") or Path(name_or_path).suffix or "/" in name_or_path:
            from pllzoo.data.catalog import path_dataset

            return path_dataset(name_or_path)
        valid = ", ".join(sorted(self.datasets))
        raise UnknownNameError(f"unknown dataset {name_or_path!r}; valid: {valid}, or a path to a .mat file")

    # ------------------------------------------------------------------ instantiation
    def hparam_keys(self, method: Method) -> set[str]:
        keys = set()
        for slot, comp in method.slots().items():
            if comp is not None:
                cls = self.component_class(slot, comp)
                keys |= {f"{slot}.{f.name}" for f in dataclasses.fields(cls.HParams)}
        return keys

    def build_components(
        self, method: Method, overrides: Mapping[str, Any] | None = None, dataset: tuple[str, str] | None = None,
    ) -> dict[str, Component]:
        """Instantiate the recipe's components with resolved hyper-parameters.

        Precedence, lowest first: the dataclass defaults, the component's
        ``dataset_defaults(name, kind)`` when ``dataset=(name, kind)`` is given,
        ``method.hparams``, then ``overrides`` (``slot.field`` → value or its string
        form; keys for slots the method does not have are errors).
        """
        merged: dict[str, Any] = {**method.hparams, **(overrides or {})}
        per_slot: dict[str, dict[str, Any]] = {}
        for key, value in merged.items():
            slot, dot, fname = key.partition(".")
            if not dot or slot not in SLOTS:
                raise PLLZooError(f"bad hyper-parameter key {key!r}; write slot.field with slot in {', '.join(SLOTS)}")
            per_slot.setdefault(slot, {})[fname] = value
        built: dict[str, Component] = {}
        for slot, comp_name in method.slots().items():
            if comp_name is None:
                if per_slot.get(slot):
                    raise PLLZooError(f"method {method.name!r} has no {slot} component for {sorted(per_slot[slot])}")
                continue
            cls = self.component_class(slot, comp_name)
            base = cls.HParams()
            if dataset is not None:
                base = override(base, cls.dataset_defaults(*dataset), where=f"{slot}")
            hp = override(base, per_slot.get(slot, {}), where=f"{slot}")
            built[slot] = cls(hp)
        check_compatible(method.name, built)
        return built


_REGISTRY: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry, built on first use (entry points loaded once)."""
    global _REGISTRY
    if _REGISTRY is None:
        pm, infos = make_plugin_manager()
        _REGISTRY = Registry.build(pm, infos)
    return _REGISTRY


def reset_registry() -> None:
    """Forget the cached registry (tests, or after installing a plugin in-process)."""
    global _REGISTRY
    _REGISTRY = None
