"""Planning a bench: method strings, hyper-parameter overrides (``--hp``), the data of every seed
and the trainer settings resolved and validated into :class:`RunPlan` objects, before any file is
written (:func:`plan`).  Part of :mod:`pllzoo.bench`, which re-exports these names.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from pllzoo import prefetch
from pllzoo.components import Method, declared_strong_view, parse_method_string, scope_name, views_of
from pllzoo.data.base import DataOptions, PLLData
from pllzoo.augment import make_view
from pllzoo.checks import one_row_error, one_row_fails, one_row_step
from pllzoo.data.holdout import hold_out, subsample
from pllzoo.data.validate import check_loaded, check_training_set
from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.hparams import as_dict, check, named, override
from pllzoo import model_args
from pllzoo.models import available_memory, build_model, memory_floor, model_who
from pllzoo.plugins import one_line
from pllzoo.portable import portable
from pllzoo.observers import ObserverChoice
from pllzoo.registry import Registry
from pllzoo.results import backbone_env, plugins_env, run_id
from pllzoo.run import BOOKKEEPING_FIELDS, HASHED_UNLESS_DEFAULT, TrainConfig
from pllzoo.devices import resolve_device


@dataclass
class RunPlan:
    method: Method
    seed: int
    data: PLLData
    train: TrainConfig
    component_overrides: dict[str, str]
    config: dict[str, Any] = field(default_factory=dict)
    view_workers: int = 0  # processes computing the strong view ahead (pllzoo.prefetch); 0: in the loop
    check: bool = False  # check the components' outputs at every step (pllzoo.checks); never in the run id
    plugins: dict[str, Any] = field(default_factory=dict)  # env.json: plugins, and who supplied each component
    observers: tuple[ObserverChoice, ...] = ()  # --observe: made where the run trains (pllzoo.observers); not in the run id
    methods: tuple[str, ...] = ()  # every method of the bench, in --methods order (all shards'): results.csv's order

    @property
    def run_id(self) -> str:
        return run_id(self.config)


# A dotted key (``train.lr``, ``slot.field``) and its ``=``, at the start or right after a ``METHOD:`` scope.
# Registered names hold no ``=`` (components.check_name), so in a mixed scope (``proden+selection=solar.classwise``)
# every ``=`` follows a slot name after a ``+``: the first match is the key, whatever ``:`` or ``=`` the value holds.
_KEY = re.compile(r"(?:^|:)\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\s*=")


def parse_overrides(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``["a.b=1", "proden+selection=solar.classwise:selection.rho_end=0.5", ...]`` →
    ``{"a.b": "1", "proden+selection=solar.classwise:selection.rho_end": "0.5"}``.

    A pair is ``[METHOD:]key=value``: the key is the first dotted name followed by ``=`` at the
    start or after a ``:`` (so a mixed method string may scope it, and the value may hold ``=`` or
    ``:``); a pair with no dotted key splits at its first ``=`` (the key is then reported unknown by
    :func:`_route`).  A missing ``=`` or an empty key is an error.
    """
    out = {}
    for pair in pairs:
        found = _KEY.search(pair)
        if found:
            scope = scope_name(pair[:found.start()])  # as Registry.method names it
            if not scope and pair[:found.start(1)].strip().startswith(":"):  # ":train.lr=0.1": a scope left empty
                raise PLLZooError(f"bad --hp {pair!r}: nothing before ':'; write METHOD:key=value, or key=value "
                                  "for every method")
            key, value = f"{scope}:{found.group(1)}" if scope else found.group(1), pair[found.end():]
        else:
            key, _, value = pair.partition("=")
        if "=" not in pair or not key.strip():
            raise PLLZooError(f"bad --hp {pair!r}; write key=value, e.g. train.lr=0.05, loss.eta=0.5 or "
                              f"proden:loss.eta=0.5")
        out[key.strip()] = value.strip()
    return out


