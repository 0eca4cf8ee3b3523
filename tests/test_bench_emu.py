"""`raytestbed bench emu --no-fast-forward`: the trial copy it runs."""

from pathlib import Path

from raytestbed.config import load_trial
from benchmarks.emu import without_fast_forward

TRIALS = Path(__file__).resolve().parents[1] / "workloads" / "trials"


def test_copy_without_fast_forward_loads_the_same_trial(tmp_path):
    original = load_trial(TRIALS / "demo_emu.yaml")
    copy = load_trial(without_fast_forward(TRIALS / "demo_emu.yaml", tmp_path))
    assert not copy.trial.emu.fast_forward.enabled
    assert original.trial.emu.fast_forward.enabled
    assert copy.trial.emu.compute == original.trial.emu.compute
    assert copy.trial.cluster == original.trial.cluster
    assert copy.trial.workload.model_dump() | {"path": None} == original.trial.workload.model_dump() | {"path": None}
