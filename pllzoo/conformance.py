"""``pllzoo check``: whether a recipe keeps the contract that a bench relies on (README, "Writing a plugin").

A recipe (a plugin's method, or a mix such as ``proden+selection=solar.classwise``) is trained on a tiny
generated problem (:func:`tiny_tabular`, :func:`tiny_images`), on the CPU, several times over; each check ends
in a :class:`Finding`:

* ``trains``: a short run ends, every epoch's loss finite;
* ``deterministic``: a second run with the same seed equals the first bit for bit (epoch records, network);
* ``resumes``: stopped after an epoch (one into each stage, one before its end, and at every stage boundary)
  and resumed from its checkpoint, the run equals the uninterrupted one bit for bit (epoch records, network,
  extra modules, method state, and the deployed test logits, a predict component's adjustment included).  State a component keeps on ``self`` is lost on resume (docs/hooks.md,
  ``PLLState``): this is where it shows;
* ``honours the mask``: in the last epoch of each stage, a selection that drops every other row of each batch
  instead of keeping all of them changes the network's weights, unless the loss declares
  ``ignores = frozenset({"mask"})``; a loss that ignores ``step.mask`` undeclared makes every selection in
  front of it a no-op;
* ``reads the targets``: likewise, one-hot targets on each row's first candidate instead of its last (the
  selection keeping every row, so that only the loss reads them), unless the loss declares
  ``ignores = frozenset({"targets"})``; undeclared, the mixes that swap the label update are not refused
  although they change nothing.

The probes replace the slot's answer and keep the component's own work (its state updates); they compare the
weights (network and extra modules), so a step log that reads the mask or the targets does not count.  They tell
whether the loss reads the mask and the targets, not how: a loss that uses the mask only to scale the batch, or
mixes dropped rows in as partners, passes; a stage of one epoch is probed only where no stage is longer.  The
resumed run is trained in this process: state kept in module globals, lost by a resume in a new process, is
not seen here (keep it in ``PLLState``).  Bit-for-bit comparisons need one torch thread (the command sets it).
tests/test_resume_every_method.py puts every registered recipe through ``resumes``, tests/test_conformance.py
through the rest.
"""

from __future__ import annotations

import inspect
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from pllzoo.components import Component, Method, label
from pllzoo.data.base import PLLData, TrainDefaults
from pllzoo.errors import PLLZooError
from pllzoo.plugins import debug_traceback, one_line
from pllzoo.run import TrainConfig

#: the checks, in the order they run and print
CHECKS: tuple[str, ...] = ("trains", "deterministic", "resumes", "honours the mask", "reads the targets")
EPOCHS = 3  # the final stage's length; first stages are shortened to 2 (:func:`short_stages`)
SEED = 7
#: hyper-parameters that make the shipped recipes' first stages and queues small; a recipe that fixes one itself
#: keeps its own, and the user's ``--hp`` wins over both
SHORT = {"estimator.est_epochs": 2, "loss.warm_up": 2, "label_update.queue_length": 2,
         "loss.queue": 24, "loss.low_dim": 16}  # PiCO's queue: not a multiple of the batch, so that it wraps