def _scope(key: str, methods: list[Method]) -> tuple[str | None, str]:
    """Split ``METHOD:rest`` at the longest prefix that is a planned method's name (None: no scope).

    :raises UnknownNameError: a ``:`` scope that names no planned method (one line, listing them).
    """
    names = sorted((m.name for m in methods if key.startswith(m.name + ":")), key=len, reverse=True)
    if names:
        return names[0], key[len(names[0]) + 1:]
    if ":" not in key:
        return None, key
    scope = key.rpartition(":")[0]
    raise UnknownNameError(f"--hp {key}: method {scope!r} is not in --methods; "
                           f"scope one of: {', '.join(m.name for m in methods)}")


def _route(overrides: dict[str, str], methods: list[Method], registry: Registry) -> tuple[dict, dict]:
    """Split overrides into per-method trainer ones (``train.*``; a ``METHOD:`` one for that method alone, over
    the unscoped ones) and per-method component ones; unknown keys are errors."""
    train: dict[str, dict[str, Any]] = {m.name: {} for m in methods}
    per_method: dict[str, dict[str, str]] = {m.name: {} for m in methods}
    backbone: dict[str, dict[str, str]] = {m.name: {} for m in methods}  # model.NAME → train.model_args
    for key, value in sorted(overrides.items(), key=lambda kv: _scope(kv[0], methods)[0] is not None):
        scope, rest = _scope(key, methods)
        if rest == "train.model_args" and isinstance(value, str):  # a replay's typed tuple is taken as it is
            raise PLLZooError(f"--hp {key}: set the backbone's arguments one by one, --hp model.NAME=VALUE")
        if rest.startswith(("train.", "model.")):
            for m in methods:
                if scope is None or m.name == scope:
                    if rest.startswith("model."):
                        backbone[m.name][rest[len("model."):]] = model_args.as_entry(rest[len("model."):], value)
                    else:
                        train[m.name][rest[len("train."):]] = value
            continue
        targets = [m for m in methods if scope is None or m.name == scope]
        takers = [m for m in targets if rest in registry.hparam_keys(m)]
        if not takers:
            valid = sorted(set().union(*(registry.hparam_keys(m) for m in targets)))
            fields = [f"train.{f.name}" for f in dataclasses.fields(TrainConfig) if f.name != "model_args"]
            raise UnknownNameError(f"unknown hyper-parameter {key!r}; valid: {', '.join(valid + fields)}, "
                                   "model.NAME (an argument of the backbone's factory)")
        for m in takers:
            per_method[m.name][rest] = value
    for name, entries in backbone.items():
        if entries:  # over a recorded train.model_args: the given names replace theirs
            recorded = dict(e.partition("=")[::2] for e in train[name].get("model_args", ()))
            train[name]["model_args"] = tuple({**{k: f"{k}={v}" for k, v in recorded.items()}, **entries}.values())
    return train, per_method


def _check_flags_agree(epochs: int | None, batch_size: int | None, hp: dict[str, str]) -> None:
    """``--epochs``/``--batch-size`` and an unscoped ``--hp train.epochs``/``train.batch_size`` that disagree:
    the ``--hp`` value would win silently (a config file's over the flag).  A ``METHOD:`` one is that method's
    own, meant to differ."""
    for name, flag in (("epochs", epochs), ("batch_size", batch_size)):
        given = hp.get(f"train.{name}")
        if flag is not None and given is not None and getattr(
                override(TrainConfig(), {name: given}, where="train"), name) != flag:
            raise PLLZooError(f"--{name.replace('_', '-')} {flag} and --hp train.{name}={given} disagree; give one")


# the schedule fields each LR schedule reads (pllzoo.schedule.lr_at)
SCHEDULE_FIELDS = {"milestones": ("step",), "lr_decay": ("step",), "cosine_min_factor": ("cosine",)}


