"""A run stopped by a real SIGTERM or SIGINT leaves nothing, or a folder that ``--resume`` completes.

The run is a child process (``raytestbed.cli.main`` on the simulator). The child holds still
(sleeps) right after its third finished job is journaled (a wrapper around the journal
callback, nothing else changed), so the signal lands after some jobs have finished and before
the run ends however loaded the host is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from raytestbed.cli import main
from raytestbed.results.journal import read_journal

JOBS = 40

CHILD = """
import signal, sys, time
# Ctrl-C as in a terminal, also when the tests run as a background job (which starts with SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
import raytestbed.trial as trial
_orig = trial._FinishedJournal.__call__
_done = [0]
def _hold(self, jid):
    _orig(self, jid)
    _done[0] += 1
    if _done[0] >= 3:
        time.sleep(120)  # the signal ends this
trial._FinishedJournal.__call__ = _hold
from raytestbed.cli import main
sys.exit(main(sys.argv[1:]))
"""

#: the same child, but the simulation waits before its first event (signal lands before any job ends)
CHILD_PAUSED = CHILD.replace("from raytestbed.cli import main", """
import raytestbed.sim.engine as engine
_run = engine.Simulator.run
def _late(self, *a, **k):
    time.sleep(120)  # the signal ends this
    return _run(self, *a, **k)
engine.Simulator.run = _late
from raytestbed.cli import main""")


def _trial(tmp_path: Path) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(f"""
cluster: laptop.yaml
seed: 5
workload: {{kind: synthetic, jobs: {JOBS}, mean_interarrival_s: 30, iterations: [50, 400],
           models: [resnet50, vgg16], gpu_mix: {{1: 0.4, 2: 0.4, 4: 0.2}}}}
""")
    return p


def _finished_lines(tmp_path: Path) -> int:
    n = 0
    for j in tmp_path.glob("r.partial-*/journal.jsonl"):
        n += sum('"kind":"finished"' in line for line in j.read_text(encoding="utf-8").splitlines())
    return n


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run's results folder."""
    d = tmp_path_factory.mktemp("ref")
    assert main(["run", str(_trial(d)), "--out", str(d / "full"), "--quiet"]) == 0
    return d / "full"


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143),
                                       pytest.param(signal.SIGINT, 130, marks=pytest.mark.slow)])
def test_signal_leaves_a_folder_that_resume_completes(tmp_path, reference, sig, code):
    t = _trial(tmp_path)
    out = tmp_path / "r"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, "run", str(t), "--out", str(out), "--quiet"],
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while _finished_lines(tmp_path) < 3:  # three jobs journaled; the child now waits for the signal
            assert child.poll() is None, child.stderr.read()
            assert time.monotonic() < deadline, "the child journaled no job within 120 s"
            time.sleep(0.02)
        child.send_signal(sig)
        err = child.communicate(timeout=60)[1]
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == code, err
    assert err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert not list(tmp_path.glob("r.partial-*")) and not list(tmp_path.glob("r.old-*"))
    assert (out / "RESUMABLE.json").is_file(), err
    assert f"--resume {out}" in err
    journaled = read_journal(out / "journal.jsonl")
    assert len(journaled.rows) == 3

    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    jobs = pd.read_csv(out / "jobs.csv")
    assert not (out / "RESUMABLE.json").exists()
    assert len(jobs) == JOBS and jobs["job_id"].is_unique and (jobs["status"] == "finished").all()
    # the resumed run is the uninterrupted run, job for job
    assert (out / "jobs.csv").read_bytes() == (reference / "jobs.csv").read_bytes()
    ref = pd.read_csv(reference / "jobs.csv").set_index("job_id")
    for jid, row in journaled.rows.items():  # the jobs finished before the signal, from the journal
        assert row["finish_s"] == ref.loc[jid, "finish_s"] and row["placement"] == ref.loc[jid, "placement"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed"]["journaled_jobs"] == len(journaled.rows) and summary["resumed"]["comparable"]


@pytest.mark.slow  # a long end-to-end run: `make test-slow`
def test_signal_before_any_job_finished_leaves_nothing(tmp_path):
    """SIGTERM while no job has finished: no folder at all (SIGINT takes the same path, checked above)."""
    sig, code = signal.SIGTERM, 143
    t = _trial(tmp_path)
    out = tmp_path / "r"
    child = subprocess.Popen([sys.executable, "-c", CHILD_PAUSED, "run", str(t), "--out", str(out), "--quiet"],
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("r.partial-*/journal.jsonl")):  # the run has started writing
            assert child.poll() is None, child.stderr.read()
            assert time.monotonic() < deadline, "the child wrote no journal within 120 s"
            time.sleep(0.02)
        child.send_signal(sig)
        err = child.communicate(timeout=60)[1]
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == code, err
    assert "no results folder was written" in err and err.strip().count("\n") == 0, err
    assert not out.exists() and not list(tmp_path.glob("r.*"))
