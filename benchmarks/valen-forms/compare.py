"""VALEN: pllzoo's two numerical forms against the released code's, trained side by side (paired by seed).

    OMP_NUM_THREADS=1 python benchmarks/valen-forms/compare.py --data-dir ../shared/data \\
        --datasets synthetic-lt,lost,msrcv2 --seeds 1,2,3,4,5 > benchmarks/valen-forms/table.md

pllzoo's VALEN (``pllzoo_baselines.valen``) differs from palm-ml/valen's ``main.py`` in two places, only where
the encoder's softmax a is extreme:

* ``code-ld``: L_d = −Σ o log(softmax(a) + 1e-12), ``partial_loss``'s form (pllzoo: log-softmax).  Where p_j on a
  weighted candidate is below ~1e-12 the code's term saturates near −log 1e-12 ≈ 27.6 with a vanishing gradient,
  so such a row stops pulling enc; pllzoo's keeps pulling, at full strength.
* ``code-mask``: step 6's d̃ kept on 1[new_d > 0] (``revised_target``), the support of o where softmax(a) did not
  underflow to 0, so a label on which enc's softmax is exactly 0 leaves d (and then o) for good; pllzoo keeps
  d̃ on 1[o > 0].

Each variant patches the plugin module's functions for the run (in this process only) and otherwise trains through
the real bench planning (dataset defaults, recipes) and trainer, on CPU, the seed's data and initialisation
shared by the variants.  Last epoch of the final stage: All and Few accuracy, mean ± sample std over the seeds and
the paired difference variant − pllzoo, and for ``code-mask`` the batch rows (summed over the run's steps) whose
kept labels the encoder's support cut; each run's row is appended to ``per_seed.csv`` beside this file as it
finishes (``--table-only`` prints the table from it).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Iterator

import pandas as pd
import torch

import pllzoo_baselines.valen as V
from pllzoo import bench
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError
from pllzoo.registry import get_registry
from pllzoo.report import fmt
from pllzoo.trainer import Trainer

HERE = Path(__file__).resolve().parent
PER_SEED = HERE / "per_seed.csv"  # one row per run, appended as each finishes (a later row of a run replaces it)


def code_ld(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``partial_loss``'s L_d per row: −Σ_j o_ij log(softmax(a_i)_j + 1e-12) ``[B]``."""
    return -(targets * torch.log(torch.softmax(logits.float(), dim=1) + 1e-12)).sum(dim=1)


COUNTS = {"steps": 0, "rows": 0}  # code-mask: steps patched, rows whose kept labels the encoder's support cut