def _check_schedule_reads(before: TrainConfig, cfg: TrainConfig) -> None:
    """Warn of a schedule field set otherwise than the dataset's default (``before`` → ``cfg``) that the run's
    schedule does not read, and of a step schedule set with no milestones: each is recorded and names another run,
    which trains exactly as the run without it (an outside review: ``train.milestones`` under synthetic-lt's cosine
    decay, silently).  A warning, not a refusal: a replay of a run recorded so, or a sweep drawing the schedule
    beside fixed milestones, must still plan (a second review)."""
    for name, schedules in SCHEDULE_FIELDS.items():
        if getattr(cfg, name) != getattr(before, name) and cfg.schedule not in schedules:
            warnings.warn(f"train.{name} is read by the {' or '.join(schedules)} schedule only, and this run's is "
                          f"{cfg.schedule}: it changes the run id and nothing else (train.schedule="
                          f"{schedules[0]} uses it)", stacklevel=2)
    if cfg.schedule == "step" and not cfg.milestones and (cfg.schedule, cfg.milestones) != (before.schedule,
                                                                                         before.milestones):
        warnings.warn("train.schedule=step with no train.milestones keeps the LR constant (give "
                      "train.milestones=E1,E2,..., or train.schedule=constant)", stacklevel=2)


def train_config(data: PLLData, epochs: int | None, batch_size: int | None, overrides: dict[str, str],
                 registry: Registry | None = None) -> TrainConfig:
    """The trainer settings: the dataset's defaults, then ``--epochs``/``--batch-size``, then ``--hp train.*``.

    :raises UnknownNameError: ``train.model`` is no registered backbone (``registry``; None: the process-wide one).
    """
    d = data.defaults
    cfg = TrainConfig(**_typed_defaults(getattr(data, "name", "?"), {
        "model": d.model, "epochs": d.epochs, "lr": d.lr, "weight_decay": d.weight_decay, "momentum": d.momentum,
        "batch_size": d.batch_size, "schedule": d.schedule, "milestones": d.milestones}))
    flags = {k: v for k, v in {"epochs": epochs, "batch_size": batch_size}.items() if v is not None}
    before = cfg
    cfg = check(override(cfg, {**flags, **overrides}, where="train"), "train")  # the dataset's defaults too
    _check_schedule_reads(before, cfg)
    if registry is None:
        from pllzoo.registry import get_registry

        registry = get_registry()
    factory = registry.model(cfg.model, "train.model")  # before any run starts, not as a failed run
    if cfg.model_args:  # parsed by the factory's signature, recorded as one text per run (pllzoo.model_args)
        cfg = dataclasses.replace(cfg, model_args=model_args.canonical(model_who(registry, cfg.model), factory,
                                                                       cfg.model_args))
    return cfg


def _typed_defaults(dataset: str, values: dict[str, Any]) -> dict[str, Any]:
    """A dataset's training defaults with :class:`TrainConfig`'s types, as ``--hp`` gives them
    (:func:`pllzoo.hparams.typed_value`: an int for a float is that float, an outside review: ``lr=1`` named another
    run than ``--hp train.lr=1``); another type is one line (``epochs=2.0`` failed every run, late)."""
    from pllzoo.hparams import WrongType, typed_value

    kinds = {f.name: f for f in dataclasses.fields(TrainConfig)}
    out = {}
    for name, value in values.items():
        try:
            out[name] = typed_value(kinds[name], value, kinds[name].default)
        except WrongType as exc:
            raise PLLZooError(f"dataset {dataset!r}: its training default {name} = {value!r} is "
                              f"{type(value).__name__}; train.{name} takes {'a tuple of ' if exc.many else ''}"
                              f"{exc.kind}") from None
    return out


# On a GPU the PIL views (one sample at a time, on the host) are replaced by their batched tensor twins
# (pllzoo.augment_batched), unless the run names a view explicitly with --hp train.weak_view/strong_view.
DEVICE_VIEWS = {"strong": "strong-batched", "simaugment": "simaugment-batched", "pico-strong": "pico-strong-batched"}


