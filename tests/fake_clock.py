"""A deterministic clock for the bookkeeping tests: time moves only when the trainer works.

``install(monkeypatch)`` replaces :data:`pllzoo.checkpoint.clock` and makes every epoch take
``epoch_s`` and every checkpoint write ``save_s`` seconds of this clock, and records each epoch's
``wall_s`` as ``epoch_s`` (a resumed run estimates its next epoch from them), so stop decisions never
depend on how fast or loaded the test machine is.  ``saves`` lists ``(stage, epoch)`` of every checkpoint.
"""

from __future__ import annotations

from pllzoo import checkpoint, trainer


class FakeClock:
    def __init__(self, epoch_s: float = 10.0, save_s: float = 1.0) -> None:
        self.t, self.epoch_s, self.save_s = 1000.0, epoch_s, save_s
        self.saves: list[tuple[int, int]] = []

    def __call__(self) -> float:
        return self.t


def install(monkeypatch, epoch_s: float = 10.0, save_s: float = 1.0) -> FakeClock:
    clock = FakeClock(epoch_s, save_s)
    epoch, save = trainer.Trainer._epoch, trainer.save_checkpoint

    def timed_epoch(self, *args, **kwargs):
        record = epoch(self, *args, **kwargs)
        record["wall_s"] = clock.epoch_s  # the real seconds would reach the resumed parts' estimates
        clock.t += clock.epoch_s
        return record

    def timed_save(run_dir, stage, epoch_index, *args, **kwargs):
        clock.saves.append((stage, epoch_index))
        path = save(run_dir, stage, epoch_index, *args, **kwargs)
        clock.t += clock.save_s
        return path

    monkeypatch.setattr(checkpoint, "clock", clock)
    monkeypatch.setattr(trainer.Trainer, "_epoch", timed_epoch)
    monkeypatch.setattr(trainer, "save_checkpoint", timed_save)
    return clock
