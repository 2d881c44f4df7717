"""The process's age (``--time-limit`` counts from the process's start: an outside review found it counted from
after torch's import, seconds on a cluster's shared file system)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO
from pllzoo import procinfo


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="read from /proc")
def test_the_age_counts_what_the_process_did_before_importing_pllzoo():
    script = "import time; time.sleep(1.0); from pllzoo import procinfo; print(procinfo.age_s())"
    age = float(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                               check=True, timeout=120).stdout)
    assert 1.0 <= age < 60
    assert procinfo.start_ticks(os.getpid()) is not None and procinfo.start_ticks(2**22 + 7) is None


def test_without_proc_the_age_is_unknown(monkeypatch):
    monkeypatch.setattr(procinfo, "start_ticks", lambda pid: None)
    assert procinfo.age_s() is None
