"""Comparison tables from run records: mean ± std over seeds, rendered as rich, Markdown or CSV.

A :class:`Report` is plain data (title, headers, cells, caption), built by

* :func:`long_reports` — one table per setting, All / Many / Medium / Few per method (the shape
  of the paper's Table 2);
* :func:`wide_report` — one metric, methods × settings, with the paper's numbers beside ours
  when a paper file gives them (the shape of the paper's Tables 1 and the real-world table);

and rendered by :func:`to_rich` / :func:`to_markdown`.  Every caption states the model-selection
rule, what "±" is and the shot grouping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

import pandas as pd
from rich.table import Table

from pllzoo import shots
from pllzoo.errors import PLLZooError
from pllzoo.model_selection import CAPTIONS, select_epochs
from pllzoo.results import ACC_COLUMNS, LABEL_COLUMNS, order_methods, summarise, summarised

SPREAD = "Mean ± sample std over n seeds (one seed: the value alone)"
HEADERS = {"acc_all": "All", "acc_many": "Many", "acc_medium": "Medium", "acc_few": "Few"}
LABEL_HEADERS = {"label_acc": "Training-label", "label_acc_many": "Training-label Many",
                 "label_acc_medium": "Training-label Medium", "label_acc_few": "Training-label Few"}
LABEL_NOTE = ("Training-label accuracy: how often a method's targets were largest at the hidden true label (a tie "
              "counting its share) over the training rows of the selected epoch; logged by methods with a label "
              "update of their own; – where none of a cell's runs logged it (no label update of its own, runs "
              "recorded before pllzoo kept it, or no training rows of the group) or a method has no run in a "
              "setting")


@dataclass
class Report:
    title: str
    headers: list[str]
    rows: list[list[str]]
    caption: str


def fmt(mean: float | None, std: float | None) -> str:
    """``mean ± std`` with two decimals; ``mean`` alone when std is undefined (one seed); ``–`` for none."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return two_places(mean)
    return f"{two_places(mean)} ± {two_places(std)}"


def two_places(x: float) -> str:
    """``x`` to two decimals, a half rounded away from zero, as read off the decimal value ``x`` stands for.

    A mean computed in binary lands a hair beside a half ((31.37 + 30.56) / 2 is 30.964999…), and ``f"{x:.2f}"``
    would round it by that hair, down here and up there; reading ``x`` to nine decimals first removes the hair.
    A value that rounds to zero prints unsigned (a paired difference that sums to exactly zero is -1e-15 in floats).
    """
    x = float(x)
    if not math.isfinite(x) or abs(x) >= 1e15:  # no half to mend there (and past 1e26 more digits than Decimal's 28)
        return f"{x:.2f}"
    d = Decimal(f"{x:.9f}").quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"{abs(d) if d == 0 else d:.2f}"


def shot_caption(train_counts: list[tuple[int, ...]]) -> str:
    """The shot-grouping rule; thresholds when every run of the setting shares its training counts."""
    distinct = {tuple(c) for c in train_counts if c}
    if len(distinct) == 1:
        return shots.caption_of(next(iter(distinct)))
    k = len(next(iter(distinct))) if distinct else 0
    return (f"Many / Few: about the {k // 3} classes with the most / fewest training examples of each run, "
            "Medium: the rest (SoLar's code's thresholds on each run's own counts, which differ between seeds)")


def caption(rule: str, train_counts: list[tuple[int, ...]] | None = None) -> str:
    """Model-selection rule, what ± means, and (for shot columns) the grouping."""
    parts = [CAPTIONS[rule], SPREAD]
    if train_counts is not None:
        parts.append(shot_caption(train_counts))
    return ". ".join(parts) + "."


