"""A test plugin whose losses fail: ``--jobs`` workers must import it, so it lives in a module, not a test.

Registered in-process by ``tests/test_jobs.py`` (``pm.register(jobs_plugin, name="jobtest")``); a
worker re-imports it by name from the parent's ``sys.path`` (:func:`pllzoo.jobs.plugin_specs`).
"""

from __future__ import annotations

import os
import warnings

from pllzoo import Component, Method, hookimpl


class Boom(Component):
    """A loss that warns, then raises, on its first step."""

    @hookimpl
    def pllzoo_loss(self, step, state):
        warnings.warn("about to fail")
        raise RuntimeError("boom\nsecond line that the report must not show")


class Die(Component):
    """A loss whose process dies without a word, as if killed."""

    @hookimpl
    def pllzoo_loss(self, step, state):
        os._exit(3)


class CtrlC(Component):
    """A loss that raises ``KeyboardInterrupt`` itself (no signal came): its run fails, the bench goes on."""

    @hookimpl
    def pllzoo_loss(self, step, state):
        raise KeyboardInterrupt


@hookimpl
def pllzoo_register_losses(register):
    register("jobtest.boom", Boom)
    register("jobtest.die", Die)
    register("jobtest.ctrlc", CtrlC)


@hookimpl
def pllzoo_register_methods(register):
    register(Method("jobtest-boom", loss="jobtest.boom"))
    register(Method("jobtest-die", loss="jobtest.die"))
    register(Method("jobtest-ctrlc", loss="jobtest.ctrlc"))
