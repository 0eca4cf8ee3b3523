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
