"""``pllzoo plugins``, ``pllzoo methods``, ``pllzoo datasets``: what is installed."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from pllzoo.cli import cli
from pllzoo.components import SLOTS
from pllzoo.hparams import describe
from pllzoo.cli import failure_lines
from pllzoo.plugins import DEBUG_ENV, debug_enabled, plugin_hooks


def get_registry():
    """:func:`pllzoo.registry.get_registry`, imported when a listing runs: ``--help`` loads no torch."""
    from pllzoo.registry import get_registry as registry

    return registry()


def describe_component(cls) -> dict:
    """:func:`pllzoo.docgen.describe_component`, imported when a listing runs (docgen imports torch)."""
    from pllzoo.docgen import describe_component as describe_

    return describe_(cls)


def _plugin_rows(reg, debug: bool = False) -> list[dict]:
    rows = []
    for info in reg.plugins:
        comps = {s: sorted(n for n, (_, p) in reg.components[s].items() if p == info.name) for s in SLOTS}
        rows.append({
            "name": info.name, "version": info.version, "dist": info.dist, "module": info.module,
            "builtin": info.builtin, "error": info.error, **({"traceback": info.traceback} if debug else {}),
            "components": {s: c for s, c in comps.items() if c},
            # per component: the state keys it reads (needs) and writes (provides), views, run hooks
            "component_info": {n: {"slot": s, **describe_component(reg.components[s][n][0])}
                               for s, names in comps.items() for n in names},
            "methods": sorted(n for n, (_, p) in reg.methods.items() if p == info.name),
            "datasets": sorted(n for n, (_, p) in reg.datasets.items() if p == info.name),
            "hooks": plugin_hooks(reg.pm, info.name),
        })
    return rows


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.option("--debug", is_flag=True, help=f"Show the full traceback of each plugin that failed (or {DEBUG_ENV}=1).")
def plugins(as_json: bool, debug: bool) -> None:
    """List plugins with versions, components and recipes (and those that failed to load, one line each)."""
    reg = get_registry()
    debug = debug or debug_enabled()
    rows = _plugin_rows(reg, debug)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    t = Table(title="pllzoo plugins")
    for col in ("Plugin", "Version", "Components", "Methods", "Status"):
        t.add_column(col)
    for r in rows:
        comps = "\n".join(f"{s}: {', '.join(c)}" for s, c in r["components"].items())
        t.add_row(r["name"], r["version"], comps, ", ".join(r["methods"]), "[red]failed[/red]" if r["error"] else "ok")
    Console().print(t)
    for line in failure_lines(reg, debug):  # plain lines: rich would wrap a long reason over several
        click.echo(line)


@cli.command()
@click.option("--hparams", "show_hp", is_flag=True, help="Also list every component's hyper-parameters.")
def methods(show_hp: bool) -> None:
    """List method recipes and the component in each slot."""
    reg = get_registry()
    t = Table(title="pllzoo methods (swap a slot: METHOD+slot=component)")
    t.add_column("Method", style="bold")
    for s in SLOTS:
        t.add_column(s)
    t.add_column("recipe hyper-parameters")
    for name in reg.list_methods():
        m = reg.methods[name][0]
        t.add_row(name, *(m.slots()[s] or "–" for s in SLOTS), " ".join(f"{k}={v}" for k, v in m.hparams.items()))
    Console().print(t)
    if show_hp:
        h = Table(title="hyper-parameters (--hp slot.field=value)")
        for col in ("Component", "Field", "Default", "Help"):
            h.add_column(col)
        for s in SLOTS:
            for name, (cls, _) in sorted(reg.components[s].items()):
                for field, default, help_ in describe(cls.HParams):
                    h.add_row(f"{s} {name}", field, repr(default), help_)
        Console().print(h)
        io = Table(title="state each component reads (needs) and writes (provides); views it asks for")
        for col in ("Component", "reads (needs)", "writes (provides)", "views"):
            io.add_column(col)
        for s in SLOTS:
            for name, (cls, _) in sorted(reg.components[s].items()):
                d = describe_component(cls)
                io.add_row(f"{s} {name}", *(", ".join(d[k]) or "–" for k in ("needs", "provides", "views")))
        Console().print(io)


@cli.command()
def datasets() -> None:
    """List datasets (names for --dataset; a path to a .mat file works too)."""
    reg = get_registry()
    t = Table(title="pllzoo datasets")
    for col in ("Dataset", "Needs files", "Description"):
        t.add_column(col)
    for name, (spec, _) in sorted(reg.datasets.items()):
        t.add_row(name, "yes" if spec.needs_files else "no", spec.description)
    Console().print(t)
