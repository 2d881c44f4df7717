"""EXAMPLE ONLY — a pllzoo observer plugin written as an MLflow tracker would be, with a stub client.

``pllzoo bench --observe example.tracker=URI`` logs every run as one tracking run: its tags and
hyper-parameters at the start, every epoch's numbers (step = the record's position in log.jsonl) and
its status at the end.  For real MLflow, replace the import below with ``import mlflow as client``
(the calls are MLflow's); docs/observers.md shows the W&B variant.  Imports only ``pllzoo``.
"""

from __future__ import annotations

from typing import Any

from pllzoo import Observer, PLLZooError, RunInfo, RunSummary, hookimpl

from pllzoo_tracker_example import stub_client as client  # EXAMPLE: `import mlflow as client` in a real plugin

STATUS = {"finished": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}  # pllzoo's -> MLflow's run status


def numbers(record: dict[str, Any]) -> dict[str, float]:
    """The numeric values of an epoch record (bools, lists and strings left out)."""
    return {k: float(v) for k, v in record.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class ExampleTracker(Observer):
    """One tracking run per pllzoo run; ``arg`` is the tracking URI."""

    @classmethod
    def check(cls, arg: str | None) -> None:
        if not arg:
            raise PLLZooError("observer example.tracker needs a tracking URI: --observe example.tracker=URI")

    @hookimpl
    def pllzoo_observe_run_start(self, run: RunInfo) -> None:
        client.set_tracking_uri(self.arg)
        client.start_run(run_name=run.run_id, tags={"method": run.method, "dataset": run.dataset,
                                                    "seed": str(run.seed), "resumed": str(run.resumed)})
        hparams = run.config.get("hparams", {})
        client.log_params({f"{slot}.{k}": v for slot, fields in hparams.items() for k, v in fields.items()})

    @hookimpl
    def pllzoo_observe_epoch(self, record: dict[str, Any], step: int) -> None:
        client.log_metrics(numbers(record), step=step)

    @hookimpl
    def pllzoo_observe_run_end(self, summary: RunSummary) -> None:
        client.end_run(status=STATUS[summary.status])


@hookimpl
def pllzoo_register_observers(register):
    register("example.tracker", ExampleTracker)
