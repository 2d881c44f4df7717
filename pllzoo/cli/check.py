"""``pllzoo check``: put recipes through the contract a bench relies on (:mod:`pllzoo.conformance`)."""

from __future__ import annotations

import json

import click

from pllzoo.cli import cli, warn_failed_plugins
from pllzoo.errors import PLLZooError

_MARK = {"ok": "ok", "fail": "FAIL", "skip": "skip"}


@cli.command()
@click.argument("methods")
@click.option("--hp", "hps", multiple=True,
              help="Override a component's hyper-parameter: slot.field=value or METHOD:slot.field=value (as in "
                   "pllzoo bench; the trainer settings are the check's own).")
@click.option("--data", type=click.Choice(["tabular", "images", "both"]), default="tabular", show_default=True,
              help="The tiny problem to train on: tabular (a linear model, seconds) or images (random 32x32 images, a "
                   "small CNN, the strong view and mixup).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def check(methods: str, hps: tuple[str, ...], data: str, as_json: bool) -> None:
    """Check each of METHODS (comma-separated method strings: a plugin's recipe, or a mix such as
    proden+selection=solar.classwise) on a tiny generated problem, on the CPU with one thread: it trains with
    finite losses, a second run with the same seed is the same bit for bit, a run stopped after an epoch and
    resumed equals the uninterrupted one, its loss honours the selection's mask and reads the label update's
    targets unless it declares it ignores them (README, "Writing a plugin").  Exit 1 when a check fails."""
    from pllzoo import conformance
    from pllzoo.cli.listing import show
    from pllzoo.planning import _route, parse_overrides
    from pllzoo.registry import get_registry
    from pllzoo.threads import set_threads

    reg = get_registry()
    warn_failed_plugins(reg)
    names = list(dict.fromkeys(m.strip() for m in methods.split(",") if m.strip()))
    if not names:
        raise PLLZooError("no method given; e.g. pllzoo check proden or pllzoo check proden,cc")
    recipes = [reg.method(n) for n in names]
    train, per_method = _route(parse_overrides(hps), recipes, reg)
    given = sorted({k for t in train.values() for k in t})
    if given:
        raise PLLZooError(f"--hp train.{given[0]}: the check trains with its own settings (a tiny problem, "
                          f"{conformance.EPOCHS} epochs); give component hyper-parameters only")
    set_threads(1)  # bit-for-bit comparisons
    problems = ["tabular", "images"] if data == "both" else [data]
    checkers = [(r, p, conformance.Checker(reg, r, per_method[r.name], p)) for r in recipes for p in problems]
    rows, failed = [], False
    for recipe, problem, checker in checkers:  # every recipe built (and refused) before the first is trained
        for f in conformance.check(checker):
            failed |= f.status == "fail"
            rows.append({"method": recipe.name, "data": problem, "check": f.check, "status": f.status,
                         "detail": f.detail})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        show("pllzoo check", ["Method", "Data", "Check", "Result", "Detail"],
             [[r["method"], r["data"], r["check"], _MARK[r["status"]], r["detail"]] for r in rows],
             ["bold", "", "", "", ""])
    if failed:
        click.get_current_context().exit(1)
