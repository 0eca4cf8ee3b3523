"""(slow) The must-show resume on the emulator: ``workloads/trials/demo_emu.yaml`` (replay), FIFO,
stopped by a real SIGTERM after 5 jobs had finished, then ``raytestbed run --resume``: ``jobs.csv``
and ``iterations.csv`` are byte for byte those of the uninterrupted run, and the interrupted run's
terminal output is one line.

The interrupted run is a child process (the command line, starting its own local Ray) that holds
still right after its fifth finished job is journaled (a wrapper around the journal callback), so
the signal lands after 5 jobs however loaded the host is. The uninterrupted and the resumed run
share one Ray instance in this process (Ray's start-up dominates their wall time).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray")

from raytestbed.cli import main  # noqa: E402
from raytestbed.emu.backend import emulator_missing  # noqa: E402
from raytestbed.results.journal import read_journal  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(emulator_missing() is not None, reason=f"emulator: {emulator_missing()}")]

TRIAL = Path(__file__).resolve().parents[1] / "workloads" / "trials" / "demo_emu.yaml"
HOLD_AFTER = 5

CHILD = f"""
import sys, time
import raytestbed.trial as trial
_orig = trial._FinishedJournal.__call__
_done = [0]
def _hold(self, jid):
    _orig(self, jid)
    _done[0] += 1
    if _done[0] >= {HOLD_AFTER}:
        time.sleep(600)  # the signal ends this
trial._FinishedJournal.__call__ = _hold
from raytestbed.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _finished_lines(tmp_path: Path) -> int:
    return sum('"kind":"finished"' in line for j in tmp_path.glob("r.partial-*/journal.jsonl")
               for line in j.read_text(encoding="utf-8").splitlines())


@pytest.mark.timeout(1800)  # three emulated runs of demo_emu, two Ray starts: ~10 min on a busy 2-core host
def test_demo_emu_resumed_after_sigterm_is_the_uninterrupted_run(tmp_path):
    out, full = tmp_path / "r", tmp_path / "full"
    child = subprocess.Popen([sys.executable, "-c", CHILD, "run", str(TRIAL), "--policy", "fifo", "--out", str(out),
                              "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 900
        while _finished_lines(tmp_path) < HOLD_AFTER:
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, f"the child journaled no {HOLD_AFTER} jobs within 900 s"
            time.sleep(0.2)
        child.send_signal(signal.SIGTERM)
        stdout, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 143, err
    # the signal adds one clean line: no Ray or C-level stack ("*** SIGTERM received ..."), no traceback
    # (what Ray prints while it starts is not the signal's: the notices of a slow start, Ray's own
    # start-up lines)
    startup = re.compile(r"raytestbed: .* is starting slowly|INFO worker.py.*Started a local Ray|"
                         r"\(raylet\).*PYTHON worker processes have been started")
    said = [x for x in (stdout + err).splitlines() if x.strip() and not startup.search(x)]
    assert len(said) == 1 and said[0].startswith("raytestbed: terminated; finished jobs are journaled"), said
    assert "SIGTERM received" not in stdout + err and "Traceback" not in stdout + err
    assert (out / "RESUMABLE.json").is_file() and len(read_journal(out / "journal.jsonl").rows) == HOLD_AFTER

    from raytestbed.emu.raysession import RaySession

    session = RaySession.open(num_cpus=2, resources={"emu_gpu": 16}, configure_logging=False)
    try:
        assert main(["run", str(TRIAL), "--policy", "fifo", "--out", str(full), "--quiet"]) == 0
        assert main(["run", "--resume", str(out), "--quiet"]) == 0
    finally:
        session.close()
    for name in ("jobs.csv", "iterations.csv", "gpu_intervals.csv"):
        assert (out / name).read_bytes() == (full / name).read_bytes(), name
    jobs = pd.read_csv(out / "jobs.csv")
    assert (jobs["status"] == "finished").all() and (jobs["measured_iterations"] > 0).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed"] == {"journaled_jobs": HOLD_AFTER, "remaining_jobs": len(jobs) - HOLD_AFTER,
                                  "differing_jobs": [], "comparable": True}
    assert summary["total_jct_s"] == json.loads((full / "summary.json").read_text())["total_jct_s"]
