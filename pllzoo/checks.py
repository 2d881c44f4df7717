"""The host's checks on what components hand back, and the errors that name the component.

The trainer calls a role hook (:data:`pllzoo.hookspecs.SLOT_HOOKS`) on the slot's component only and
checks its answer here:

* **every step, from metadata only** (no device value is read, so no host sync): the answer is a
  tensor of the right shape, dtype and device (the batch's) — targets float ``[B, K]``, a selection
  ``[B]`` (bool, or float weights), a 0-dim float loss that requires grad;
* **on the first step of each epoch, and on every step under ``check``** (the trainer's ``check``
  argument, ``pllzoo bench --check``), also from the values, which reads them on the host: targets
  finite, non-negative, 0 outside the candidate set and rows summing to 1; weights finite and in
  [0, 1]; the loss finite;
* **at every evaluation**: adjusted predict logits float ``[M, K]`` and finite (evaluation reads its
  results on the host anyway);
* **what components log**: ``step.logs`` values are scalars (on checked steps), an epoch-end answer is a
  dict of str keys to numbers, strings, None or lists of them (tensors and numpy values read), and neither
  may take a name of the record itself (:data:`RECORD_KEYS`, the metrics), which would relabel the run.

A violation, or any exception raised inside a component's hook, is a one-line
:class:`ComponentError` naming the slot, the component and the module it comes from; an exception
is chained (``raise ... from``), so a traceback still shows the cause.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import torch

from pllzoo.components import label
from pllzoo.errors import PLLZooError

if TYPE_CHECKING:  # pragma: no cover
    from pllzoo.components import Component

#: tolerance of the row sums of targets and of the mass outside the candidate set (float32 maths)
TARGET_ATOL = 1e-3


class ComponentError(PLLZooError):
    """A component broke the contract (a bad answer, or an exception inside one of its hooks)."""


def describe(slot: str, comp: Component) -> str:
    """``label_update component 'proden.confidence' (plugin 'baselines')`` — for messages: the plugin by the
    name ``pllzoo plugins`` lists (its entry point's), or, for a component the registry never saw (built in
    a script or a test), its top-level module."""
    plugin = vars(type(comp)).get("_pllzoo_plugin")
    return f"{slot} component {label(comp)!r} (plugin {plugin!r})" if plugin else \
        f"{slot} component {label(comp)!r} (plugin {type(comp).__module__.split('.')[0]})"


def hook_failed(slot: str, comp: Component, hook: str, exc: BaseException) -> ComponentError:
    """The one-line error for an exception raised inside ``comp``'s ``hook`` (chain it with ``from``)."""
    text = str(exc).strip().splitlines()
    return ComponentError(f"{describe(slot, comp)} failed in {hook}: {type(exc).__name__}"
                          + (f": {text[0]}" if text else ""))


def _bad(slot: str, comp: Component, hook: str, what: str) -> ComponentError:
    return ComponentError(f"{describe(slot, comp)}: {hook} {what}")


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(d) for d in t.shape) + "]"


def _tensor(slot: str, comp: Component, hook: str, value: object, expected: str,
            device: torch.device | None = None) -> torch.Tensor:
    """``value`` if it is a tensor (on ``device``, when given: the batch's), else one line saying what it is."""
    if not isinstance(value, torch.Tensor):
        raise _bad(slot, comp, hook, f"returned {type(value).__name__}, expected {expected}")
    if device is not None and value.device != device:
        raise _bad(slot, comp, hook, f"returned a tensor on device {value.device}, expected {device} (the batch's)")
    if value.requires_grad and hook != "pllzoo_loss":  # the loss alone carries the gradient
        raise _bad(slot, comp, hook, "returned a tensor that requires grad (built under torch.enable_grad()?); "
                                     "this hook runs under no_grad and no gradient may flow through its answer: "
                                     ".detach() it")
    return value


def _float_of_shape(slot: str, comp: Component, hook: str, value: object, what: str, like: torch.Tensor) -> torch.Tensor:
    """``value`` as a float tensor of ``like``'s shape, else one line saying what it is instead."""
    t = _tensor(slot, comp, hook, value, f"float {what} {_shape(like)}", like.device)
    if t.shape != like.shape:
        raise _bad(slot, comp, hook, f"returned {what} of shape {_shape(t)}, expected {_shape(like)}")
    if not t.is_floating_point():
        raise _bad(slot, comp, hook, f"returned {what} of dtype {t.dtype}, expected a float dtype")
    return t


def check_offset(slot: str, comp: Component, offset: object, logits: torch.Tensor, values: bool) -> None:
    """A logit offset: float ``[K]`` or ``[B, K]`` (``logits`` is ``[B, K]``); with ``values``: finite."""
    hook = "pllzoo_logit_offset"
    t = _tensor(slot, comp, hook, offset, f"float offset [K] or {_shape(logits)}", logits.device)
    if t.shape not in (logits.shape, logits.shape[1:]):
        raise _bad(slot, comp, hook, f"returned an offset of shape {_shape(t)}, expected [{logits.shape[1]}] "
                   f"or {_shape(logits)}")
    if not t.is_floating_point():
        raise _bad(slot, comp, hook, f"returned an offset of dtype {t.dtype}, expected a float dtype")
    if values and not bool(torch.isfinite(t).all()):
        raise _bad(slot, comp, hook, "returned a non-finite offset (NaN or inf)")


