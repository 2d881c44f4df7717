"""``pllzoo plugins``, ``pllzoo methods``, ``pllzoo datasets``: what is installed.

Each prints a table (:mod:`pllzoo.cli.listing`: never a cut name, on or off a terminal) or, with
``--json``, the same facts for scripts.  Heavy modules are imported inside the commands, so
``pllzoo --help`` stays cheap.
"""

from __future__ import annotations

import json
from typing import Any

import click

from pllzoo.cli import cli, failure_lines, warn_failed_plugins


def _json(obj: Any) -> None:
    """Print ``obj`` as indented JSON (tuples as lists, anything else unknown as its ``str``)."""
    click.echo(json.dumps(obj, indent=2, default=str))


def _plugin_rows(reg, debug: bool = False) -> list[dict]:
    from pllzoo.components import SLOTS
    from pllzoo import model_args
    from pllzoo.docgen import describe_component
    from pllzoo.plugins import plugin_hooks

    rows = []
    for info in reg.plugins:
        comps = {s: sorted(n for n, (_, p) in reg.components[s].items() if p == info.name) for s in SLOTS}
        rows.append({
            "name": info.name, "version": info.version, "dist": info.dist, "module": info.module,
            "builtin": info.builtin, "error": info.error, **({"traceback": info.traceback} if debug else {}),
            "import_s": None if info.import_s is None else round(info.import_s, 3),
            "components": {s: c for s, c in comps.items() if c},
            # per component: the state keys it reads (needs) and writes (provides), views, run hooks
            "component_info": {n: {"slot": s, **describe_component(reg.components[s][n][0])}
                               for s, names in comps.items() for n in names},
            "methods": sorted(n for n, (_, p) in reg.methods.items() if p == info.name),
            "datasets": sorted(n for n, (_, p) in reg.datasets.items() if p == info.name),
            "models": sorted(n for n, (_, p) in reg.models.items() if p == info.name),
            # per backbone: the arguments --hp model.NAME=VALUE sets, with their defaults (pllzoo.model_args)
            "model_args": {n: {a: model_args.render(q.default) for a, q in model_args.parameters(f).items()}
                           for n, (f, p) in sorted(reg.models.items()) if p == info.name},
            "views": sorted(n for n, (_, p) in reg.views.items() if p == info.name),
            "observers": sorted(n for n, (_, p) in reg.observers.items() if p == info.name),
            "hooks": plugin_hooks(reg.pm, info.name),
        })
    return rows


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.option("--debug", is_flag=True, help="Show the full traceback of each plugin that failed (or PLLZOO_DEBUG=1).")
def plugins(as_json: bool, debug: bool) -> None:
    """List plugins with versions, components and recipes (and those that failed to load, one line each)."""
    from pllzoo.cli.listing import show
    from pllzoo.plugins import debug_enabled
    from pllzoo.registry import get_registry

    reg = get_registry()
    debug = debug or debug_enabled()
    rows = _plugin_rows(reg, debug)
    if as_json:
        _json(rows)
        return
    show("pllzoo plugins", ("Plugin", "Version", "Components", "Methods", "Datasets", "Status"), [
        (r["name"], r["version"], "\n".join(f"{s}: {', '.join(c)}" for s, c in r["components"].items()) or "–",
         ", ".join(r["methods"]) or "–", ", ".join(r["datasets"]) or "–", "failed" if r["error"] else "ok")
        for r in rows
    ], styles=("bold",))
    for line in failure_lines(reg, debug):  # plain lines: rich would wrap a long reason over several
        click.echo(line)
    from pllzoo.plugins import SLOW_IMPORT_S

    for info in reg.plugins:
        if (info.import_s or 0) > SLOW_IMPORT_S:
            click.echo(f"plugin {info.origin} takes {info.import_s:.1f} s to import; every pllzoo command that "
                       "loads the plugins pays it (PLLZOO_LOAD_PLUGINS leaves it out)")


def _field_rows(cls: type) -> list[dict[str, Any]]:
    """``field``, ``default``, ``help`` (its range appended) for each field of a hyper-parameter dataclass."""
    from pllzoo.hparams import describe

    return [{"field": f, "default": d, "help": h} for f, d, h in describe(cls)]


def _train_rows() -> list[dict[str, Any]]:
    """The trainer's settings (``--hp train.<field>=value``); ``from_dataset`` marks those a dataset sets."""
    import dataclasses

    from pllzoo.data.base import TrainDefaults
    from pllzoo.run import TrainConfig

    by_dataset = {f.name for f in dataclasses.fields(TrainDefaults)}
    return [{**row, "from_dataset": row["field"] in by_dataset} for row in _field_rows(TrainConfig)]


def _method_rows(reg) -> list[dict[str, Any]]:
    return [{"name": n, "plugin": reg.methods[n][1], "slots": reg.methods[n][0].slots(),
             "hparams": dict(reg.methods[n][0].hparams), "description": reg.methods[n][0].description,
             "citation": reg.methods[n][0].citation} for n in reg.list_methods()]


def _slot_cell(reg, name: str | None) -> str:
    """A recipe's component, marked where no loaded plugin registers it (the recipe cannot run here)."""
    if name is None:
        return "–"
    return name if reg.provided(name) else f"{name} (not loaded)"