def summary(records: pd.DataFrame, rule: str = "last", methods: list[str] | None = None, extra: tuple[str, ...] = ()
            ) -> pd.DataFrame:
    """Per (setting, method): accuracy means, sample stds and n, epochs picked by ``rule``.

    Settings keep their first-seen order (the order of the results folders); ``methods`` keeps
    only those, in that order; otherwise methods are sorted by name.
    """
    if records.empty:  # e.g. a bench whose every run failed: the columns of a summary with runs (an outside review)
        stats = [f"{c}_{k}" for k in ("mean", "std") for c in ACC_COLUMNS]
        return pd.DataFrame(columns=["setting", "method", *stats, "n", *(f"{c}_count" for c in ACC_COLUMNS),
                                     "train_counts", "epochs"])
    chosen = select_epochs(records, rule)
    order = methods or sorted(set(chosen["method"]))
    chosen = order_methods(chosen[chosen["method"].isin(order)], order)
    settings = {s: i for i, s in enumerate(dict.fromkeys(records["setting"]))}
    chosen = chosen.sort_values("setting", key=lambda c: c.map(settings), kind="stable")
    out = counted(chosen, by=("setting", "method"), extra=extra)
    counts = chosen.groupby(["setting", "method"], sort=False)["train_counts"].agg(list)
    out = out.assign(train_counts=[counts[(s, m)] for s, m in zip(out["setting"], out["method"])])
    if "epochs" in chosen:
        length = chosen.groupby(["setting", "method"], sort=False)["epochs"].agg(lambda e: sorted(set(e.dropna())))
        out = out.assign(epochs=[length[(s, m)] for s, m in zip(out["setting"], out["method"])])
    return out


