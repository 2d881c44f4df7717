"""Under torchrun, a run that failed on one process only: the line that ends the bench says whose doing it was.
A collective's own error here (gloo's timeout, a peer's closed connection) is another process's (an outside review:
a hang on rank 1 was "an error of this process alone: its device or disk" on rank 0)."""

from __future__ import annotations

import pytest

from pllzoo import bench
from pllzoo.distributed import collective_error

TIMEOUT = "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 20000ms " \
          "for recv operation to complete"
LEFT = "loss component 'x.boom' (plugin 'x') failed in pllzoo_loss: RuntimeError: [/pytorch/third_party/gloo/gloo/" \
       "transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:3457"


@pytest.mark.parametrize("text, kind", [(TIMEOUT, "timeout"), (LEFT, "left"),
                                        ("RuntimeError: boom on rank 1 only", None),
                                        ("ValueError: timeout must be positive", None),  # no collective's words
                                        ("NCCL error: Watchdog caught collective operation timeout", "timeout")])
def test_collective_errors_by_their_words(text, kind):
    assert collective_error(text) == kind


class FakeDist:
    """A process of two whose run failed here alone (nobody said otherwise within the wait)."""

    active, rank = True, 0

    def __init__(self):
        self.said = None

    def ended(self):
        return None

    def failed_everywhere(self, key, give_up):
        return False

    def end(self, line):
        self.said = line


@pytest.mark.parametrize("reason, starts", [
    (TIMEOUT, "the bench ends: m seed 1 failed on rank 0: another process did not reach a collective in time "
              "(PLLZOO_DIST_TIMEOUT_S): it hangs, or it stopped; its own output says why; here: RuntimeError"),
    (LEFT, "the bench ends: m seed 1 failed on rank 0: another process left a collective (it failed or exited; its "
           "own output says why); here: loss component"),
    ("RuntimeError: out of memory", "the bench ends: m seed 1 failed on rank 0: RuntimeError: out of memory, and not "
                                    "on every process within"),
])
def test_the_line_that_ends_the_bench_says_whose_doing_it_was(reason, starts):
    dist = FakeDist()
    line = bench._failed_alone(dist, "0/0", "m seed 1", reason)
    assert line.startswith(starts), line
    assert dist.said == line.removeprefix("the bench ends: ")