def _component_rows(reg) -> list[dict[str, Any]]:
    from pllzoo.components import SLOTS
    from pllzoo.docgen import describe_component

    rows = []
    for s in SLOTS:
        for n, (cls, p) in sorted(reg.components[s].items()):
            fields = _field_rows(cls.HParams)
            varied = _dataset_set(cls, reg)
            for f in fields:
                f["from_dataset"] = f["field"] in varied
            rows.append({"slot": s, "name": n, "plugin": p, "hparams": fields, **describe_component(cls)})
    return rows


def _dataset_set(cls: type, reg) -> set[str]:
    """The fields a registered dataset's defaults set for component ``cls`` (``dataset_defaults``, tried for each
    dataset as images and as tabular rows: the kind is known once loaded).  An outside review: the listing showed
    the dataclass default only (``est_epochs 20``) where a run on CIFAR-10 takes 100."""
    found: set[str] = set()
    for name in reg.datasets:
        for kind in ("image", "tabular"):
            try:
                found |= set(cls.dataset_defaults(name, kind))
            except Exception:  # a plugin's answer for a kind its dataset never has: no field to mark
                continue
    return found


@cli.command()
@click.option("--hparams", "show_hp", is_flag=True,
              help="Also list the trainer's settings (train.*) and every component's hyper-parameters.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON for scripts: a list of methods; with --hparams an object with "
                   "'methods', 'train' and 'components'.")
def methods(show_hp: bool, as_json: bool) -> None:
    """List method recipes and the component in each slot."""
    from pllzoo.cli.listing import show
    from pllzoo.components import SLOTS
    from pllzoo.registry import get_registry

    reg = get_registry()
    warn_failed_plugins(reg)  # to stderr: a method may be missing because of it
    rows = _method_rows(reg)
    if as_json:
        _json({"methods": rows, "train": _train_rows(), "components": _component_rows(reg)} if show_hp else rows)
        return
    show("pllzoo methods (swap a slot: METHOD+slot=component)", ("Method", *SLOTS, "recipe hyper-parameters"), [
        (r["name"], *(_slot_cell(reg, r["slots"][s]) for s in SLOTS),
         " ".join(f"{k}={v}" for k, v in r["hparams"].items()))
        for r in rows
    ], styles=("bold",))
    if not show_hp:
        return
    comps = _component_rows(reg)
    train = [("train", r["field"], f"dataset's, else {r['default']!r}" if r["from_dataset"] else repr(r["default"]),
              r["help"]) for r in _train_rows()]
    show("hyper-parameters (--hp slot.field=value; train.field for the trainer; a default marked dataset's "
         "comes from --dataset, as `pllzoo bench ... --dry-run` shows for a run)", ("Component", "Field", "Default", "Help"),
         train + [(f"{c['slot']} {c['name']}", h["field"],
                   f"dataset's, else {h['default']!r}" if h["from_dataset"] else repr(h["default"]), h["help"])
                  for c in comps for h in c["hparams"]])
    show("state each component reads (needs; reads: when the recipe has it) and writes (provides); inputs it "
         "ignores; views it asks for",
         ("Component", "reads (needs)", "reads when there", "writes (provides)", "ignores", "views"),
         [(f"{c['slot']} {c['name']}", *(", ".join(c[k]) or "–"
                                          for k in ("needs", "reads", "provides", "ignores", "views")))
          for c in comps])


def _dataset_rows(reg) -> list[dict[str, Any]]:
    """Name, plugin, description and what loading it offline needs (``files``) or online fetches (``source``)."""
    return [{"name": n, "plugin": p, "description": spec.description, "needs_files": spec.needs_files,
             "files": list(spec.files), "source": spec.source, "downloads": bool(spec.files) and not spec.needs_files}
            for n, (spec, p) in sorted(reg.datasets.items())]


def _offline(row: dict[str, Any]) -> tuple[str, str]:
    """(what it reads offline, what it does online) in words."""
    if not row["files"]:
        return ("files (its plugin names none)", row["source"] or "–") if row["needs_files"] else ("nothing: generated", "–")
    files = "\n".join(f"{'or ' if i else ''}{f}" for i, f in enumerate(row["files"]))
    if row["downloads"]:
        return files, f"downloads {row['source'] or '(no source given)'} unless --offline"
    return files, f"never downloaded; get it from {row['source']}" if row["source"] else "never downloaded"


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def datasets(as_json: bool) -> None:
    """List datasets (names for --dataset; a path to a .mat file, or imagefolder:PATH, works too) and what each
    needs offline."""
    from pllzoo.cli.listing import show
    from pllzoo.data.paths import default_data_root
    from pllzoo.registry import get_registry

    rows = _dataset_rows(get_registry())
    if as_json:
        _json(rows)
        return
    show(f"pllzoo datasets (files: one of them under --data-dir, else {default_data_root()})",
         ("Dataset", "Offline: reads", "Online", "Description"),
         [(r["name"], *_offline(r), r["description"]) for r in rows], styles=("bold",))
    click.echo("Also: --dataset PATH.mat (a PALM-style .mat file) or --dataset imagefolder:PATH (class sub-folders of "
               "images and a candidate file: docs/extending.md).")
