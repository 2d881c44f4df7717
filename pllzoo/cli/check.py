"""``pllzoo check``: put recipes through the contract a bench relies on (:mod:`pllzoo.conformance`)."""

from __future__ import annotations

import json

import click

from pllzoo.cli import cli, complete, warn_failed_plugins
from pllzoo.errors import PLLZooError, UnknownNameError, UsageError

_MARK = {"ok": "ok", "fail": "FAIL", "skip": "skip"}


@cli.command()
@click.argument("methods", shell_complete=complete.methods)
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
    targets unless it declares it ignores them (README, "Writing a plugin").  Exit 1 when a check fails, 2 when
    METHODS or --hp are refused before any training."""
    import torch

    from pllzoo import checkpoint, conformance
    from pllzoo.isolation import plugin_code
    from pllzoo.cli.listing import show
    from pllzoo.planning import parse_overrides
    from pllzoo.registry import get_registry
    from pllzoo.threads import set_threads

    reg = get_registry()
    warn_failed_plugins(reg)
    try:  # a refusal (a name, a value, a mix) is exit 2, a failed check exit 1: a plugin's CI tells them apart
        names = list(dict.fromkeys(m.strip() for m in methods.split(",") if m.strip()))
        if not names:
            raise PLLZooError("no method given; e.g. pllzoo check proden or pllzoo check proden,cc")
        recipes = [reg.method(n) for n in names]
        per_method = _overrides(reg, recipes, parse_overrides(hps), conformance.EPOCHS)
        problems = ["tabular", "images"] if data == "both" else [data]
        checkers = [(r, p, conformance.Checker(reg, r, per_method[r.name], p)) for r in recipes for p in problems]
    except PLLZooError as exc:
        raise UsageError(str(exc)) from None
    rows, failed, stopped = [], False, None
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    set_threads(1)  # bit-for-bit comparisons
    try:  # one stop-signal window for every run (a signal between two runs was lost, an outside review), and
        # torch's settings as they were afterwards (a component's constructor may change them)
        with checkpoint.stop_signals(), plugin_code():
            for recipe, problem, checker in checkers:  # every recipe built (and refused) before the first trains
                found: list = []
                try:
                    conformance.check(checker, found=found)
                finally:  # a stop: the verdicts so far stand
                    for f in found:
                        failed |= f.status == "fail"
                        rows.append({"method": recipe.name, "data": problem, "check": f.check, "status": f.status,
                                     "detail": f.detail})
    except (checkpoint.Stopped, checkpoint.Abandoned) as exc:  # Ctrl-C, SIGTERM: no verdict on the recipe
        stopped = exc
    finally:
        torch.set_num_threads(threads)  # in-process callers keep theirs
        torch.set_rng_state(rng)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        show("pllzoo check", ["Method", "Data", "Check", "Result", "Detail"],
             [[r["method"], r["data"], r["check"], _MARK[r["status"]], r["detail"]] for r in rows],
             ["bold", "", "", "", ""])
    if stopped is not None:  # the verdicts above are whole; the rest did not run
        click.echo(f"Error: pllzoo check stopped ({stopped}); the checks listed are complete, the others did not "
                   "run", err=True)
        click.get_current_context().exit(stopped.exit_code)
    if failed:
        click.get_current_context().exit(1)


def _overrides(reg, recipes, pairs: dict[str, str], epochs: int) -> dict[str, dict[str, str]]:
    """``--hp`` by method: ``[METHOD:]slot.field`` keys of the recipes' components only (the trainer settings are
    the check's own, so ``train.*`` keys are neither taken nor listed)."""
    from pllzoo.planning import _scope

    per_method: dict[str, dict[str, str]] = {r.name: {} for r in recipes}
    for key, value in sorted(pairs.items(), key=lambda kv: ":" in kv[0]):  # a scoped one over the others
        try:
            scope, rest = _scope(key, recipes)
        except UnknownNameError as exc:
            raise UnknownNameError(str(exc).replace("is not in --methods", "is not one of METHODS")) from None
        if rest.startswith(("train.", "model.")):
            raise PLLZooError(f"--hp {key}: the check trains with its own settings (a tiny problem, {epochs} "
                              "epochs); give component hyper-parameters only")
        targets = [r for r in recipes if scope is None or r.name == scope]
        takers = [r for r in targets if rest in reg.hparam_keys(r)]
        if not takers:
            valid = sorted(set().union(*(reg.hparam_keys(r) for r in targets)))
            raise UnknownNameError(f"unknown hyper-parameter {key!r}; valid: {', '.join(valid) or 'none'}")
        for r in takers:
            per_method[r.name][rest] = value
    return per_method