def check_targets(slot: str, comp: Component, targets: object, candidates: torch.Tensor, values: bool,
                  hook: str = "pllzoo_label_update") -> None:
    """Targets of a batch (``hook``'s answer; ``pllzoo_loss``'s ``step.trained_targets``): float ``[B, K]``; with
    ``values``: finite, ≥ 0, 0 outside ``candidates`` (float ``[B, K]``), rows summing to 1."""
    t = _float_of_shape(slot, comp, hook, targets, "targets", candidates)
    if not values:
        return
    t = t.float()
    if not bool(torch.isfinite(t).all()):
        raise _bad(slot, comp, hook, "returned non-finite targets (NaN or inf)")
    low = float(t.min())
    if low < 0:
        raise _bad(slot, comp, hook, f"returned negative targets (min {low:.3g})")
    outside = float((t * (candidates <= 0)).sum(dim=1).max())
    if outside > TARGET_ATOL:
        raise _bad(slot, comp, hook, f"put mass {outside:.3g} outside a sample's candidate set")
    sums = t.sum(dim=1)
    worst = int((sums - 1).abs().argmax())
    if abs(float(sums[worst]) - 1) > TARGET_ATOL:
        raise _bad(slot, comp, hook, f"returned targets whose rows do not sum to 1 (batch row {worst}: "
                                     f"{float(sums[worst]):.4g})")


def check_selection(slot: str, comp: Component, mask: object, batch_size: int, values: bool,
                    device: torch.device | None = None) -> None:
    """A selection: ``bool [B]`` or float weights ``[B]`` (on ``device``, the batch's, when given); with
    ``values``: weights finite and in [0, 1]."""
    hook = "pllzoo_select"
    m = _tensor(slot, comp, hook, mask, f"a bool mask [{batch_size}]", device)
    if m.shape != (batch_size,):
        raise _bad(slot, comp, hook, f"returned a mask of shape {_shape(m)}, expected [{batch_size}] (one per sample)")
    if m.dtype == torch.bool:
        return
    if not m.is_floating_point():
        raise _bad(slot, comp, hook, f"returned a mask of dtype {m.dtype}, expected bool or float weights")
    if values and not bool(((m >= 0) & (m <= 1)).all()):  # NaN fails both comparisons
        raise _bad(slot, comp, hook, "returned weights outside [0, 1] (or NaN)")


def check_loss(slot: str, comp: Component, loss: object, values: bool, device: torch.device | None = None) -> None:
    """A loss: a 0-dim float tensor with grad (on ``device``, the batch's, when given); with ``values``: finite."""
    hook = "pllzoo_loss"
    t = _tensor(slot, comp, hook, loss, "a scalar tensor", device)
    if t.dim() != 0 or not t.is_floating_point():
        raise _bad(slot, comp, hook, f"returned a {t.dtype} tensor of shape {_shape(t)}, expected a float scalar")
    if not t.requires_grad or t.grad_fn is None:  # a leaf made with requires_grad=True is no loss of the model's
        raise _bad(slot, comp, hook, "returned a loss without grad (it does not depend on the model)")
    if values and not bool(torch.isfinite(t)):
        raise _bad(slot, comp, hook, f"returned a non-finite loss ({float(t.detach())})")


def check_grads(slot: str, comp: Component, model: torch.nn.Module) -> None:
    """After the loss's backward: some parameter of the network got a gradient (a loss with grad through
    something else, ``loss.detach() + 0 * leaf``, would train nothing); metadata only, no device read."""
    if all(p.grad is None for p in model.parameters() if p.requires_grad):
        raise _bad(slot, comp, "pllzoo_loss", "returned a loss that does not depend on the network (no parameter "
                   "got a gradient)")


def check_logits(slot: str, comp: Component, adjusted: object, logits: torch.Tensor) -> None:
    """Adjusted test logits: float, the shape of ``logits`` (``[M, K]``), finite."""
    hook = "pllzoo_predict"
    t = _float_of_shape(slot, comp, hook, adjusted, "logits", logits)
    if not bool(torch.isfinite(t).all()):
        raise _bad(slot, comp, hook, "returned non-finite logits (NaN or inf)")


#: the names of a record's own fields (with the test metrics' keys): no component may log under them
RECORD_KEYS = frozenset({"method", "dataset", "seed", "stage", "stage_index", "epoch", "epochs", "final_stage",
                         "lr", "loss", "wall_s", "momentum_restarted",
                         # the columns that reading the records adds (pllzoo.results.load) and results.csv's last two
                         "run", "setting", "train_counts", "status", "error"})


def _json_ready(value: object) -> object:
    """``value`` as the record writes it: numbers (numpy's and 0-d tensors' read; NaN and inf as None), None,
    str, and lists of those (nested; tensors and arrays as their lists).  :raises TypeError: anything else."""
    if isinstance(value, torch.Tensor) or type(value).__module__ == "numpy":
        value = value.tolist() if hasattr(value, "tolist") else value
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        value = float(value)
        return value if math.isfinite(value) else None  # JSON has no NaN or inf: null, as a missing value
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    raise TypeError(type(value).__name__)


