"""scripts/reproduce_asrpt.py and scripts/bench_placement.py, reduced sizes."""

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from raytestbed.config import CLUSTER_CONFIG_DIR
from raytestbed.schedulers.base import available_policies
from raytestbed.traces.datadir import find_data_dir

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _script(name):
    sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_bench_placement_table2_small():
    bench = _script("bench_placement")
    name, rows = bench.table2(["gpt-tiny"], 3, 6, 0, CLUSTER_CONFIG_DIR / "asrpt_sim_250x8.yaml")
    assert name in ("heavy_edge", "contiguous_mapper (heavy_edge not available)")
    (r,) = rows
    assert r["cases"] == 3 and r["ilp_pitt_ms"] > 0
    assert r["mapper_pitt_ms"] >= r["ilp_pitt_ms"] * (1 - 1e-9)  # the ILP never loses
    assert "gap %" in bench.format_table2(name, rows)


def test_random_caps_are_valid():
    import numpy as np
    bench = _script("bench_placement")
    rng = np.random.default_rng(0)
    for gpus in (2, 5, 16, 30):
        for _ in range(20):
            caps = bench.random_caps(rng, gpus, 8)
            assert sum(caps) == gpus and len(caps) >= 2 and max(caps) <= 8 and min(caps) >= 1


@pytest.mark.parametrize("policies", [
    ("asrpt-perfect",),  # no predictor to fit: cheap
    pytest.param(("asrpt", "asrpt-perfect", "spjf", "spwf", "wcs-duration", "wcs-workload", "wcs-subtime"),
                 marks=pytest.mark.slow),
])
def test_reproduce_quick(tmp_path, policies):
    d = find_data_dir([Path(__file__).parent])
    if d is None or not (d / "dirlab-helios-philly-15k").is_dir():
        pytest.skip("shared/data not available")
    repro = _script("reproduce_asrpt")
    regs = [p for p in policies if p in available_policies()]
    out = tmp_path / "r"
    repro.main(["--quick", "--out", str(out), "--trace", "philly15k", "--sweeps", "jobs", "--history", "100", "--retrain-every", "100000",
                "--policies", ",".join(regs + ["no-such-policy"])])
    summary = (out / "summary.md").read_text()
    assert "no-such-policy" in summary and "Paper: Fig. 6" in summary
    if regs:
        df = pd.read_csv(out / "runs.csv")
        assert set(df["policy"]) == set(regs)
        assert sorted(df["x"].unique()) == [150, 300]
        assert (df["finished"] == df["jobs"]).all() and (df["total_jct_s"] > 0).all()
        assert (out / "jobs.png").stat().st_size > 0


def test_reproduce_history_jobs_flag_trains_on_that_many_jobs(tmp_path):
    d = find_data_dir([Path(__file__).parent])
    if d is None or not (d / "dirlab-helios-philly-15k").is_dir():
        pytest.skip("shared/data not available")
    repro = _script("reproduce_asrpt")
    out = tmp_path / "r"
    repro.main(["--quick", "--out", str(out), "--trace", "philly15k", "--sweeps", "jobs", "--history-jobs", "40",
                "--retrain-every", "100000", "--policies", "spjf"])
    df = pd.read_csv(out / "runs.csv")
    assert set(df["policy"]) == {"spjf"} and (df["history_jobs"] == 40).all()
    assert (df["finished"] == df["jobs"]).all()
    # the same rows reach the predictor: a set preceded by 40 history jobs
    rows = repro.read_trace("philly15k")
    cluster = repro.load_cluster(CLUSTER_CONFIG_DIR / "asrpt_sim_250x8.yaml").build()
    js = repro.make_jobset(rows, 30, 40, 1, cluster, 1.0, None)
    assert len(js.history) == 40 and len(js.jobs) == 30
    params = repro.policy_params("spjf", None, js.history, 100000)
    assert params["history"] == js.history


def test_reproduce_quick_on_the_google_workload(tmp_path, monkeypatch):
    """--workload google: the kind's rows (GPUs drawn per logical name), holdout predictor errors per job set."""
    import gzip

    from raytestbed.traces.datadir import ENV_VAR
    root = tmp_path / "data"
    (root / "google-2011-jobs").mkdir(parents=True)
    with gzip.open(root / "google-2011-jobs" / "google2011_job_arrivals.csv.gz", "wt") as f:
        f.write("submit_s,job_id,scheduling_class,user_idx,logical_job_name_idx,run_s,end_event\n")
        f.writelines(f"{600 + 7 * i},{i},{i % 3},{i % 5},{i % 23},{30 + (i % 23) * 11},FINISH\n" for i in range(700))
    (root / "aaic-gpu-workload").mkdir()
    with gzip.open(root / "aaic-gpu-workload" / "aaicwl-201807-201812.csv.gz", "wt") as f:
        f.write("id, user, group, queue, nodes, gpus, walltime_req, termcode, time_submit, time_start, time_end, "
                "waittime, walltime\n")
        f.writelines(f"{i}, 0, 0, 0, 1, {g}, 3600, 0, {1_500_000_000 + i}, 0, 0, 0, 60\n"
                     for i, g in enumerate([1, 1, 2, 4, 8, 4096]))
    monkeypatch.setenv(ENV_VAR, str(root))
    repro = _script("reproduce_asrpt")
    out = tmp_path / "r"
    repro.main(["--quick", "--out", str(out), "--workload", "google", "--sweeps", "jobs", "--history", "100",
                "--retrain-every", "100000", "--policies", "asrpt-perfect"])
    df = pd.read_csv(out / "runs.csv")
    assert sorted(df["x"].unique()) == [150, 300] and (df["finished"] == df["jobs"]).all()
    ho = pd.read_csv(out / "predictor_holdout.csv")
    assert set(ho["predictor"]) == {"rf", "rf-features", "median", "mean", "last20"}
    assert set(ho["x"]) == {150, 300} and set(ho["test_jobs"]) == {50, 80}  # 20% of 100 + n
    # every logical name recurs: iterations are a function of the group (one run time per name)
    assert (ho[ho["predictor"] == "median"]["mae_iterations"] == 0).all()
    assert "later 20% of history + set" in (out / "summary.md").read_text()
    rows = repro.read_trace("google", 1, 2000)
    assert len(rows) == 700 and {r.gpus for r in rows} <= {1, 2, 4, 8}