@contextlib.contextmanager
def code_mask() -> Iterator[None]:
    """Step 6 keeps d̃ on 1[o > 0] ∧ 1[softmax(a) > 0] (``revised_target(d, new_d)``): the encoder's support is
    noted where the concentration is built and applied where d̃ is re-normalised (the call whose weights are the
    step's d̃, recognised by its storage)."""
    seen: dict[str, torch.Tensor | int] = {}
    concentration, rsample, normalize = V.concentration, V.dirichlet_rsample, V.normalize_masked

    def noting_concentration(a: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        seen["support"] = (torch.softmax(a.detach(), dim=1) > 0).float()
        return concentration(a, keep)

    def noting_rsample(s: torch.Tensor, generator: torch.Generator, dist=V.SINGLE) -> torch.Tensor:
        d = rsample(s, generator, dist)
        seen["draw"] = d.data_ptr()
        return d

    def masked_normalize(weights: torch.Tensor, mask: torch.Tensor, log_weights: torch.Tensor) -> torch.Tensor:
        if weights.data_ptr() == seen.get("draw"):
            kept = mask * seen["support"]
            COUNTS["steps"] += 1
            COUNTS["rows"] += int((kept != mask).any(dim=1).sum())
            mask = kept
        return normalize(weights, mask, log_weights)

    V.concentration, V.dirichlet_rsample, V.normalize_masked = noting_concentration, noting_rsample, masked_normalize
    try:
        yield
    finally:
        V.concentration, V.dirichlet_rsample, V.normalize_masked = concentration, rsample, normalize


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    if name == "pllzoo":
        yield
    elif name == "code-ld":
        saved, V.soft_cross_entropy = V.soft_cross_entropy, code_ld
        try:
            yield
        finally:
            V.soft_cross_entropy = saved
    elif name == "code-mask":
        with code_mask():
            yield
    else:
        raise SystemExit(f"unknown variant {name!r}")


def train(dataset: str, seed: int, name: str, data_dir: Path | None, epochs: int | None = None) -> dict:
    """One VALEN run (bench's plan for ``dataset`` and ``seed``) under variant ``name``: its last record."""
    reg = get_registry()
    plan = bench.plan(reg, ["valen"], dataset, [seed], DataOptions(seed=seed, data_dir=data_dir, download=False),
                      epochs=epochs, device="cpu")[0]
    comps = reg.build_components(plan.method, plan.component_overrides, (plan.data.name, plan.data.kind))
    COUNTS.update(steps=0, rows=0)
    try:
        with variant(name):
            last = Trainer(plan.data, comps, plan.train, seed, torch.device("cpu")).fit()[-1]
    except PLLZooError as exc:  # e.g. code-mask: a row whose every kept label the encoder's softmax underflowed
        # on is left empty (the code: 0/0, NaN targets), which the trainer's output checks refuse
        print(f"{dataset} seed {seed} {name}: failed: {exc} {COUNTS}", file=sys.stderr)
        return {"dataset": dataset, "seed": seed, "variant": name, "acc_all": None, "acc_few": None,
                "rows_cut": COUNTS["rows"] if name == "code-mask" else None, "error": str(exc)}
    print(f"{dataset} seed {seed} {name}: All {last['acc_all']:.2f} Few {last['acc_few']:.2f} {COUNTS}", file=sys.stderr)
    if name == "code-mask" and not COUNTS["steps"]:
        raise SystemExit("code-mask patched no step: the plugin's step 6 no longer calls normalize_masked on d̃")
    return {"dataset": dataset, "seed": seed, "variant": name, "acc_all": last["acc_all"], "acc_few": last["acc_few"],
            "rows_cut": COUNTS["rows"] if name == "code-mask" else None, "error": None}


def table(df: pd.DataFrame) -> str:
    lines = ["| dataset | variant | All | Few | All − pllzoo | Few − pllzoo | rows cut per run | n |",
             "|---|---|---|---|---|---|---|---|"]
    ms = lambda x: fmt(x.mean(), x.std() if len(x) > 1 else None)  # noqa: E731
    for dataset, rows in df.groupby("dataset", sort=False):
        base = rows[rows["variant"] == "pllzoo"].set_index("seed")
        for name, mine in rows.groupby("variant", sort=False):
            failed = int(mine["acc_all"].isna().sum())
            if failed:
                lines.append(f"| {dataset} | {name} | failed in {failed} of {len(mine)} runs (a row left without "
                             "labels) | | | | | |")
                mine = mine[mine["acc_all"].notna()]
                if mine.empty:
                    continue
            mine = mine.set_index("seed")
            diff = mine[["acc_all", "acc_few"]] - base[["acc_all", "acc_few"]]
            paired = ("—", "—") if name == "pllzoo" else (ms(diff["acc_all"]), ms(diff["acc_few"]))
            cut = f"{mine['rows_cut'].mean():.1f}" if name == "code-mask" else "—"
            lines.append(f"| {dataset} | {name} | {ms(mine['acc_all'])} | {ms(mine['acc_few'])} | {paired[0]} | "
                         f"{paired[1]} | {cut} | {len(mine)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--datasets", default="synthetic-lt,lost,msrcv2")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--variants", default="pllzoo,code-ld,code-mask")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=None, help="final-stage epochs (default: the dataset's; smoke runs)")
    ap.add_argument("--table-only", action="store_true", help="only the table, from per_seed.csv")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    done = set()
    if PER_SEED.exists() and not args.table_only:  # a run recorded already is not trained again
        done = {(d, int(s), v) for d, s, v in pd.read_csv(PER_SEED)[["dataset", "seed", "variant"]].itertuples(False)}
    if not args.table_only:
        for dataset in args.datasets.split(","):
            for seed in args.seeds.split(","):
                for name in args.variants.split(","):
                    if (dataset, int(seed), name) in done:
                        continue
                    row = pd.DataFrame([train(dataset, int(seed), name, args.data_dir, args.epochs)])
                    row.to_csv(PER_SEED, mode="a", header=not PER_SEED.exists(), index=False)  # kept as it goes
    print(table(pd.read_csv(PER_SEED).drop_duplicates(["dataset", "seed", "variant"], keep="last")))


if __name__ == "__main__":
    main()
