"""How the trainer calls the run's components: a plugin manager holding exactly them, and the calls
with pllzoo's semantics (``docs/hooks.md``, "Who answers"): a role hook is answered by its slot's
component only; the other run hooks by every component that implements them, in a fixed order; an
exception inside a component becomes one line naming it (:class:`~pllzoo.checks.ComponentError`).
"""

from __future__ import annotations

import operator
from typing import Any

import pluggy

from pllzoo import hookspecs
from pllzoo.checkpoint import from_signal
from pllzoo.checks import ComponentError, describe, hook_failed
from pllzoo.components import Component
from pllzoo.errors import PLLZooError
from pllzoo.isolation import pop_modes
from pllzoo.state import WRITER, Scratch


_VERSION = operator.attrgetter("_version")  # a tensor's version counter (bumped by each in-place change)

#: the role hooks: each is answered by the component in its slot, and by no other
ROLE_HOOKS: dict[str, str] = {slot: hook for slot, hook in hookspecs.SLOT_HOOKS.items() if slot != "estimator"}


def make_run_manager(components: dict[str, Component]) -> pluggy.PluginManager:
    """A fresh plugin manager holding exactly this run's components, each under its slot's name.

    Hook wrappers are refused: the trainer calls the implementations one by one (to name the one
    that fails), which a wrapper would not survive.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs.RunSpec)
    for slot, comp in components.items():
        pm.register(comp, name=slot)
    pm.check_pending()
    for slot, comp in components.items():
        for caller in pm.get_hookcallers(comp) or ():
            if any(i.plugin is comp and (i.wrapper or i.hookwrapper) for i in caller.get_hookimpls()):
                raise PLLZooError(f"{describe(slot, comp)}: {caller.name} is a hook wrapper; run hooks take plain "
                                  "implementations")
    return pm


def _scratch(kwargs: dict[str, Any]) -> Scratch | None:
    """The step's guarded scratch among a hook call's arguments (None: no step, or no guarded scratch)."""
    step = kwargs.get("step")
    scratch = getattr(step, "scratch", None) if step is not None else None
    return scratch if isinstance(scratch, Scratch) else None


def _check_scratch(kwargs: dict[str, Any], scratch: Scratch, noted: list) -> None:
    """After a hook: the step's scratch is still the guarded one, and no key of another's changed in place."""
    if kwargs["step"].scratch is not scratch:
        raise PLLZooError("it replaced step.scratch, which other components' keys live in; set a key of your own "
                          "(step.scratch[key] = ...), declared in provides")
    if noted:
        scratch.check_watched(noted)


class RunHooks:
    """The run's hook calls with pllzoo's semantics (``docs/hooks.md``, "Who answers").

    ``role(slot, **kw)`` calls the slot component's implementation of the slot's role hook (``None`` when the
    slot is empty; ``role("stages")``, ``role("logit_offset")``: the one implementer's, in any slot, else
    ``None``); ``all(hook, **kw)`` calls every
    implementation in pluggy's order (last registered first: predict, estimator, loss, selection,
    label_update; ``registration_order=True`` reverses it) and returns ``[(slot, answer)]`` for the
    answers that are not None.  Either way an exception inside an implementation becomes a
    :class:`~pllzoo.checks.ComponentError` naming the component, chained to the cause.
    """

    def __init__(self, pm: pluggy.PluginManager, components: dict[str, Component], singles: dict[str, str]) -> None:
        self.components = components
        #: what no hook may change in place, by the name a component sees it under ("run.data.y_test",
        #: "step.probs", ...), tensors only (no None): the trainer sets it for the run, then for each step and
        #: each prediction.  Each call compares the tensors' version counters (host integers, no device sync)
        self.inputs: dict[str, Any] = {}
        self.impls = {spec: list(reversed(getattr(pm.hook, spec).get_hookimpls()))
                      for spec in vars(hookspecs.RunSpec) if spec.startswith("pllzoo_")}
        self.roles = {slot: self._own(slot, hook) for slot, hook in ROLE_HOOKS.items() if slot in components}
        for hook, slot in singles.items():  # {hook: slot} of components.single_answerers
            self.roles[hook.removeprefix("pllzoo_")] = self._own(slot, hook)
        import torch

        stack = getattr(torch._C, "_len_torch_function_stack", None)  # set_default_device pushes a mode on it
        #: torch's process-wide settings a hook must leave as it found them (C calls, ~0.2 µs together)
        self._globals = lambda: (torch.is_grad_enabled(), torch.get_default_dtype(), stack() if stack else 0)

    def _own(self, slot: str, hook: str) -> tuple[str, str, pluggy.HookImpl]:
        comp = self.components[slot]
        own = [i for i in self.impls[hook] if i.plugin is comp]
        if not own:
            raise PLLZooError(f"{describe(slot, comp)} does not implement {hook}, the role hook of its slot")
        return slot, hook, own[0]

    def role(self, role: str, **kwargs: Any) -> Any:
        entry = self.roles.get(role)
        if entry is None:
            return None
        slot, hook, impl = entry
        token = WRITER.set(slot)
        state = kwargs.get("state")
        try:
            watched = state.watch(slot) if state is not None else ()
            scratch = _scratch(kwargs)
            noted = scratch.watch(slot) if scratch else ()
            before = list(map(_VERSION, self.inputs.values()))  # C-level: no Python frame on the hot path
            settings = self._globals()
            answer = impl.function(*[kwargs[a] for a in impl.argnames])
            if watched:
                state.check_watched(watched)
            if scratch is not None:
                _check_scratch(kwargs, scratch, noted)
            if list(map(_VERSION, self.inputs.values())) != before:
                self._changed(before, slot, hook)
            if self._globals() != settings:
                self._left_changed(settings, slot, hook)
            return answer
        except ComponentError:
            raise
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # sys.exit() or a KeyboardInterrupt that a
            if isinstance(exc, KeyboardInterrupt) and from_signal(exc):  # plugin raised fails the run, not the
                raise  # bench; a stop signal's goes on (pllzoo.checkpoint)
            raise hook_failed(slot, impl.plugin, hook, exc) from exc
        finally:
            WRITER.reset(token)

    def _changed(self, before: list[int], slot: str, hook: str) -> None:
        """:raises ComponentError: one line naming what of :attr:`inputs` the hook changed in place (``before``:
        their versions before it)."""
        changed = [name for (name, t), version in zip(self.inputs.items(), before) if t._version != version]
        if changed:
            raise ComponentError(f"{describe(slot, self.components[slot])}: {hook} changed {', '.join(changed)} in "
                                 "place (or a tensor sharing its memory), which other components and the "
                                 "evaluation read; work on a copy (.clone())")

    def _left_changed(self, before: tuple[bool, Any, int], slot: str, hook: str) -> None:
        """:raises ComponentError: one line naming which of torch's process-wide settings (``before``: grad mode,
        default dtype, function modes such as ``set_default_device``'s) the hook left changed; put back first,
        where torch allows, so that nothing after (another run, the report) computes in it."""
        import torch

        grad, dtype, modes = self._globals()
        what = []
        if grad != before[0]:
            torch.set_grad_enabled(before[0])
            what.append(f"grad mode ({'on' if grad else 'off'}; torch.set_grad_enabled)")
        if dtype != before[1]:
            torch.set_default_dtype(before[1])
            what.append(f"default dtype ({dtype}; torch.set_default_dtype)")
        if modes != before[2]:
            pop_modes(before[2])
            what.append("default device or a function mode (torch.set_default_device)")
        raise ComponentError(f"{describe(slot, self.components[slot])}: {hook} left torch's {' and '.join(what)} "
                             "changed for everything after it; change it inside a with-block, or not at all")

    def stages(self, run: Any) -> list[Any] | None:
        """The stage planner's answer, checked: a list of :class:`~pllzoo.run.Stage` (None: no planner, or it
        plans none), each with a str name and ``epochs`` None or an int ≥ 0, the last one not 0.

        :raises ComponentError: anything else, one line naming the planner."""
        from pllzoo.run import Stage

        planned = self.role("stages", run=run)
        if not planned:
            return None
        slot = self.roles["stages"][0]
        bad = None
        if not isinstance(planned, (list, tuple)):
            bad = f"returned a {type(planned).__name__}, not a list of pllzoo.Stage"
        else:
            for s in planned:
                if not isinstance(s, Stage):
                    bad = f"planned a {type(s).__name__} ({s!r:.40}), not a pllzoo.Stage"
                elif not isinstance(s.name, str) or s.epochs is not None and (
                        isinstance(s.epochs, bool) or not isinstance(s.epochs, int) or s.epochs < 0):
                    bad = f"planned stage {s.name!r} with epochs={s.epochs!r}; epochs is None or an int ≥ 0"
                if bad:
                    break
            provided = set().union(*(c.provides for c in self.components.values()))
            for s in planned if bad is None else ():  # a key no component writes is carried as nothing, silently
                if not isinstance(s.carry, (list, tuple, set, frozenset)):  # a str would be carried by its letters
                    bad = (f"planned stage {s.name!r} with carry={s.carry!r}; carry is a tuple of state keys, e.g. "
                           f"({s.carry!r},)")
                    break
                lost = [k for k in s.carry if k not in provided]
                if lost:
                    bad = (f"planned stage {s.name!r} carrying {lost[0]!r}, which no component of the recipe provides"
                           f" (its state keys: {', '.join(sorted(provided)) or 'none'}); carry is a tuple of those")
                    break
            if bad is None and planned and planned[-1].epochs == 0:  # the record of a run is its final stage's
                bad = (f"planned its final stage {planned[-1].name!r} with 0 epochs; a run ends with a stage that "
                       "trains (epochs None: the run's --epochs, or an int ≥ 1)")
        if bad is not None:
            raise ComponentError(f"{describe(slot, self.components[slot])}: pllzoo_stages {bad}")
        return list(planned)

    def all(self, hook: str, registration_order: bool = False, **kwargs: Any) -> list[tuple[str, Any]]:
        out = []
        state = kwargs.get("state")
        for impl in (reversed(self.impls[hook]) if registration_order else self.impls[hook]):
            token = WRITER.set(impl.plugin_name)  # the slot (make_run_manager registers each component so)
            try:
                watched = state.watch(impl.plugin_name) if state is not None else ()
                scratch = _scratch(kwargs)
                noted = scratch.watch(impl.plugin_name) if scratch else ()
                before = list(map(_VERSION, self.inputs.values()))
                settings = self._globals()
                answer = impl.function(*[kwargs[a] for a in impl.argnames])
                if watched:
                    state.check_watched(watched)
                if scratch is not None:
                    _check_scratch(kwargs, scratch, noted)
                if list(map(_VERSION, self.inputs.values())) != before:
                    self._changed(before, impl.plugin_name, hook)
                if self._globals() != settings:
                    self._left_changed(settings, impl.plugin_name, hook)
            except ComponentError:
                raise
            except (Exception, SystemExit, KeyboardInterrupt) as exc:  # as in role()
                if isinstance(exc, KeyboardInterrupt) and from_signal(exc):
                    raise
                raise hook_failed(impl.plugin_name, impl.plugin, hook, exc) from exc
            finally:
                WRITER.reset(token)
            if answer is not None:
                out.append((impl.plugin_name, answer))
        return out
