"""scripts/reproduce_parrot.py: flags, per-job rows and the Fig. 8 table (the runs themselves: docs)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest

from raytestbed.traces.datadir import find_data_dir
from raytestbed.traces.parrot_workloads import MS60_FILE

ROOT = Path(__file__).resolve().parents[1]
DATA = find_data_dir([Path(__file__).parent])


@pytest.fixture(scope="module")
def rp():
    spec = importlib.util.spec_from_file_location("reproduce_parrot", ROOT / "scripts" / "reproduce_parrot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("argv, flag", [(["--etas", "-1"], "--etas"), (["--etas", "1,x"], "--etas"),
                                        (["--theta-maxes", "0.5,1.0"], "--theta-maxes"),
                                        (["--arrival-scale", "0"], "--arrival-scale"),
                                        (["--only", "fig5,fig6"], "--only")])
def test_bad_sweep_values_are_named(rp, capsys, argv, flag):
    with pytest.raises(SystemExit) as e:
        rp.main(argv)
    assert e.value.code == 2
    assert flag in capsys.readouterr().err


def test_theta_table_compares_each_theta_with_the_one_baseline_run(rp):
    nan = math.nan
    d = pd.DataFrame([
        {"scheme": "parrot", "gbps": 10.0, "theta_max": 0.6, "total_jct_s": 80.0, "ratio_to_lb": 2.0},
        {"scheme": "parrot", "gbps": 10.0, "theta_max": 0.9, "total_jct_s": 90.0, "ratio_to_lb": 2.25},
        {"scheme": "aalo", "gbps": 10.0, "theta_max": nan, "total_jct_s": 100.0, "ratio_to_lb": 2.5},
        {"scheme": "lccf", "gbps": 10.0, "theta_max": nan, "total_jct_s": 120.0, "ratio_to_lb": 3.0},
    ])
    t = rp.theta_table(d)
    assert list(t.theta_max) == [0.6, 0.9]
    assert list(t["parrot_vs_aalo_%"]) == pytest.approx([20.0, 10.0])
    assert list(t["parrot_vs_lccf_%"]) == pytest.approx([100 / 3, 25.0])
    assert list(t.parrot_x_lb) == [2.0, 2.25]


@pytest.mark.skipif(DATA is None or not DATA.joinpath(*MS60_FILE).is_file(), reason="shared data absent")
def test_run_one_reports_eta_theta_and_per_job_rows(rp):
    wl = {"iteration_scale": 0.0005, "arrival_scale": 0.0005, "limit": 5}
    r = rp.run_one("fig7", "parrot", 10.0, "ms60", wl, 1, net_params={"observe_interval_s": 0.01, "theta_max": 0.7})
    assert (r["eta_ms"], r["theta_max"], r["jobs_n"]) == (10.0, 0.7, 5)
    jobs = pd.DataFrame(r["per_job"])
    assert len(jobs) == 5 and jobs.jct_s.sum() == pytest.approx(r["total_jct_s"])
    assert (jobs.jct_s >= jobs.lower_bound_s * (1 - 1e-9)).all()
    a = rp.run_one("fig7", "aalo", 10.0, "ms60", wl, 1)
    assert a["eta_ms"] == 0.0 and math.isnan(a["theta_max"])
