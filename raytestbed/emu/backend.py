"""The emulated backend of ``raytestbed run/compare --backend emu``.

Runs a trial on the Ray emulated cluster (:mod:`raytestbed.emu.cluster`) with real
job executors (:mod:`raytestbed.emu.executors`); the policy is wrapped unchanged by
the scheduler actor (:mod:`raytestbed.emu.scheduler_actor`).
"""

from __future__ import annotations

import importlib


def emulator_missing() -> str | None:
    """None if the emulator's parts are installed, else a one-line reason."""
    for mod, names in (("raytestbed.emu.cluster", ("EmuCluster",)), ("raytestbed.emu.executors", ("start_job",)),
                       ("raytestbed.emu.scheduler_actor", ("SchedulerActor",))):
        try:
            m = importlib.import_module(mod)
        except ImportError as e:
            return f"cannot import {mod} ({e})"
        for n in names:
            if not hasattr(m, n):
                return f"{mod} has no {n}"
    return None