def tiny_tabular(n: int = 96, k: int = 4, d: int = 6, seed: int = 0, phi: float = 0.3) -> PLLData:
    """A tiny tabular PLL problem: separable Gaussian classes, uniform candidates (the true label always in)."""
    g = torch.Generator().manual_seed(seed)
    means = 3.0 * torch.randn(k, d, generator=g)

    def sample(m: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.arange(m) % k
        return means[y] + torch.randn(m, d, generator=g), y

    x, y = sample(n)
    xt, yt = sample(4 * k)
    cand = torch.rand(n, k, generator=g) < phi
    cand[torch.arange(n), y] = True
    return PLLData(
        name="tiny", kind="tabular", x_train=x, y_train=y, candidates=cand, x_test=xt, y_test=yt,
        num_classes=k, class_names=[str(i) for i in range(k)],
        defaults=TrainDefaults(model="linear", epochs=3, lr=0.1, weight_decay=0.0, batch_size=16),
    )


def tiny_images(n: int = 64, k: int = 4, seed: int = 0) -> PLLData:
    """Random uint8 images (kind ``image``, model ``cnn``): the augmentation, strong-view and mixup paths."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % k
    cand = torch.rand(n, k, generator=g) < 0.3
    cand[torch.arange(n), y] = True
    return PLLData(
        name="fake-images", kind="image",
        x_train=torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8), y_train=y, candidates=cand,
        x_test=torch.randint(0, 256, (16, 3, 32, 32), generator=g, dtype=torch.uint8), y_test=torch.arange(16) % k,
        num_classes=k, class_names=[str(i) for i in range(k)],
        defaults=TrainDefaults(model="cnn", epochs=1, lr=0.01, weight_decay=0.0, batch_size=16),
        mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25),
    )


#: the problems a check trains on, by ``--data`` name: (data, trainer settings)
PROBLEMS: dict[str, Callable[[], tuple[PLLData, TrainConfig]]] = {
    "tabular": lambda: (tiny_tabular(n=48), TrainConfig(model="linear", epochs=EPOCHS, lr=0.1, weight_decay=1e-4,
                                                        batch_size=16, checkpoint_every=1)),
    "images": lambda: (tiny_images(n=32), TrainConfig(model="cnn", epochs=EPOCHS, lr=0.05, weight_decay=1e-4,
                                                      batch_size=16, checkpoint_every=1)),
}


@dataclass(frozen=True)
class Finding:
    """One check's verdict: ``status`` is ``ok``, ``fail`` or ``skip``; ``detail`` says why, in one line."""

    check: str
    status: str
    detail: str = ""


@dataclass(frozen=True)
class Outcome:
    """What a finished run left: its epoch records and every tensor a resume must give back."""

    records: list[dict[str, Any]]
    tensors: dict[str, torch.Tensor]  # "weight fc.weight", "module x.y", "state prior"


class _Stop(Exception):
    """Raised from ``on_epoch`` to cut a run after a given epoch record (its checkpoint is of that epoch)."""


def short_stages(registry, method: Method) -> dict[str, Any]:
    """:data:`SHORT`'s values for the keys the recipe has and does not fix itself, of shipped components only: an
    outside component's field of the same name may mean something else (an outside review: a str ``warm_up``
    was given 2)."""
    from pllzoo.registry import shipped

    keys = registry.hparam_keys(method)
    slots = method.slots()
    return {k: v for k, v in SHORT.items() if k in keys and k not in method.hparams
            and shipped(registry.component_plugin(k.split(".")[0], slots[k.split(".")[0]]))}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes (exact, and a NaN equals itself); sparse tensors densified."""
    t = t.detach().to_dense() if t.is_sparse else t.detach()
    return t.cpu().contiguous().reshape(-1).view(torch.uint8)


def first_difference(a: Outcome, b: Outcome) -> str | None:
    """Where two outcomes first differ (None: equal bit for bit; records compared without ``wall_s``)."""
    ra, rb = _plain(a.records), _plain(b.records)
    if len(ra) != len(rb):
        return f"{len(ra)} epoch records against {len(rb)}"
    for i, (x, y) in enumerate(zip(ra, rb)):
        keys = [k for k in dict.fromkeys([*x, *y]) if x.get(k) != y.get(k)]
        if keys:
            return f"epoch record {i + 1}: " + ", ".join(f"{k} {x.get(k, '(none)')} against {y.get(k, '(none)')}"
                                                         for k in keys[:3])
    if list(a.tensors) != list(b.tensors):
        only = sorted(set(a.tensors) ^ set(b.tensors))
        return "not the same tensors: " + ", ".join(only[:4]) if only else "the tensors in another order"
    for name, x in a.tensors.items():
        y = b.tensors[name]
        if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(_bits(x), _bits(y)):
            return name
    return None


def _plain(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records without ``wall_s``; floats by ``repr`` (exact, and NaN equals NaN)."""
    return [{k: repr(v) if isinstance(v, float) else v for k, v in r.items() if k != "wall_s"} for r in records]


def cut_points(stages: list, epochs: int) -> list[int]:
    """Numbers of epoch records after which to stop a run: one epoch into each stage and one epoch before its
    end (where those are inside it), and each boundary between stages."""
    cuts, done = [], 0
    for i, stage in enumerate(stages):
        n = stage.epochs if stage.epochs is not None else epochs
        cuts += [done + e for e in (1, n - 1) if 0 < e < n]
        done += n
        if i < len(stages) - 1 and n > 0:
            cuts.append(done)
    return sorted(set(cuts))


def _wrap(comp: Component, hook: str, change: Callable[[Any, Any], torch.Tensor]) -> None:
    """Make ``comp`` answer ``hook`` with ``change(step, its own answer)`` (its class swapped for a subclass)."""
    from pllzoo import hookimpl

    cls = type(comp)
    own = getattr(cls, hook, None)
    names = [p for p in inspect.signature(own).parameters if p != "self"] if own is not None else []

    def answer(self, step, state):
        given = {"step": step, "state": state}
        return change(step, own(self, **{n: given[n] for n in names}) if own is not None else None)

    namespace = {hook: hookimpl(answer), "__module__": cls.__module__, "__qualname__": cls.__qualname__}
    for own_attr in ("name", "_pllzoo_plugin"):  # not inherited (components.label, checks.describe)
        if own_attr in vars(cls):
            namespace[own_attr] = vars(cls)[own_attr]
    comp.__class__ = type(cls.__name__, (cls,), namespace)


def _every_other(step) -> torch.Tensor:
    """bool ``[B]``: rows 0, 2, 4, ... of the batch."""
    return torch.arange(step.batch.index.shape[0], device=step.batch.index.device) % 2 == 0


def _keep_all(step) -> torch.Tensor:
    return torch.ones(step.batch.index.shape[0], dtype=torch.bool, device=step.batch.index.device)


def _one_hot(step, last: bool) -> torch.Tensor:
    """float ``[B, K]``: one-hot on each row's last (or first) candidate."""
    cand = step.batch.candidates > 0  # [B, K]
    k = cand.shape[1]
    rank = torch.arange(1, k + 1, device=cand.device) if last else torch.arange(k, 0, -1, device=cand.device)
    return torch.nn.functional.one_hot((cand * rank).argmax(1), k).to(torch.float32)


#: what each probe pins, and to what: (slot, hook, the answer everywhere, the other answer in the probed epoch);
#: the targets probe also pins the selection to every row, so that a selection reading the targets cannot count
PROBES: dict[str, list[tuple[str, str, Callable, Callable]]] = {
    "mask": [("selection", "pllzoo_select", _keep_all, _every_other)],
    "targets": [("label_update", "pllzoo_label_update", lambda step: _one_hot(step, True),
                 lambda step: _one_hot(step, False)),
                ("selection", "pllzoo_select", _keep_all, _keep_all)],
}


class Checker:
    """Trains one recipe on one tiny problem, as many times as the checks need (each run from fresh components)."""

    def __init__(self, registry, method: Method, overrides: Mapping[str, Any] | None = None,
                 problem: str = "tabular") -> None:
        self.registry, self.method = registry, method
        self.data, self.config = PROBLEMS[problem]()
        self.overrides = {**short_stages(registry, method), **(overrides or {})}
        self.components(None)  # bad hyper-parameters, an incompatible mix: refused here, before any training

    def components(self, probe: list[tuple[str, str, Callable]] | None) -> dict[str, Component]:
        comps = self.registry.build_components(self.method, self.overrides, dataset=(self.data.name, self.data.kind))
        for slot, hook, change in probe or ():
            _wrap(comps[slot], hook, change)
        return comps

    def trainer(self, run_dir: Path | None = None, on_epoch=None, probe=None):
        from pllzoo.trainer import Trainer

        if run_dir is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
        return Trainer(self.data, self.components(probe), self.config, seed=SEED, device=torch.device("cpu"),
                       run_dir=run_dir, on_epoch=on_epoch, record_base={"method": self.method.name})

    @staticmethod
    def weights(trainer) -> dict[str, torch.Tensor]:
        """The network's and the extra modules' tensors, by name."""
        tensors = {f"weight {k}": v for k, v in trainer.model.state_dict().items()}
        for name in sorted(trainer.modules):
            tensors.update({f"module {name}.{k}": v for k, v in trainer.modules[name].state_dict().items()})
        return tensors

    @classmethod
    def outcome(cls, trainer, records: list[dict[str, Any]]) -> Outcome:
        tensors = cls.weights(trainer)
        tensors.update({f"state {k}": trainer.state.get(k) for k in trainer.state})
        # what the run deploys: a predict component's adjustment from state it keeps on self changes these and
        # maybe no accuracy of the tiny test set (an outside review: a prior on self passed "resumes")
        tensors["deployed test logits"] = trainer._predict_logits(trainer.x_test)
        return Outcome(records, tensors)

    def run(self, run_dir: Path | None = None, probe=None) -> Outcome:
        trainer = self.trainer(run_dir, probe=probe)
        return self.outcome(trainer, trainer.fit())

    def resumed(self, run_dir: Path, after: int) -> Outcome:
        """Stopped after ``after`` epoch records, then resumed from its checkpoint by fresh components."""
        def stop(records):
            if len(records) == after:
                raise _Stop

        try:
            self.trainer(run_dir, on_epoch=stop).fit()
        except _Stop:
            pass
        else:
            raise PLLZooError(f"the run ended before epoch record {after}")
        trainer = self.trainer(run_dir)
        return self.outcome(trainer, trainer.fit(resume=True))

    def stages(self) -> list:
        return self.trainer().stages()

    def weights_after(self, after: int, probe=None) -> dict[str, torch.Tensor]:
        """The network's and extra modules' weights after ``after`` epoch records (the run stopped there)."""
        box: dict[str, Any] = {}

        def stop(records):
            if len(records) == after:
                box["weights"] = {k: v.clone() for k, v in self.weights(box["trainer"]).items()}  # no test pass
                raise _Stop

        box["trainer"] = self.trainer(on_epoch=stop, probe=probe)
        try:
            box["trainer"].fit()
        except _Stop:
            return box["weights"]
        raise PLLZooError(f"the run ended before epoch record {after}")


def _failure(exc: BaseException) -> str:
    """The one-line verdict of what a run raised; a stop signal's :class:`~pllzoo.checkpoint.Stopped` is no
    verdict on the recipe and goes on up (an outside review: Ctrl-C became a FAIL, or was lost)."""
    from pllzoo.checkpoint import Stopped

    if isinstance(exc, Stopped):
        raise exc
    debug_traceback(exc)  # PLLZOO_DEBUG=1: where it was raised, before the verdict's one line
    if isinstance(exc, PLLZooError):
        return str(exc)
    said = one_line(exc)  # "Type: message" already (an outside review: the type came twice)
    return said if said.startswith(type(exc).__name__) else f"{type(exc).__name__}: {said}"


def check(checker: Checker, only: set[str] | None = None, found: list[Finding] | None = None) -> list[Finding]:
    """Every check of :data:`CHECKS` (or those in ``only``) on ``checker``'s recipe, in order.  ``found``: a list
    the findings are appended to as they come (what a stop signal's :class:`~pllzoo.checkpoint.Stopped` leaves)."""
    wanted = set(CHECKS) if only is None else set(only)
    found = [] if found is None else found

    def skip(reason: str) -> None:
        found.extend(Finding(c, "skip", reason) for c in CHECKS if c in wanted and c not in {f.check for f in found})

    try:
        full = checker.run()
    except Exception as exc:  # whatever the recipe raised: the verdict, not a traceback
        found.append(Finding("trains", "fail", _failure(exc)))
        skip("the recipe does not train")
        return found
    bad = [i + 1 for i, r in enumerate(full.records)
           if not (isinstance(r.get("loss"), (int, float)) and math.isfinite(r["loss"]))]
    found.append(Finding("trains", "fail", f"loss not finite at epoch record {bad[0]}") if bad else
                 Finding("trains", "ok", f"{len(full.records)} epochs"))
    if bad:
        skip("the recipe does not train")
        return found
    steady = True
    if wanted & {"deterministic", "resumes", "honours the mask", "reads the targets"}:
        diff = _guarded(lambda: first_difference(full, checker.run()))
        steady = diff is None
        found.append(Finding("deterministic", "ok" if steady else "fail",
                             "" if steady else f"a second run with the same seed differs: {diff}"))
    if not steady:
        skip("not deterministic, so nothing can be compared")
        return [f for f in found if f.check in wanted]
    if "resumes" in wanted:
        found.append(resumes(checker, full))
    try:
        loss, stages = checker.components(None)["loss"], checker.stages()
    except Exception as exc:  # a constructor that fails on a later build: this recipe's verdict, not the command's
        found.extend(Finding(c, "fail", f"building the recipe again failed: {_failure(exc)}")
                     for c in ("honours the mask", "reads the targets") if c in wanted)
        return [f for f in found if f.check in wanted]
    if "honours the mask" in wanted:
        found.append(_probe(checker, stages, "honours the mask", loss, "mask",
                            "dropping every other row of each batch in the selection changed no weight"))
    if "reads the targets" in wanted:
        found.append(_probe(checker, stages, "reads the targets", loss, "targets",
                            "one-hot targets on another candidate from the label update changed no weight"))
    return [f for f in found if f.check in wanted]


def _guarded(compare: Callable[[], str | None]) -> str | None:
    try:
        return compare()
    except Exception as exc:
        return f"it failed: {_failure(exc)}"


def resumes(checker: Checker, full: Outcome) -> Finding:
    """Stopped after each of :func:`cut_points` and resumed by fresh components, the run equals ``full``."""
    try:
        cuts = cut_points(checker.stages(), checker.config.epochs)
    except Exception as exc:
        return Finding("resumes", "fail", f"building the recipe again failed: {_failure(exc)}")
    with tempfile.TemporaryDirectory(prefix="pllzoo-check-") as tmp:
        for k in cuts:
            diff = _guarded(lambda k=k: first_difference(checker.resumed(Path(tmp) / f"cut{k}", k), full))
            if diff is not None:
                return Finding("resumes", "fail", f"stopped after epoch record {k} and resumed, the run differs from "
                               f"the uninterrupted one: {diff} (resumed against uninterrupted; state kept on a "
                               "component's self is lost on resume: keep it in PLLState, docs/hooks.md)")
    return Finding("resumes", "ok", f"stopped after epoch records {', '.join(map(str, cuts))}")


def _pinned(key: str, when: tuple[int, int] | None) -> list[tuple[str, str, Callable]]:
    """The probe ``key``'s wrappers: its first answer everywhere, its second in epoch ``when`` = (stage, epoch)."""
    def change(everywhere, there):
        return lambda step, answer: there(step) if (step.stage.index, step.epoch) == when else everywhere(step)

    return [(slot, hook, change(everywhere, there)) for slot, hook, everywhere, there in PROBES[key]]


def _probe(checker: Checker, stages: list, name: str, loss: Component, key: str, nothing: str) -> Finding:
    """In the last epoch of each stage, the probe's other answer must change the weights."""
    if key in loss.ignores:
        return Finding(name, "skip", f"the loss {label(loss)!r} declares ignores {key!r}")
    lengths = [s.epochs if s.epochs is not None else checker.config.epochs for s in stages]
    # a stage's first epoch may train on every row by design (SoLar's Alg. l.2): a one-epoch stage is probed only
    # where no stage is longer (an outside review: est_epochs=1 failed a correct loss)
    shortest = 2 if max(lengths) >= 2 else 1
    done = 0
    for i, (stage, n) in enumerate(zip(stages, lengths)):
        done += n
        if n < shortest:
            continue
        try:
            same = first_difference(Outcome([], checker.weights_after(done, _pinned(key, None))),
                                    Outcome([], checker.weights_after(done, _pinned(key, (i, n - 1))))) is None
        except Exception as exc:
            return Finding(name, "fail", f"the probe run failed: {_failure(exc)}")
        if same:
            return Finding(name, "fail", f"in the last epoch of stage {stage.name!r}, {nothing}: the loss "
                           f"{label(loss)!r} does not read step.{key} there; make it read it, or declare "
                           f"ignores = frozenset({{{key!r}}}) on it (docs/hooks.md, pllzoo_loss)")
    return Finding(name, "ok", f"in the last epoch of {'each stage' if len(stages) > 1 else 'the run'}")