def epoch_logs(slot: str, comp: Component, out: object) -> dict:
    """``comp``'s ``pllzoo_on_epoch_end`` answer as record fields: None → ``{}``; a dict of str keys to values
    the record can hold (:func:`_json_ready`: numbers, None, str, lists of them; tensors and numpy values read).

    :raises ComponentError: anything else, naming the component and the key."""
    hook = "pllzoo_on_epoch_end"
    if out is None:
        return {}
    if not isinstance(out, dict):
        raise _bad(slot, comp, hook, f"returned {type(out).__name__}, not a dict of logged values")
    logged = {}
    for key, value in out.items():
        if not isinstance(key, str):
            raise _bad(slot, comp, hook, f"logged the key {key!r}, not a str")
        try:
            logged[key] = _json_ready(value)
        except TypeError as exc:
            raise _bad(slot, comp, hook, f"logged {key!r} holding a {exc}; log numbers, strings, None or lists "
                                         "of them") from None
    return logged


def step_logs(logs: dict, recipe: str) -> None:
    """The values of a checked step's ``step.logs``: str keys to what the epoch can average, one number each
    (a number, or a tensor, array or list of one element).

    :raises PLLZooError: one line naming the key (the recipe's components share ``step.logs``)."""
    for key, value in logs.items():
        step_log(key, value, recipe)


def step_log(key: Any, value: Any, recipe: str) -> torch.Tensor:
    """One ``step.logs`` entry as the float64 scalar tensor the epoch sums (on the value's device: no host read).

    :raises PLLZooError: one line naming the key, for a key that is not a str or a value that is not one number."""
    try:
        logged = torch.as_tensor(value, dtype=torch.float64).detach()
    except (TypeError, ValueError, RuntimeError):
        logged = None
    if not isinstance(key, str) or logged is None or logged.numel() != 1:
        what = f"the key {key!r}" if not isinstance(key, str) else (
            f"{key!r} = {type(value).__name__}" + (f" {_shape(value)}" if isinstance(value, torch.Tensor) else ""))
        raise PLLZooError(f"a component of {recipe!r} logged {what} in step.logs; step logs are scalars "
                          "(averaged over the epoch)")
    return logged


def reserved_clash(logged: dict, metrics: dict, writers: dict[str, str], recipe: str) -> None:
    """Refuse logged keys that are a record's own fields (:data:`RECORD_KEYS`) or its metrics: a component
    logging ``seed`` or ``method`` would relabel the run.  ``writers``: key → who logged it, for the message."""
    clash = sorted(k for k in logged if k in RECORD_KEYS or k in metrics)
    if clash:
        who = writers.get(clash[0], f"a component of {recipe!r} (step.logs)")
        raise PLLZooError(f"{who} logs {clash[0]!r}, a field of the record itself; log it under another name")


# ---------------------------------------------------------------------- a step of one row
def one_row_step(batch_size: int, rows: int, drop_last: bool) -> bool:
    """Whether an epoch over ``rows`` training rows in batches of ``batch_size`` has a step of one row (the
    trainer's split: ``rows // batch_size`` steps with ``drop_last``, else ``ceil(rows / batch_size)``)."""
    return batch_size == 1 or (not drop_last and rows % batch_size == 1)


def fails_on_one_row(exc: BaseException) -> bool:
    """Whether ``exc`` is torch's refusal of a BatchNorm over one value per channel (BatchNorm1d over one row;
    a 2-d one whose map is 1 × 1): torch checks the sizes, so an image backbone normalising a map larger than
    1 × 1 trains on one row (an outside review: ``cnn``, ``resnet18`` and ``wrn28-2`` were refused, and train)."""
    return isinstance(exc, ValueError) and "Expected more than 1 value per channel" in str(exc)


def one_row_fails(model: torch.nn.Module, input_shape: tuple[int, ...]) -> bool:
    """Whether a training-mode forward of one zero row through ``model`` fails in a BatchNorm (it updates the
    BatchNorm statistics: for a model built to be checked, not the one trained)."""
    mode = model.training
    model.train()
    try:
        with torch.no_grad():
            model(torch.zeros((1, *input_shape)))
    except ValueError as exc:
        if fails_on_one_row(exc):
            return True
        raise
    finally:
        model.train(mode)
    return False


def one_row_error(batch_size: int, rows: int, model: str) -> PLLZooError:
    """The one line for a step of one row through BatchNorm (torch's own words, "Expected more than 1 value per
    channel", name no setting)."""
    return PLLZooError(
        f"a step of one row: batch size {batch_size} on {rows} training rows"
        + ("" if batch_size == 1 else " leaves a last batch of 1 (train.drop_last=false)")
        + f", and BatchNorm in {model!r} cannot normalise one row; "
        + ("raise --batch-size" if batch_size == 1 else "change --batch-size or set train.drop_last=true"))