def own_view(cfg: TrainConfig, declared: str | None, explicit: dict[str, str]) -> TrainConfig:
    """``cfg`` with the strong view the method's components declare, unless ``--hp train.strong_view`` names one
    (image data only: no view is made of tabular rows, and their runs keep their ids)."""
    if declared is None or "strong_view" in explicit:
        return cfg
    return dataclasses.replace(cfg, strong_view=declared)


def device_views(cfg: TrainConfig, device: str, explicit: dict[str, str]) -> TrainConfig:
    """``cfg`` with each PIL view not set in ``explicit`` swapped for its batched twin when ``device`` is not the CPU."""
    if device == "cpu":
        return cfg
    swap = {f: DEVICE_VIEWS[getattr(cfg, f)] for f in ("weak_view", "strong_view")
            if f not in explicit and getattr(cfg, f) in DEVICE_VIEWS}
    return dataclasses.replace(cfg, **swap)


def hashed_train(cfg: TrainConfig) -> dict[str, Any]:
    """The trainer settings that name a run: all but the bookkeeping ones, and the later additions at their defaults."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    return {k: v for k, v in as_dict(cfg).items()
            if k not in BOOKKEEPING_FIELDS and not (k in HASHED_UNLESS_DEFAULT and v == defaults[k])}


#: the DataOptions a loader may leave unread, with their "not given" values and their flags
_DATA_FLAGS = {"phi": (None, "--phi"), "imb": (None, "--imb"), "imb_type": (None, "--imb-type"),
               "split": ("uniform", "--split")}


def check_reads(spec: Any, options: DataOptions) -> None:
    """Refuse a data option the dataset does not read (``DatasetSpec.reads``): ``--phi 0.3`` on Lost would be
    recorded, named in every table and change the run id, while the candidates stay Lost's own.

    :raises PLLZooError: one line naming the flag and what the dataset reads."""
    reads = getattr(spec, "reads", None)
    if reads is None:
        return
    for field_name, (unset, flag) in _DATA_FLAGS.items():
        if field_name not in reads and getattr(options, field_name) != unset:
            takes = ", ".join(_DATA_FLAGS[f][1] for f in _DATA_FLAGS if f in reads) or "none of them"
            raise PLLZooError(f"{flag} does not apply to {spec.name} (of these options it reads {takes}); "
                              f"leave {flag} out")


def load(registry: Registry, name: str, spec: Any, options: DataOptions) -> PLLData:
    """``spec.load(options)``; a dataset of an outside plugin is checked as the shipped loaders check theirs
    (:func:`pllzoo.data.validate.check_loaded`), and an exception of its loader is one line naming it."""
    plugin = registry.datasets[name][1] if name in registry.datasets else None
    outside = plugin is not None and not registry.plugin_info(plugin).shipped
    try:
        data = spec.load(options)
    except PLLZooError:
        raise
    except (Exception, SystemExit) as exc:
        if not outside:
            raise
        raise PLLZooError(f"dataset {name!r} (plugin {plugin}) failed to load: {one_line(exc)}") from exc
    if outside:
        check_loaded(data, f"dataset {name!r} (plugin {plugin})")
        if data.name != name:  # the registered name is the one records keep: evaluate and --from-run find the
            # dataset by it (an outside review: runs recorded under the loader's own name could not be re-scored)
            data = dataclasses.replace(data, name=name)
    return data


def carve(data: PLLData, options: DataOptions, seed: int) -> PLLData:
    """Apply the loader-independent options: ``subset`` (smoke runs), then ``holdout``."""
    if options.subset is not None:
        data = subsample(data, options.subset, seed)
    if options.holdout:
        data = hold_out(data, options.holdout, seed)
    return data


def check_batches(plans: list[RunPlan], registry: Registry | None = None) -> None:
    """Refuse, before any run trains (``pllzoo bench``; planning alone allows it, and a sweep's trial that draws
    such a batch fails as a trial), a batch larger than the training set when the partial batch is dropped (no
    step would run, and each run would fail), and a step of one row that a BatchNorm of the backbone refuses (each run
    would fail at its first such step: an outside review saw six methods train, then fail, and ``--dry-run``
    pass, at ``--subset 257`` with ``train.drop_last=false``).

    :raises PLLZooError: one line naming the first such run.
    """
    norms: dict[tuple, bool] = {}
    for p in plans:
        n, bs = p.data.num_train, p.train.batch_size
        if p.train.drop_last and bs > n:
            raise PLLZooError(f"batch size {bs} exceeds the {n} training rows of {p.data.name} ({p.method.name}) and "
                              "an epoch drops its last partial batch (train.drop_last), so no step would run; "
                              "lower --batch-size, or keep more rows (--subset, --holdout)")
        if one_row_step(bs, n, p.train.drop_last):
            key = (p.train.model, p.data.num_classes, tuple(p.data.x_train.shape[1:]), p.train.model_args)
            if key not in norms:  # built as check_model built it (it could), torch's global RNG left as it was
                with torch.random.fork_rng(devices=[]):
                    norms[key] = one_row_fails(build_model(key[0], key[1], key[2], registry, key[3]), key[2])
            if norms[key]:
                raise PLLZooError(f"{p.method.name} on {p.data.name}: {one_row_error(bs, n, p.train.model)}")


SEED_LIMIT = 2**32  # numpy's RandomState (the data splits and candidates) takes seeds below it


def check_seeds(seeds: list[int]) -> list[int]:
    """``seeds`` once each, in order (a repeat is dropped with a one-line warning).

    :raises PLLZooError: a seed outside ``0 .. 2**32 - 1`` (one line).
    """
    bad = [s for s in seeds if not 0 <= s < SEED_LIMIT]
    if bad:
        raise PLLZooError(f"--seeds {bad[0]} is out of range; seeds are integers from 0 to {SEED_LIMIT - 1}")
    return _once(seeds, lambda s: s, "--seeds", "seed")


def _once(items: list, key: Callable[[Any], Any], flag: str, what: str) -> list:
    """``items`` without repeats (by ``key``), first occurrence kept; one warning names the repeats.

    A repeat would train the same run id twice into the same folder, so it runs once.
    """
    kept, seen, repeated = [], set(), []
    for i in items:
        if key(i) not in seen:
            kept.append(i)
        elif key(i) not in repeated:
            repeated.append(key(i))
        seen.add(key(i))
    if repeated:
        warnings.warn(f"{flag} lists {what} {', '.join(map(str, repeated))} more than once; each runs once",
                      stacklevel=3)
    return kept


def _say_same_recipes(registry: Registry, names: list[str], hp: dict[str, str]) -> None:
    """Warn about method strings that train what another name does: a swap naming the recipe's own component
    (``solar+selection=solar.classwise`` is ``solar``), and two strings of one bench with the same swaps in
    another order (without ``--hp`` scoped to either).  Each still trains, under its own name and run id."""
    scoped = {k.rpartition(":")[0] for k in hp if ":" in k}
    seen: dict[tuple[str, frozenset], str] = {}
    for text in names:
        base, swaps = parse_method_string(text)
        own = registry.methods[base][0]
        same = [f"{s}={c or 'none'}" for s, c in swaps.items() if c == getattr(own, s)]
        if same:  # what it trains as: the base, or the base with its other swaps (an outside review)
            rest = "+".join(f"{s}={c or 'none'}" for s, c in swaps.items() if c != getattr(own, s))
            warnings.warn(f"{text}: {', '.join(same)} {'is' if len(same) == 1 else 'are'} the recipe's own; it "
                          f"trains as {f'{base}+{rest}' if rest else repr(base)} does, under its own name and run id",
                          stacklevel=3)
        key = (base, frozenset((s, c) for s, c in swaps.items() if c != getattr(own, s)))
        other = seen.setdefault(key, text)
        if other != text and not {text, other} & scoped:
            warnings.warn(f"{text} and {other} are the same recipe; each trains, under its own name and run id",
                          stacklevel=3)


def plan(
    registry: Registry, methods: list[str], dataset: str, seeds: list[int], options: DataOptions,
    epochs: int | None = None, batch_size: int | None = None, hp: dict[str, str] | None = None,
    device: str = "auto", view_workers: int | None = None, check: bool = False,
    shard: tuple[int, int] | None = None,
) -> list[RunPlan]:
    """The runs of ``methods`` × ``seeds`` (seed-major), checked before any trains.

    ``shard=(i, n)`` keeps the i-th of n disjoint parts of that grid (1 ≤ i ≤ n): the runs at grid
    positions p with p mod n = i − 1, so the n shards together are the grid and any scheduler can run
    them apart (:func:`parse_shard`); a seed without a run in the shard is not loaded.
    """
    if not methods:
        raise PLLZooError("no method given; try --methods proden")
    if not seeds:
        raise PLLZooError("no seed given; try --seeds 1,2,3")
    seeds = check_seeds(seeds)
    recipes = _once([registry.method(m) for m in methods], lambda r: r.name, "--methods", "method")
    _say_same_recipes(registry, [r.name for r in recipes], hp or {})
    spec = registry.dataset(dataset)
    check_reads(spec, options)
    _check_flags_agree(epochs, batch_size, hp or {})
    train_hp, per_method = _route(hp or {}, recipes, registry)
    declared = {}  # method → the strong view its components declare (Component.strong_view), or None
    for recipe in recipes:  # instantiate once now: bad values and incompatible mixes fail here
        declared[recipe.name] = declared_strong_view(recipe.name, registry.build_components(recipe,
                                                                                          per_method[recipe.name]))
    resolved_device = str(resolve_device(device))
    workers = prefetch.resolve_workers(view_workers, resolved_device)
    plans, built = [], set()
    plugins = {recipe.name: plugins_env(registry, recipe) for recipe in recipes}
    for si, seed in enumerate(seeds):
        picked = [r for ri, r in enumerate(recipes)
                  if shard is None or (si * len(recipes) + ri) % shard[1] == shard[0] - 1]
        if not picked:
            continue
        data = carve(load(registry, dataset, spec, dataclasses.replace(options, seed=seed)), options, seed)
        cfgs = {}
        for r in picked:
            try:
                cfg = train_config(data, epochs, batch_size, train_hp[r.name], registry)
            except UnknownNameError as exc:  # a backbone argument one method's backbone lacks: name the method
                if len(recipes) == 1 or "--hp model." not in str(exc):
                    raise
                raise UnknownNameError(f"{r.name}: {exc}; give it for the others only, --hp OTHER:model.NAME=VALUE"
                                       ) from None
            cfgs[r.name] = device_views(own_view(cfg, declared[r.name] if data.kind == "image" else None,
                                                 train_hp[r.name]),
                                        resolved_device if data.kind == "image" else "cpu",  # no views to swap on
                                        train_hp[r.name])  # tabular rows (a config naming none)
        for cfg in cfgs.values():
            for f in ("weak_view", "strong_view"):  # on tabular data too, where the trainer never builds them
                make_view(getattr(cfg, f), f"train.{f}", registry)
            check_model(registry, cfg.model, cfg.model_args, data, built, cfg.batch_size, resolved_device)
        check_training_set(data)  # after the checks of the flags: a warning here would precede their error
        for recipe in picked:
            cfg = cfgs[recipe.name]
            comps = registry.build_components(recipe, per_method[recipe.name], (data.name, data.kind))
            config = portable({  # no machine paths: the same run has the same id everywhere (pllzoo.migrate)
                "method": recipe.name, "dataset": data.name, "seed": seed, "device": resolved_device,
                "recipe": {s: c.name for s, c in comps.items()},
                "hparams": {s: named(c.hp) for s, c in comps.items()},  # hparams.named: later additions
                "train": hashed_train(cfg),  # see module doc
                "data": {**as_dict(options), "seed": seed, **data.info, "train_counts": data.train_counts.tolist()},
            })
            pooled = workers if prefetch.uses_pool(data.kind, views_of(comps), registry.view(cfg.strong_view)) else 0
            if pooled:  # another random stream (pllzoo.prefetch); absent otherwise, so older run ids stand
                config["view_stream"] = "pooled"
            if resolved_device != "cpu":  # views and permutations drawn on the device (Trainer.generators)
                config["rng"] = "device"
            plans.append(RunPlan(recipe, seed, data, cfg, per_method[recipe.name], config, pooled, check,
                                 {**plugins[recipe.name], **backbone_env(registry, cfg, dataset)},
                                 methods=tuple(r.name for r in recipes)))
    if view_workers and plans and not any(p.view_workers for p in plans):  # asked for, and it would do nothing
        warnings.warn(f"--view-workers {view_workers}: no planned run computes a strong view per sample (image data, "
                      "a component asking for the strong view, a view marked pllzoo.augment.pooled), so it changes "
                      "nothing", stacklevel=2)
    return plans


def check_model(registry: Registry, name: str, args: tuple[str, ...], data: PLLData, built: set[tuple],
                batch_size: int = 2, device: str = "cpu") -> None:
    """Build backbone ``name`` with its ``args`` for ``data`` once (``built``: what was built already), so that a
    factory that cannot build it (its one line, :func:`pllzoo.models.build_model`) refuses the bench before any run
    starts; torch's global RNG is left as it was (every stage seeds it before its own build).

    With ``args`` (sizes of one's own) it is first measured on torch's meta device
    (:func:`pllzoo.models.memory_floor`): where even a lower bound on what this build (its parameters and one
    module's output for the check's 2 rows) or, on ``device`` cpu, a training step (parameters, gradients and
    momentum, one module's output for ``batch_size`` rows) needs exceeds the host memory available now, it is
    refused in one line before anything is allocated (an outside review: the kernel killed the process, and
    could have killed any other, without a word)."""
    key = (name, data.num_classes, tuple(data.x_train.shape[1:]), args)
    floor = memory_floor(name, data.num_classes, key[2], registry, args) if args else None
    have = available_memory() if floor is not None else None
    if floor is not None and have is not None:
        held, per_row = floor
        need = max(held + 2 * per_row, 3 * held + batch_size * per_row if device == "cpu" else 0)
        if need > have:
            raise PLLZooError(f"{model_who(registry, name)} with {', '.join(args)} needs at least {need / 2**30:.1f} "
                              f"GiB ({held / 2**30:.2f} GiB of parameters, one layer's output of "
                              f"{per_row / 2**20:.1f} MiB a row), more than the {have / 2**30:.1f} GiB of memory "
                              "available here; give it smaller sizes")
    if key in built:
        return
    with torch.random.fork_rng(devices=[]):
        build_model(name, data.num_classes, key[2], registry, args)
    built.add(key)


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` → ``(i, n)`` with 1 ≤ i ≤ n (``--shard``); anything else is one line saying how to write it."""
    head, slash, tail = text.strip().partition("/")
    try:
        i, n = int(head), int(tail)
    except ValueError:
        raise PLLZooError(f"{text!r}: write i/n, the i-th of n parts, e.g. --shard 1/4") from None
    if not slash or n < 1 or not 1 <= i <= n:
        raise PLLZooError(f"{text!r}: i must be in 1..n and n ≥ 1, e.g. --shard 1/4 … --shard 4/4")
    return i, n