def counted(frame: pd.DataFrame, by: tuple[str, ...], extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """:func:`pllzoo.results.summarise` with each accuracy's own count of runs (``acc_*_count``): a shot group
    without test examples in some seed's split has fewer values than n (:func:`mean_std_cells` says so)."""
    seen = frame.groupby(list(by), sort=False)[summarised(frame, extra)].count()
    return summarise(frame, by=by, extra=extra).join(seen.add_suffix("_count"), on=list(by))


def lengths_note(rows: pd.DataFrame) -> str:
    """When the methods of one table trained for different numbers of epochs (folders of other benches reported
    together): a sentence saying each method's; else ''."""
    if "epochs" not in rows:
        return ""
    each = {m: e for m, e in zip(rows["method"], rows["epochs"]) if isinstance(e, list) and e}
    if len({tuple(e) for e in each.values()}) <= 1:
        return ""
    told = ", ".join(f"{m} {'/'.join(str(int(x)) for x in e)}" for m, e in each.items())
    return f"Not one training length: epochs of the final stage: {told}."


FAILED_NOTE = ("failed: runs that raised (a component's exception, a non-finite loss, a bad output); n counts "
               "the finished ones, results.csv gives each failure's reason and runs/<run-id>/error.txt its traceback")


def with_failures(summ: pd.DataFrame, failed: list[tuple[str, str, tuple[int, ...]]],
                  methods: list[str]) -> pd.DataFrame:
    """``summ`` (:func:`summary`) with a ``failed`` column: the failed runs of each (setting, method) given as
    ``(setting, method, train counts)``; a pair with no finished run gets a row of its own (n = 0).
    Methods keep the order of ``methods``, settings their first-seen order."""
    if not failed:
        return summ
    counts: dict[tuple[str, str], list] = {}
    for setting, method, train_counts in failed:
        counts.setdefault((setting, method), []).append(tuple(train_counts))
    have = set(zip(summ["setting"], summ["method"]))
    new = pd.DataFrame([{"setting": s, "method": m, "n": 0, "train_counts": c}
                        for (s, m), c in counts.items() if (s, m) not in have])
    out = pd.concat([summ, new], ignore_index=True) if len(new) else summ.copy()
    out["n"] = out["n"].astype(int)
    out["failed"] = [len(counts.get((s, m), [])) for s, m in zip(out["setting"], out["method"])]
    settings = {s: i for i, s in enumerate(dict.fromkeys(out["setting"]))}
    rank = {m: i for i, m in enumerate(methods)}
    out = out.sort_values(["setting", "method"], kind="stable",
                          key=lambda c: c.map(settings) if c.name == "setting" else c.map(rank))
    return out.reset_index(drop=True)


def mean_std_cells(summ: pd.DataFrame) -> list[list[str]]:
    """Rows ``method, All, Many, Medium, Few, n`` of a :func:`pllzoo.results.summarise` frame; with a
    ``failed`` column (:func:`with_failures`), n says how many failed and a method without a finished
    run reads "failed"."""
    rows = []
    for _, r in summ.iterrows():
        n, failed = int(r["n"]), int(r.get("failed", 0))
        cells = ["failed"] * len(ACC_COLUMNS) if _failed_only(r) else [_cell(r, c, n) for c in ACC_COLUMNS]
        rows.append([r["method"], *cells, f"{n} ({failed} failed)" if failed else str(n)])
    return rows


def _failed_only(r: pd.Series) -> bool:
    """A row of :func:`with_failures` whose runs all failed (n = 0): its cells say "failed"."""
    return not int(r["n"]) and int(r.get("failed", 0) or 0) > 0


def _cell(r: pd.Series, column: str, n: int) -> str:
    """``mean ± std`` of ``column``, with its own count when fewer of the n runs have a value (a shot group without
    test examples in some seed's split): the caption's "one seed: the value alone" would read it as n seeds."""
    text = fmt(r[f"{column}_mean"], r[f"{column}_std"])
    count = r.get(f"{column}_count")
    if count is not None and not pd.isna(count) and 0 < int(count) < n:
        text += f" (n={int(count)})"
    return text


def long_reports(summ: pd.DataFrame, rule: str, seeds_note: str = "") -> list[Report]:
    """One All/Many/Medium/Few table per setting."""
    reports = []
    for setting, rows in summ.groupby("setting", sort=False):
        cells = mean_std_cells(rows)
        counts = [c for lst in rows["train_counts"] for c in lst]
        cap = caption(rule, counts)
        if "failed" in rows and rows["failed"].any():
            cap += f" {FAILED_NOTE}."
        if note := lengths_note(rows):
            cap += f" {note}"
        reports.append(Report(f"{setting}{seeds_note}", ["Method", *HEADERS.values(), "n"], cells, cap))
    return reports


def wide_report(summ: pd.DataFrame, rule: str, metric: str = "acc_all", paper: pd.DataFrame | None = None,
                title: str = "") -> Report:
    """Methods × settings for one metric; a ``paper`` column after each setting the paper covers.

    ``paper`` has columns ``method``, ``setting``, ``paper`` (the number as printed).
    """
    if metric in LABEL_COLUMNS and f"{metric}_mean" not in summ:
        raise PLLZooError(f"--metric {metric}: no run here logged it (methods with a label update of their own log "
                          "it in each epoch's record; runs recorded before pllzoo kept it do not)")
    if metric in LABEL_COLUMNS and summ[f"{metric}_mean"].isna().all():  # (an outside review: a group logged as
        raise PLLZooError(f"--metric {metric}: no run shown here has a value of it (methods without a label "  # null)
                          "update of their own log none, runs recorded before pllzoo kept it neither, and a shot "
                          "group without training rows in the selected epoch logs null: a --subset can leave one)")
    settings = list(dict.fromkeys(summ["setting"]))
    methods = list(dict.fromkeys(summ["method"]))
    cell = {(r["setting"], r["method"]): ("failed" if _failed_only(r) else _cell(r, metric, int(r["n"])), int(r["n"]))
            for _, r in summ.iterrows()}
    printed = {} if paper is None else {(r["setting"], r["method"]): str(r["paper"]) for _, r in paper.iterrows()}
    with_paper = [s for s in settings if any(k[0] == s for k in printed)]
    headers = ["Method"]
    for s in settings:
        headers += [s] + (["paper"] if s in with_paper else [])
    rows = []
    for m in methods:
        row = [m]
        for s in settings:
            row.append(cell.get((s, m), ("–", 0))[0])
            if s in with_paper:
                row.append(printed.get((s, m), ""))
        rows.append(row)
    ns = sorted({n for _, n in cell.values() if n}) or [0]  # a cell of failed runs only says so
    note = f"n = {ns[0]} seeds per cell" if len(ns) == 1 else f"n = {ns[0]}–{ns[-1]} seeds per cell"
    name = {**HEADERS, **LABEL_HEADERS}.get(metric, metric)
    cap = f"{name} accuracy (%). {caption(rule)} {note}."
    if metric in LABEL_COLUMNS:
        cap += f" {LABEL_NOTE}."
    if "failed" in summ and summ["failed"].any():
        cap += f" {FAILED_NOTE}."
    if metric not in ("acc_all", "label_acc"):  # a shot group: its classes, per setting (their counts differ)
        shots = {s: shot_caption([c for lst in g["train_counts"] for c in lst])
                 for s, g in summ.groupby("setting", sort=False)}
        cap += (f" {next(iter(shots.values()))}." if len(shots) == 1
                else "".join(f" {s}: {text}." for s, text in shots.items()))
    for setting, group in summ.groupby("setting", sort=False):
        if note := lengths_note(group):
            cap += f" {setting}: {note}"
    return Report(title or f"{name} accuracy", headers, rows, cap)


def to_rich(report: Report) -> Table:
    """The report as a rich table; its text is shown as written (a ``[train.epochs=5]`` is no markup tag)."""
    from rich.markup import escape

    t = Table(title=escape(report.title), caption=escape(report.caption), caption_justify="left")
    for i, h in enumerate(report.headers):
        t.add_column(escape(h), justify="left" if i == 0 else "right", style="bold" if i == 0 else None,
                     overflow="fold")
    for row in report.rows:
        t.add_row(*(escape(str(c)) for c in row))
    return t


def to_markdown(report: Report, heading: str = "###") -> str:
    lines = [f"{heading} {report.title}", "", _md_row(report.headers), "|" + "---|" * len(report.headers)]
    lines += [_md_row(row) for row in report.rows]
    return "\n".join(lines) + f"\n\n{report.caption}\n"


def _md_row(cells: list[str]) -> str:
    """One Markdown table row; a ``|`` inside a cell (a dataset file ``a|b.mat``, a plugin's method name) is
    escaped (unescaped, the row had a cell more than its header: an outside review), a line break is a blank."""
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def to_csv(summ: pd.DataFrame, rule: str, paper: pd.DataFrame | None = None, metric: str | None = None) -> str:
    """The tidy summary (one row per setting × method), with the paper's numbers when given (``paper_metric``: the
    accuracy they are of).  After the method, ``select``: the model-selection ``rule`` the epochs were picked by
    (a table says it in its caption; the CSV has none, and ``oracle`` numbers are an upper bound, not a result).
    Beside n: each accuracy's own count of runs (``acc_*_count``: a shot group without test examples in some
    seed's split has fewer) and the final stage's epochs (``epochs``, ``/`` between the lengths of runs trained
    for other numbers), as the tables say them."""
    out = summ.drop(columns=["train_counts"], errors="ignore")
    out.insert(list(out.columns).index("method") + 1, "select", rule)
    if "epochs" in out:
        out["epochs"] = [("/".join(str(int(x)) for x in e) if isinstance(e, list) else "") for e in out["epochs"]]
    for c in (*ACC_COLUMNS, *LABEL_COLUMNS):
        if f"{c}_count" in out:
            out[f"{c}_count"] = out[f"{c}_count"].astype("Int64")
    if paper is not None:
        out = out.merge(paper[["setting", "method", "paper"]], on=["setting", "method"], how="left")
        out["paper_metric"] = metric or "acc_all"
    return out.to_csv(index=False, float_format="%.4f")
