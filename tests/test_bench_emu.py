"""`raytestbed bench emu`: the trial copies `--no-fast-forward` and `bench emu-breakdown --workers` run,
and `--repeat`'s run-to-run spread."""

from pathlib import Path

import pandas as pd

from raytestbed.config import load_trial
from benchmarks.emu import trial_copy, without_fast_forward

TRIALS = Path(__file__).resolve().parents[1] / "workloads" / "trials"


def test_copy_without_fast_forward_loads_the_same_trial(tmp_path):
    original = load_trial(TRIALS / "demo_emu.yaml")
    copy = load_trial(without_fast_forward(TRIALS / "demo_emu.yaml", tmp_path))
    assert not copy.trial.emu.fast_forward.enabled
    assert original.trial.emu.fast_forward.enabled
    assert copy.trial.emu.compute == original.trial.emu.compute
    assert copy.trial.cluster == original.trial.cluster
    assert copy.trial.workload.model_dump() | {"path": None} == original.trial.workload.model_dump() | {"path": None}


def test_copy_with_a_worker_layout_keeps_the_trial_and_its_cluster_file(tmp_path):
    original = load_trial(TRIALS / "demo.yaml")  # its cluster is a file name, resolved in cluster_configs/
    for layout in ("pool", "clock"):
        copy = load_trial(trial_copy(TRIALS / "demo.yaml", tmp_path, {"workers": layout}, f"w_{layout}"))
        assert copy.trial.emu.workers == layout and original.trial.emu.workers == "auto"
        assert copy.cluster_config == original.cluster_config
        assert copy.trial.workload == original.trial.workload


def _jobs(folder: Path, jcts, skipped) -> Path:
    folder.mkdir(parents=True)
    pd.DataFrame({"job_id": range(len(jcts)), "jct_s": jcts, "skipped_iterations": skipped}).to_csv(
        folder / "jobs.csv", index=False)
    return folder


def test_repeat_stats_give_total_and_per_job_spread_and_compare_the_skipped_iterations(tmp_path):
    from benchmarks.emu import repeat_stats, spread

    assert spread([1.0]) == 0.0 and spread([9.0, 11.0]) == 0.2
    quiet = [_jobs(tmp_path / "q1", [4.0, 1.0], [47, 26]), _jobs(tmp_path / "q2", [4.0, 1.1], [47, 26])]
    loaded = [_jobs(tmp_path / "l1", [4.2, 1.0], [47, 26]), _jobs(tmp_path / "l2", [3.8, 1.0], [47, 26])]
    rep = repeat_stats({"quiet": quiet, "loaded": loaded})
    assert rep["quiet"]["total_jct_s"] == [5.0, 5.1]
    assert abs(rep["quiet"]["total_jct_spread"] - 0.1 / 5.05) < 1e-12
    assert rep["quiet"]["job_of_max_spread"] == 1 and abs(rep["quiet"]["max_job_jct_spread"] - 0.1 / 1.05) < 1e-12
    assert rep["loaded"]["job_of_max_spread"] == 0 and abs(rep["loaded"]["max_job_jct_spread"] - 0.1) < 1e-12
    assert rep["all"]["runs"] == 4 and rep["same_iterations_skipped"]
    other = _jobs(tmp_path / "l3", [4.0, 1.0], [46, 26])
    assert not repeat_stats({"quiet": quiet, "loaded": [other]})["same_iterations_skipped"]


def test_every_shipped_trial_file_loads():
    """The trials the docs' commands name (scale_replay256, parity_*, demo, ...) parse and validate."""
    files = sorted(TRIALS.glob("*.yaml"))
    assert any(f.stem == "scale_replay256" for f in files)
    for f in files:
        assert load_trial(f).trial.name, f


def test_emu_breakdown_refuses_an_unknown_worker_layout_before_running(capsys):
    import pytest

    from benchmarks.emu_breakdown import main

    with pytest.raises(SystemExit) as e:
        main(["--trial", "demo_emu", "--workers", "pool,hosts"])
    assert e.value.code == 2 and "--workers" in capsys.readouterr().err
