"""Names to things: components per slot, method recipes, datasets, backbones, views and run observers.

Built once from the plugin manager (:func:`get_registry`), one plugin at a time,
all or nothing: a plugin whose registrations are not all valid, or that takes a
name another plugin holds, is refused as a whole, with a one-line reason naming
both plugins and their distributions; the shipped plugins go first, so they
keep their names.  :meth:`Registry.method` turns a method string such
as ``proden+selection=pllzoo.all`` into a :class:`~pllzoo.components.Method`, and
:meth:`Registry.build_components` instantiates its components with resolved
hyper-parameters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import fnmatch
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pluggy

from pllzoo import hookspecs
from pllzoo.components import (OPTIONAL_SLOTS, SLOTS, Component, Method, check_compatible, check_component, check_name,
                               parse_method_string)
from pllzoo.data.base import DatasetSpec
from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.hparams import override
from pllzoo.observers import Observer, check_observer
from pllzoo.plugins import SHIPPED, PluginInfo, make_plugin_manager, one_line, shipped_left_out

IMAGEFOLDER_PREFIX = "imagefolder:"  # --dataset imagefolder:PATH (pllzoo.data.imagefolder)


@dataclass
class Registry:
    pm: pluggy.PluginManager
    plugins: list[PluginInfo]
    components: dict[str, dict[str, tuple[type[Component], str]]] = field(default_factory=dict)
    methods: dict[str, tuple[Method, str]] = field(default_factory=dict)
    datasets: dict[str, tuple[DatasetSpec, str]] = field(default_factory=dict)
    models: dict[str, tuple[Callable[..., Any], str]] = field(default_factory=dict)  # name -> (factory, plugin)
    views: dict[str, tuple[Callable[..., Any], str]] = field(default_factory=dict)  # name -> (view, plugin)
    observers: dict[str, tuple[type[Observer], str]] = field(default_factory=dict)
    #: names of the shipped plugins PLLZOO_LOAD_PLUGINS leaves out, by kind ("component": any slot), with their owner
    reserved: dict[str, dict[str, PluginInfo]] = field(default_factory=dict)

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, pm: pluggy.PluginManager, plugins: list[PluginInfo]) -> "Registry":
        """Collect every plugin's registrations, one plugin at a time, all or nothing.

        Built-in and shipped plugins (:attr:`PluginInfo.shipped`) go first, whatever the
        entry-point order, so their names are never taken.  A plugin's components, methods
        and datasets are staged and checked (:func:`~pllzoo.components.check_component`,
        names, collisions with what is committed and within the plugin) and committed only
        if all of them are valid; a plugin that fails is marked failed (one-line reason and
        traceback in its :class:`PluginInfo`), leaves no name behind and is unregistered.
        """
        known = {p.name for p in plugins}
        plugins = list(plugins) + [  # plugins registered in-process, e.g. by a test
            PluginInfo(name, "unknown", getattr(obj, "__name__", type(obj).__name__), builtin=False)
            for name, obj in pm.list_name_plugin() if name not in known
        ]
        reg = cls(pm=pm, plugins=plugins, components={s: {} for s in SLOTS})
        if any(not shipped(p) and p.error is None for p in plugins):
            reg.reserved = _left_out_names()
        for info in sorted(plugins, key=lambda p: not p.shipped):  # stable: entry-point order within each group
            if info.error is None and pm.get_plugin(info.name) is not None:
                reg._load_plugin(info)
        return reg

    def _info(self, plugin: str) -> PluginInfo:
        return next(p for p in self.plugins if p.name == plugin)

    def _component_origin(self, slot: str, name: str) -> str:
        """``loss component 'x.loss' (plugin 'x' (dist version))``, for messages."""
        return f"{slot} component {name!r} (plugin {self.component_plugin(slot, name).origin})"

    def _method_origin(self, name: str) -> str:
        """`` (plugin 'x' (dist version))`` for a registered method (a mix: its base's), else ""."""
        base = name.partition("+")[0]
        return f" (plugin {self._info(self.methods[base][1]).origin})" if base in self.methods else ""

    def recorded_hparams(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A recorded run config's component hyper-parameters as ``slot.field`` values, with each field it lacks
        because it held its ``unnamed_when`` value (:func:`pllzoo.hparams.named`) filled in: what the run ran
        with, whatever today's defaults.  Components no longer registered are left as recorded."""
        from pllzoo.hparams import unnamed_values

        out = {f"{slot}.{k}": v for slot, fields_ in config.get("hparams", {}).items() for k, v in fields_.items()}
        for slot, name in (config.get("recipe") or {}).items():
            try:
                cls = self.component_class(slot, name)
            except (PLLZooError, KeyError, TypeError):
                continue
            recorded = config.get("hparams", {}).get(slot, {})
            out.update({f"{slot}.{k}": v for k, v in unnamed_values(cls.HParams).items() if k not in recorded})
        return out

    def plugin_info(self, plugin: str) -> PluginInfo:
        """The :class:`PluginInfo` of the plugin registered as ``plugin`` (the second item of a table's entry)."""
        return self._info(plugin)

    def _load_plugin(self, info: PluginInfo) -> None:
        staged = _Staged(components={s: {} for s in SLOTS})
        calls = [(h, self._component_registrar(slot, info, staged)) for slot, h in hookspecs.SLOT_REGISTER_HOOKS.items()]
        calls += [
            ("pllzoo_register_methods", self._object_registrar("method", Method, info, staged.methods)),
            ("pllzoo_register_datasets", self._object_registrar("dataset", DatasetSpec, info, staged.datasets)),
            ("pllzoo_register_models", self._callable_registrar("model", info, staged.models, self.models)),
            ("pllzoo_register_views", self._callable_registrar("view", info, staged.views, self.views)),
            ("pllzoo_register_observers", self._observer_registrar(info, staged.observers)),
        ]
        try:
            for hook_name, register in calls:
                for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                    if impl.plugin_name != info.name:
                        continue
                    if impl.wrapper or impl.hookwrapper:  # called directly below, its generator would never run
                        raise PLLZooError(f"{hook_name} is a hook wrapper; discovery hooks take plain "
                                          "implementations (drop wrapper=True)")
                    try:
                        impl.function(**{a: register for a in impl.argnames})
                    except PLLZooError:
                        raise
                    except Exception as exc:  # the plugin's own code broke while registering
                        raise PLLZooError(f"{hook_name}: {one_line(exc)}") from exc
        except PLLZooError as exc:
            self._fail(info.name, str(exc), traceback.format_exc())
            return
        for slot, table in staged.components.items():  # commit: every check passed
            for name, component in table.items():
                if "name" in vars(component) and (component.name, component.slot) != (name, slot):
                    component = _own_class(component)
                component.name, component.slot = name, slot
                component._pllzoo_plugin = info.name  # messages name the plugin as `pllzoo plugins` lists it
                self.components[slot][name] = (component, info.name)
        self.methods.update((n, (m, info.name)) for n, m in staged.methods.items())
        self.datasets.update((n, (d, info.name)) for n, d in staged.datasets.items())
        self.models.update((n, (f, info.name)) for n, f in staged.models.items())
        self.views.update((n, (v, info.name)) for n, v in staged.views.items())
        for name, observer in staged.observers.items():
            if "name" in vars(observer) and observer.name != name:
                observer = _own_class(observer)
            observer.name = name
            self.observers[name] = (observer, info.name)

    def _fail(self, plugin: str, reason: str, tb: str | None = None) -> None:
        for i, info in enumerate(self.plugins):
            if info.name == plugin and info.error is None:
                self.plugins[i] = dataclasses.replace(info, error=reason.splitlines()[0], traceback=tb)
        if self.pm.get_plugin(plugin) is not None:  # nothing of a failed plugin stays (nor reaches --jobs workers)
            self.pm.unregister(name=plugin)

    def _claim(self, what: str, name: str, table: dict, committed: dict, info: PluginInfo,
               check: Callable[[str, Any], None] = check_name) -> None:
        """Refuse ``name`` if ``check`` refuses it, this plugin offered it already or another plugin holds it."""
        check(what, name)
        owner = self.reserved.get("component" if what in SLOTS else what, {}).get(name)
        if owner is not None and not shipped(info):
            raise PLLZooError(f"{what} {name!r} is a name of plugin {owner.origin}, shipped with pllzoo and left out "
                              f"by PLLZOO_LOAD_PLUGINS; plugin {info.origin} is refused as a whole")
        if name in table:
            raise PLLZooError(f"{what} {name!r} is registered twice by plugin {info.origin}")
        if name in committed:
            owner = self._info(committed[name][1])
            raise PLLZooError(
                f"{what} {name!r} is already registered by plugin {owner.origin}; "
                f"plugin {info.origin} is refused as a whole")

    def _component_registrar(self, slot: str, info: PluginInfo, staged: "_Staged"):
        def register(name: str, component: type[Component]) -> None:
            self._claim(slot, name, staged.components[slot], self.components[slot], info)
            for other, table in self.components.items():  # a component's name means that component, in
                if name in table and table[name][1] != info.name:  # whichever slot: another plugin's is not taken
                    raise PLLZooError(f"{slot} {name!r}: the name of {other} component {name!r} of plugin "
                                      f"{self._info(table[name][1]).origin}; plugin {info.origin} is "
                                      "refused as a whole")
            try:
                check_component(component, slot)
            except PLLZooError as exc:
                raise PLLZooError(f"{slot} {name!r}: {exc}") from None
            staged.components[slot][name] = component

        return register

    def _object_registrar(self, what: str, kind: type, info: PluginInfo, table: dict):
        committed = self.methods if what == "method" else self.datasets

        def register(obj: Any) -> None:
            if not isinstance(obj, kind):
                raise PLLZooError(f"a {what} must be a {kind.__module__}.{kind.__name__}, got {type(obj).__name__}")
            self._claim(what, obj.name, table, committed, info)
            table[obj.name] = obj

        return register

    def _callable_registrar(self, what: str, info: PluginInfo, table: dict, committed: dict):
        """``register(name, fn)`` for backbones and views: a name without blanks, a callable."""

        def register(name: str, fn: Callable[..., Any]) -> None:
            self._claim(what, name, table, committed, info, check=_check_plain_name)
            if not callable(fn):
                raise PLLZooError(f"{what} {name!r}: expected a callable, got {type(fn).__name__}")
            table[name] = fn

        return register

    def _observer_registrar(self, info: PluginInfo, table: dict):
        def register(name: str, observer: type[Observer]) -> None:
            self._claim("observer", name, table, self.observers, info)
            try:
                check_observer(observer)
            except PLLZooError as exc:
                raise PLLZooError(f"observer {name!r}: {exc}") from None
            table[name] = observer

        return register

    def failures(self) -> list[PluginInfo]:
        """The plugins that failed to load (import, validation or a refused name)."""
        return [p for p in self.plugins if p.error is not None]

    def provided(self, name: str) -> bool:
        """Whether a loaded plugin registers a component called ``name`` (in any slot)."""
        return any(name in names for names in self.components.values())

    def _absent_note(self, name: str) -> str:
        """For a recipe naming a component no loaded plugin has: where a prefix (``proden.``) is no loaded
        plugin's at all, say its plugin is not installed (an outside review: a solar-only install listed
        ``proden-s-cpe``, then refused it without a word of what to install)."""
        prefix = str(name).partition(".")[0] + "."
        if any(n.startswith(prefix) for names in self.components.values() for n in names):
            return ""
        fix = ("let PLLZOO_LOAD_PLUGINS load the plugin that provides them, or install it"
               if os.environ.get("PLLZOO_LOAD_PLUGINS") is not None else "install the plugin that provides them")
        return f". No loaded plugin registers {prefix}* components: {fix} (`pllzoo plugins` lists those loaded)"

    def _failed_note(self) -> str:
        failed = self.failures()
        if not failed:
            return ""
        if len(failed) > 2:  # each reason is in `pllzoo plugins`: one line stays readable (a review: 2,852 chars)
            return (f" ({len(failed)} plugins failed to load: {', '.join(p.name for p in failed)}; "
                    "`pllzoo plugins --debug` says why)")
        parts = "; ".join(f"plugin {p.name} failed to load: {p.error}" for p in failed)
        return f" ({parts}; `pllzoo plugins --debug`)"

    @staticmethod
    def _near(name: str, names: Iterable[str]) -> str:
        """`` (did you mean 'x'?)`` for a misspelt or miscased ``name`` of ``names``; '' when none is near."""
        names = list(names)
        same = [n for n in names if n.lower() == str(name).lower()]
        near = same or difflib.get_close_matches(str(name), names, n=1, cutoff=0.75)
        return f" (did you mean {near[0]!r}?)" if near else ""

    @staticmethod
    def _valid(names: Iterable[str]) -> str:
        """The valid names of an unknown-name error, sorted; an empty table says why it may be empty."""
        listed = ", ".join(sorted(names))
        only = os.environ.get("PLLZOO_LOAD_PLUGINS")
        note = f"PLLZOO_LOAD_PLUGINS={only} limits the plugins loaded" if only is not None else ""
        if listed:
            return listed + (f" ({note})" if note else "")
        return "(none registered" + (f"; {note})" if note else ")")

    # ------------------------------------------------------------------ lookup
    def component_class(self, slot: str, name: str) -> type[Component]:
        try:
            return self.components[slot][name][0]
        except KeyError:
            valid = self._valid(self.components[slot])
            elsewhere = [s for s, names in self.components.items() if name in names]
            which = " and ".join(elsewhere)
            own = [n for n in self.components[slot] if n.startswith(f"{name}.")]  # loss=cc: cc.loss
            hint = (f" (it is {'an' if which[:1] in 'aeiou' else 'a'} {which} component)" if elsewhere else
                    " (did you mean 'none'?)" if str(name).lower() == "none" and slot in OPTIONAL_SLOTS else
                    f" (did you mean {own[0]!r}?)" if len(own) == 1 else self._near(name, self.components[slot]))
            raise UnknownNameError(f"unknown {slot} component {name!r}{hint}; valid: {valid}"
                                   f"{self._failed_note()}") from None

    def absent_plugins(self, env: dict[str, Any] | None) -> str | None:
        """What a recorded run (its ``env.json``, ``env``: components, backbone, views, a plugin's dataset) was trained
        with that no loaded plugin registers now, and what to do: "plugin 'sharp' (pllzoo-sharp 1.0.0:
        sharp.confidence, sharp.loss), which no loaded plugin registers; install it", or None (all there, or nothing
        recorded).  An outside review: after an uninstall, evaluate and --from-run said "unknown method 'sharp-la'
        (did you mean 'solar-la'?)" and never named it."""
        from pllzoo.results import TRAINER_TABLES

        if not isinstance(env, dict):
            return None
        recorded = [(self.components.get(slot, {}), entry, "component")
                    for slot, entry in _dict(env.get("components")).items()]
        recorded += [(getattr(self, TRAINER_TABLES[key]), entry, "name")  # backbone, views, a plugin's dataset
                     for key, entry in _dict(env.get("trainer")).items() if key in TRAINER_TABLES]
        missing: dict[tuple[str, str, str], list[str]] = {}
        for table, entry, field_ in recorded:
            if not isinstance(entry, dict) or not isinstance(entry.get(field_), str) or entry[field_] in table:
                continue
            key = (str(entry.get("plugin", "?")), str(entry.get("dist", "?")), str(entry.get("version", "?")))
            missing.setdefault(key, []).append(entry[field_])
        if not missing:
            return None
        failed = {p.name for p in self.failures()}
        limited = os.environ.get("PLLZOO_LOAD_PLUGINS")
        named = {n.strip() for n in (limited or "").split(",")}
        left_out = limited is not None and any(plugin not in named for plugin, _, _ in missing)
        fix = (f"let PLLZOO_LOAD_PLUGINS (now {limited!r}) load it, or install it" if left_out
               else "install it")  # a review: a plugin the variable left out was called "not installed"
        return f"{self._absent_list(missing, failed)}, which no loaded plugin registers; {fix}"

    @staticmethod
    def _absent_list(missing: dict[tuple[str, str, str], list[str]], failed: set[str]) -> str:
        return "; ".join(f"plugin {plugin!r} ({dist} {version}: {', '.join(sorted(set(names)))})"
                         + (" (it failed to load: `pllzoo plugins --debug` says why)" if plugin in failed else "")
                         for (plugin, dist, version), names in missing.items())

    def component_plugin(self, slot: str, name: str) -> PluginInfo:
        """The plugin that registered component ``name`` in ``slot`` (its distribution and version: env.json)."""
        self.component_class(slot, name)  # an unknown name: the usual one-line error
        return self._info(self.components[slot][name][1])

    def model(self, name: str, where: str = "train.model") -> Callable[..., Any]:
        """The factory of backbone ``name``; an unknown name is one line listing the valid ones."""
        return self._lookup("model", self.models, name, where)

    def view(self, name: str, where: str = "") -> Callable[..., Any]:
        """The view called ``name``; an unknown name is one line listing the valid ones."""
        return self._lookup("view", self.views, name, where)

    def _lookup(self, what: str, table: dict, name: str, where: str) -> Callable[..., Any]:
        try:
            return table[name][0]
        except (KeyError, TypeError):
            near = self._near(name, table) if isinstance(name, str) else ""
            raise UnknownNameError(f"{where + ': ' if where else ''}unknown {what} {name!r}{near}; "
                                   f"valid: {self._valid(table)}{self._failed_note()}") from None

    def observer_class(self, name: str) -> type[Observer]:
        """The observer class registered as ``name`` (``--observe NAME``)."""
        try:
            return self.observers[name][0]
        except KeyError:
            valid = self._valid(self.observers)
            raise UnknownNameError(f"unknown observer {name!r}; valid: {valid}{self._failed_note()}") from None

    def list_methods(self, pattern: str = "*") -> list[str]:
        return sorted(n for n in self.methods if fnmatch.fnmatch(n, pattern))

    def method(self, text: str) -> Method:
        """Resolve a method string (``base+slot=component...``); the string becomes its name."""
        base, swaps = parse_method_string(text)
        if base not in self.methods:
            none = "" if self.methods or self.failures() or os.environ.get("PLLZOO_LOAD_PLUGINS") is not None else (
                ". No plugin provides methods: install one, e.g. pllzoo-solar and pllzoo-baselines (README: the "
                "first command installs them from a checkout)")
            raise UnknownNameError(f"unknown method {base!r}{self._near(base, self.methods)}; valid: "
                                   f"{self._valid(self.methods)}{self._failed_note()}{none}")
        method = self.methods[base][0]
        for slot, comp in swaps.items():
            if comp is not None:
                self.component_class(slot, comp)
        name = "+".join([base] + [f"{s}={c or 'none'}" for s, c in swaps.items()])
        swapped = {s for s, c in swaps.items() if c != getattr(method, s)}  # the recipe's values were for the
        hparams = {k: v for k, v in method.hparams.items() if k.partition(".")[0] not in swapped}  # component it had
        method = dataclasses.replace(method, name=name, hparams=hparams, **swaps)
        for slot, comp in method.slots().items():
            if comp is not None and slot not in swaps:  # the recipe's own: name the recipe and its plugin
                try:
                    self.component_class(slot, comp)
                except UnknownNameError as exc:
                    raise UnknownNameError(f"method {base!r}{self._method_origin(base)} names an {exc}"
                                           f"{self._absent_note(comp)}") from None
            elif comp is None and slot not in OPTIONAL_SLOTS:
                raise PLLZooError(f"method {name!r} leaves slot {slot!r} empty: the recipe{self._method_origin(base)} "
                                  f"names no {slot} component")  # (slot=none from the user is refused before)
        return method

    def dataset(self, name_or_path: str) -> DatasetSpec:
        if name_or_path in self.datasets:
            return self.datasets[name_or_path][0]
        if name_or_path.startswith(IMAGEFOLDER_PREFIX):
            from pllzoo.data.imagefolder import imagefolder_dataset

            return imagefolder_dataset(name_or_path[len(IMAGEFOLDER_PREFIX):])
        if name_or_path.endswith(".mat") or Path(name_or_path).suffix or "/" in name_or_path:
            from pllzoo.data.catalog import path_dataset

            return path_dataset(name_or_path)
        valid = ", ".join(sorted(self.datasets))
        raise UnknownNameError(f"unknown dataset {name_or_path!r}{self._near(name_or_path, self.datasets)}; valid: "
                               f"{valid}, a path to a .mat file, "
                               f"or {IMAGEFOLDER_PREFIX}PATH (an image folder and its candidate file)"
                               f"{self._failed_note()}")

    def recorded_dataset(self, recorded: str, given: str | None = None, flag: str = "--dataset") -> DatasetSpec:
        """The dataset a recorded run (``config.json``'s ``dataset``) trained on: its registered name, or
        ``given`` (a ``.mat`` path or ``imagefolder:PATH``, whose place a run does not record) when that is the
        dataset of that name.

        :raises PLLZooError: one line saying what to give (no ``given`` for an unregistered name), or that
            ``given`` is another dataset."""
        if given is None:
            if recorded in self.datasets:
                return self.datasets[recorded][0]
            raise PLLZooError(f"the run trained on dataset {recorded!r}, which is no registered name: a .mat file or "
                              f"an image folder, whose path runs do not record; give it with {flag} PATH/"
                              f"{recorded}.mat or {flag} imagefolder:PATH{self._failed_note()}")
        spec = self.dataset(given)
        if spec.name != recorded:
            raise PLLZooError(f"{flag} {given} is dataset {spec.name!r}; the run trained on {recorded!r}")
        return spec

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
        training: bool = True,
    ) -> dict[str, Component]:
        """Instantiate the recipe's components with resolved hyper-parameters (``training``: as
        :func:`~pllzoo.components.check_compatible` takes it).

        Precedence, lowest first: the dataclass defaults, the component's
        ``dataset_defaults(name, kind)`` when ``dataset=(name, kind)`` is given,
        ``method.hparams``, then ``overrides`` (``slot.field`` → value or its string
        form; keys for slots the method does not have are errors).
        """
        try:
            own = _by_slot(method.hparams)
        except PLLZooError as exc:  # the recipe's own key, not the user's --hp
            raise PLLZooError(f"method {method.name!r}{self._method_origin(method.name)} sets a bad "
                              f"hyper-parameter of its own: {exc}") from None
        per_slot = _by_slot({**method.hparams, **(overrides or {})})
        built: dict[str, Component] = {}
        for slot, comp_name in method.slots().items():
            if comp_name is None:
                if per_slot.get(slot):
                    raise PLLZooError(f"method {method.name!r} has no {slot} component for {sorted(per_slot[slot])}")
                continue
            cls = self.component_class(slot, comp_name)
            try:
                base = cls.HParams()
                if dataset is not None:
                    base = override(base, cls.dataset_defaults(*dataset), where=f"{slot}")
                try:  # the recipe's own values first: a bad one names the recipe, not the user's --hp
                    override(base, own.get(slot, {}), where=f"{slot}")
                except PLLZooError as exc:
                    raise PLLZooError(f"method {method.name!r}{self._method_origin(method.name)} sets a bad "
                                      f"hyper-parameter of its own: {exc}") from None
                except Exception:  # HParams.__post_init__ on the recipe's values alone: the user's --hp may
                    pass  # complete them; the combination is checked below
                try:
                    hp = override(base, per_slot.get(slot, {}), where=f"{slot}")
                except PLLZooError as exc:  # the user's value: name the component, which another method's may
                    # take (an outside review: proden,pico with --hp label_update.mask=candidates, valid for proden)
                    raise type(exc)(f"{exc} ({slot} {comp_name!r} of method {method.name!r})") from None
            except PLLZooError:
                raise
            except Exception as exc:  # the plugin's own check of its values (HParams.__post_init__): one line
                mine = {k: v for k, v in own.get(slot, {}).items() if per_slot[slot].get(k) == v}
                whose = f" (the recipe's {', '.join(f'{k}={v}' for k, v in mine.items())})" if mine else ""
                raise PLLZooError(f"{self._component_origin(slot, comp_name)} refused its hyper-parameters"
                                  f"{whose}: {one_line(exc)}") from exc
            try:
                built[slot] = cls(hp)
            except PLLZooError:
                raise
            except Exception as exc:  # its constructor (a bug in it, a resource it needs): one line
                raise PLLZooError(f"{self._component_origin(slot, comp_name)} could not be built: "
                                  f"{one_line(exc)}") from exc
        complete = [slot for slot, comp in built.items()  # whose reads are complete (_check_effective)
                    if shipped(self._info(self.components[slot][comp.name][1]))]
        check_compatible(method.name, built, training, complete=complete)
        return built


def shipped(info: PluginInfo) -> bool:
    """Whether ``info`` is pllzoo's built-ins or one of the plugins shipped beside it."""
    return info.builtin or (info.name, info.dist) in SHIPPED


def _left_out_names() -> dict[str, dict[str, PluginInfo]]:
    """The names the shipped plugins that ``PLLZOO_LOAD_PLUGINS`` leaves out would register, by kind
    ("component" for every slot, "method", "dataset", "model", "view", "observer"), each with its plugin: loaded
    in a manager of their own, never used for anything else.  A shipped plugin that fails to load reserves
    nothing here (it fails where it is loaded)."""
    left = shipped_left_out()
    if not left:
        return {}
    pm, infos = make_plugin_manager(only={ep.name for ep, _, _ in left})  # loaded as ever, failures recorded
    side = Registry.build(pm, infos)  # built-in and shipped plugins only: nothing is reserved again
    tables = {"method": side.methods, "dataset": side.datasets, "model": side.models, "view": side.views,
              "observer": side.observers}
    names = {kind: {n: side._info(p) for n, (_, p) in table.items()} for kind, table in tables.items()}
    names["component"] = {n: side._info(p) for table in side.components.values() for n, (_, p) in table.items()}
    return names


def _dict(value: Any) -> dict:
    """``value`` when it is a dict (a part of a recorded env.json), else an empty one."""
    return value if isinstance(value, dict) else {}


def _by_slot(hparams: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"slot.field": v}`` → ``{slot: {field: v}}``. :raises PLLZooError: a key that is not ``slot.field``."""
    per_slot: dict[str, dict[str, Any]] = {}
    for key, value in hparams.items():
        slot, dot, fname = key.partition(".")
        if not dot or slot not in SLOTS:
            raise PLLZooError(f"bad hyper-parameter key {key!r}; write slot.field with slot in {', '.join(SLOTS)}")
        per_slot.setdefault(slot, {})[fname] = value
    return per_slot


def _check_plain_name(what: str, name: Any) -> None:
    """Backbone and view names are ``--hp`` values: non-empty, without blanks (``none`` is the built-in view)."""
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise PLLZooError(f"bad {what} name {name!r}: a non-empty string without blanks")


@dataclass
class _Staged:
    """One plugin's registrations, held until all of them passed their checks."""

    components: dict[str, dict[str, type[Component]]]
    methods: dict[str, Method] = field(default_factory=dict)
    datasets: dict[str, DatasetSpec] = field(default_factory=dict)
    models: dict[str, Callable[..., Any]] = field(default_factory=dict)
    views: dict[str, Callable[..., Any]] = field(default_factory=dict)
    observers: dict[str, type[Observer]] = field(default_factory=dict)


_REGISTRY: Registry | None = None
_ADDED: dict[str, object] = {}  # register_plugin's plugins, by name: part of every registry built after


def get_registry() -> Registry:
    """The process-wide registry, built on first use (entry points loaded once, then :func:`register_plugin`'s
    plugins)."""
    global _REGISTRY
    if _REGISTRY is None:
        with contextlib.redirect_stdout(sys.stderr):  # a plugin printing at import: stdout is for results (--json)
            pm, infos = make_plugin_manager()
            for name, plugin in _ADDED.items():
                pm.register(plugin, name=name)
            _REGISTRY = Registry.build(pm, infos)
    return _REGISTRY


def reset_registry() -> None:
    """Forget the cached registry (tests, or after installing a plugin in-process); :func:`register_plugin`'s
    plugins stay."""
    global _REGISTRY
    _REGISTRY = None


def register_plugin(plugin: object, name: str) -> Registry:
    """Add ``plugin`` (a module, class or object with ``@hookimpl`` functions, as an entry point names) to this
    process's registry, without packaging it: from a notebook or a script, :func:`get_registry` and the CLI called
    in-process (``pllzoo.cli.cli([...], standalone_mode=False)``) list and run what it registers.  Checked as an
    installed plugin is; the new registry is returned.  ``--jobs`` workers get it when it lives in a module they
    can import (one defined in ``__main__`` or a notebook is refused there in one line); torchrun's processes
    load installed plugins only.

    :raises PLLZooError: ``name`` is taken (a plugin of that name is loaded), or the plugin failed its checks
        (the reason; nothing of it is registered)."""
    if not isinstance(name, str) or not name.strip():
        raise PLLZooError(f"register_plugin: name must be a non-empty string, got {name!r}")
    if name in _ADDED or any(p.name == name for p in get_registry().plugins):
        raise PLLZooError(f"register_plugin: a plugin named {name!r} is loaded already; unregister_plugin({name!r}) "
                          "first, or pick another name")
    _ADDED[name] = plugin
    reset_registry()
    cause: Exception | None = None
    try:
        reg = get_registry()
    except Exception as exc:  # noqa: BLE001 - pluggy's refusal (an object added already, a bad hook signature)
        why, cause = f"was refused: {one_line(exc)}", exc
    else:
        failed = next((p for p in reg.failures() if p.name == name), None)
        if failed is None:
            return reg
        why = f"failed its checks: {failed.error}"
    del _ADDED[name]  # nothing of it stays
    reset_registry()
    raise PLLZooError(f"register_plugin: plugin {name!r} {why}") from cause


def unregister_plugin(name: str) -> None:
    """Remove a plugin :func:`register_plugin` added (the next :func:`get_registry` is built without it).

    :raises PLLZooError: no plugin of that name was added so."""
    if name not in _ADDED:
        raise PLLZooError(f"unregister_plugin: {name!r} was not added by register_plugin "
                          f"(added: {', '.join(sorted(_ADDED)) or 'none'})")
    del _ADDED[name]
    reset_registry()


def _own_class(cls: type) -> type:
    """A subclass of ``cls`` that adds nothing: the class a second registration of ``cls`` names.

    The registry writes a component's (an observer's) name on its class; a class registered already (a
    shipped one, reused by a plugin under another name) keeps its first name, which its recipes and checks
    compare with, and the new name goes on this subclass.  It keeps a DDP opt-in declared on ``cls`` itself
    (``distributed`` is not inherited, :func:`pllzoo.components.is_distributed`: a copy was refused under torchrun
    where the class it copies ran)."""
    own = {k: vars(cls)[k] for k in ("distributed",) if k in vars(cls)}
    return type(cls.__name__, (cls,), {"__module__": cls.__module__, "__doc__": cls.__doc__,
                                       "__qualname__": cls.__qualname__, **own})
