"""A comparison's runs share what their backend can share: the emulator's Ray session is started once for
all policies of a ``compare`` (not once per policy), and not at all when one run or none is left to do.

The emulator's runs are stood in for by the simulator's here (the count of sessions is the point; a real
two-policy emulated comparison runs in tests/test_tutorial.py, section 4)."""

import contextlib
from pathlib import Path

import pytest

from raytestbed.backends import BACKENDS
from raytestbed.cli import main
from raytestbed.sim.backend import SimBackend


@pytest.fixture
def sessions(monkeypatch):
    """The emulator's backend with runs done by the simulator and its sessions counted."""
    emu = BACKENDS["emu"]
    opened: list[tuple[int, int]] = []  # (GPUs of the cluster, runs started while open)
    state = {"open": False, "runs": 0}

    @contextlib.contextmanager
    def session(trial, cluster):
        assert not state["open"], "a session inside a session"
        state["open"], state["runs"] = True, 0
        try:
            yield
        finally:
            state["open"] = False
            opened.append((cluster.total_gpus, state["runs"]))

    def run(run):
        state["runs"] += state["open"]
        return SimBackend().run(run)

    monkeypatch.setattr(emu, "session", session)
    monkeypatch.setattr(emu, "run", run)
    monkeypatch.setattr(emu, "missing", lambda: None)
    monkeypatch.setattr(emu, "refusal", lambda *a, **k: None)
    return opened


def _trial(tmp_path: Path) -> Path:
    t = tmp_path / "t.yaml"
    t.write_text("cluster: laptop.yaml\nworkload: {kind: synthetic, jobs: 4, iterations: [10, 20]}\n")
    return t


def test_a_comparison_opens_one_session_for_all_its_policies(tmp_path, sessions):
    out = tmp_path / "cmp"
    assert main(["compare", str(_trial(tmp_path)), "--policies", "fifo,spjf,asrpt", "--backend", "emu",
                 "--out", str(out), "--quiet"]) == 0
    assert sessions == [(16, 3)]  # the laptop cluster's 16 GPUs, three runs inside one session


def test_one_policy_needs_no_shared_session(tmp_path, sessions):
    assert main(["compare", str(_trial(tmp_path)), "--policies", "fifo", "--backend", "emu",
                 "--out", str(tmp_path / "one"), "--quiet"]) == 0
    assert sessions == []  # the run's own EmuCluster starts and stops Ray, as a single run does

