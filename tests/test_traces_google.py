"""The Google 2011 workload kind (``google``): window selection, arrival scaling, bad rows, recurrence key."""

import gzip
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from conftest import small_cluster
from raytestbed.cli import main
from raytestbed.core.timing import asrpt_alpha_min_tilde
from raytestbed.errors import ConfigError, TraceError
from raytestbed.placement.heavy_edge import heavy_edge_mapper
from raytestbed.traces.datadir import ENV_VAR, find_data_dir
from raytestbed.traces.google import local_hour
from raytestbed.traces.registry import load_workload, workload_kinds

REPO = Path(__file__).resolve().parents[1]
HEADER = "submit_s,job_id,scheduling_class,user_idx,logical_job_name_idx,run_s,end_event\n"
AAIC_HEADER = ("id, user, group, queue, nodes, gpus, walltime_req, termcode, time_submit, time_start, time_end, "
               "waittime, walltime\n")
AAIC_GPUS = [1, 1, 1, 2, 4, 8, 32]  # the fake GPU trace the groups draw from (32 does not fit 4 x 4)


def google_rows(n=60):
    """n jobs, 10 s apart from t = 1000 s; 6 logical names, 3 users; every 7th killed, row 12 without run time."""
    out = []
    for i in range(n):
        run, end = f"{100.0 + 5 * i}", ("KILL" if i % 7 == 3 else "FINISH")
        if i == 12:
            run, end = "", ""
        out.append(f"{1000.0 + 10 * i},{9000 + i},{i % 4},{i % 3},{i % 6},{run},{end}\n")
    return out


def write_google(root: Path, lines) -> Path:
    d = root / "google-2011-jobs"
    d.mkdir(parents=True, exist_ok=True)
    p = d / "google2011_job_arrivals.csv.gz"
    with gzip.open(p, "wt") as f:
        f.write(HEADER + "".join(lines))
    return p


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "shared" / "data"
    write_google(root, google_rows())
    (root / "aaic-gpu-workload").mkdir(parents=True)
    with gzip.open(root / "aaic-gpu-workload" / "aaicwl-201807-201812.csv.gz", "wt") as f:
        f.write(AAIC_HEADER + "".join(f"{i}, 0, 0, 0, 1, {g}, 3600, 0, {1_500_000_000 + i}, 0, 0, 0, 60\n"
                                      for i, g in enumerate(AAIC_GPUS)))
    monkeypatch.setenv(ENV_VAR, str(root))
    return root


def _load(params, seed=0, cluster=None):
    return load_workload("google", params, cluster or small_cluster(4, 4), seed, Path("."))


def _rows(jobs):
    """0-based data-row index in the fake file of each job (line N = row N - 2)."""
    return [int(j.extra["trace_row"].rsplit(" ", 1)[1]) - 2 for j in jobs]


def test_kind_registered():
    assert "google" in workload_kinds()


def test_recurrence_key_run_time_and_features(data_root):
    cl = small_cluster(4, 4)
    jobs = _load({}, cluster=cl)
    assert len(jobs) == 59  # row 12 has no run time
    assert 12 not in _rows(jobs)
    for j, i in zip(jobs, _rows(jobs)):
        assert (j.group, j.user) == (f"n{i % 6}", f"u{i % 3}")
        # killed jobs keep their recorded run time
        assert j.duration_hint_s == 100.0 + 5 * i
        assert j.extra["end_event"] == ("KILL" if i % 7 == 3 else "FINISH")
        assert j.extra["sched_class"] == i % 4 and j.extra["trace_job_id"] == 9000 + i
        assert j.extra["submit_hour"] == 19  # 1000..1600 s: 19:00 EDT + < 1 h
        a = asrpt_alpha_min_tilde(j, 4, cl.nic_bps, cl.intra_bps, heavy_edge_mapper(0))
        assert j.iterations == max(1, round(j.duration_hint_s / a))
    by_group = {}
    for j in jobs:  # GPUs, model and configuration are the group's
        assert by_group.setdefault(j.group, (j.gpus, j.model, j.replicas())) == (j.gpus, j.model, j.replicas())
    assert {g for g, _, _ in by_group.values()} <= {1, 2, 4, 8}  # the GPU trace's counts that fit 16 GPUs
    # the groups' GPU counts do not depend on the window
    part = _load({"jobs": 10, "start": 30})
    assert all(by_group[j.group][0] == j.gpus for j in part)
    finished = _load({"end_events": ["FINISH"]})
    assert len(finished) == 59 - sum(1 for i in range(60) if i % 7 == 3)


def test_local_hour():
    assert local_hour(600.0) == 19 and local_hour(600.0 + 4.5 * 3600) == 23 and local_hour(600.0 + 5 * 3600) == 0
    assert local_hour(600.0 + 24 * 3600 - 1) == 18


def test_window_selection(data_root):
    by_count = _load({"jobs": 10, "start": 20})  # index 20 of the kept rows: row 12 has no run time
    assert _rows(by_count) == list(range(21, 31))
    assert by_count[0].arrival_s == 0.0 and by_count[-1].arrival_s == pytest.approx(90.0)
    # start_s: the first job submitted at or after it (row 12 has no run time: skipped)
    by_time = _load({"start_s": 1115.0, "jobs": 5})
    assert _rows(by_time) == [13, 14, 15, 16, 17]
    assert _rows(_load({"start_s": 1120.0, "jobs": 3})) == [13, 14, 15]
    # span_s: every job submitted within span_s of the window's first job
    span = _load({"start_s": 1200.0, "span_s": 95.0})
    assert _rows(span) == list(range(20, 30))
    assert _rows(_load({"start": 40, "span_s": 30.0})) == [41, 42, 43]  # index 40 of the kept rows = row 41
    rnd = _load({"jobs": 8, "start": "random"}, seed=5)
    assert _rows(rnd) == _rows(_load({"jobs": 8, "start": "random"}, seed=5)) and len(rnd) == 8
    hist = _load({"start_s": 1300.0, "jobs": 5, "history_jobs": 10})
    assert _rows(hist) == list(range(30, 35)) and len(hist.predictor_history) == 10
    with pytest.raises(ConfigError, match="start_s: give either start"):
        _load({"start": 3, "start_s": 1000.0})
    with pytest.raises(ConfigError, match="span_s: give either jobs"):
        _load({"jobs": 3, "span_s": 10.0})
    with pytest.raises(ConfigError, match=r"workload\.start_s: no job submitted at or after 5000 s"):
        _load({"start_s": 5000.0})


def test_arrival_scaling(data_root):
    plain = _load({"jobs": 10, "start": 20})
    for scale in (0.1, 3.0):
        js = _load({"jobs": 10, "start": 20, "arrival_scale": scale})
        assert [j.arrival_s for j in js] == pytest.approx([10.0 * k * scale for k in range(10)])
        assert [(j.group, j.iterations) for j in js] == [(j.group, j.iterations) for j in plain]
    # offered_load: B / (G L), B = sum GPUs x run time / span over all 59 rows
    all_rows = _load({})
    busy = sum(j.gpus * j.duration_hint_s for j in all_rows) / (1590.0 - 1000.0)
    js = _load({"jobs": 10, "start": 20, "offered_load": 0.5})
    assert js.arrival_scale == pytest.approx(busy / (16 * 0.5))
    assert [j.arrival_s for j in js] == pytest.approx([10.0 * k * js.arrival_scale for k in range(10)])


@pytest.mark.parametrize("bad, msg", [
    ("1500.0,1,1,2,x,30.0,FINISH\n", "line 4: column 'logical_job_name_idx': 'x' is not a number"),
    ("1500.0,1,1,2,3,-30.0,FINISH\n", "line 4: column 'run_s': '-30.0' is negative"),
    (",1,1,2,3,30.0,FINISH\n", "line 4: column 'submit_s': missing value"),
    ("1500.0,1,7,2,3,30.0,FINISH\n", "line 4: column 'scheduling_class': '7' is not 0..3"),
    ("1500.0,1,1,2,3,30.0,DONE\n", "line 4: column 'end_event': 'DONE' is not one of"),
])
def test_malformed_row_is_named(data_root, bad, msg):
    path = write_google(data_root, google_rows(2) + [bad])
    with pytest.raises(TraceError, match=re.escape(f"{path} {msg}")):
        _load({})


def _trial(tmp_path, workload: str) -> Path:
    t = tmp_path / "g.yaml"
    t.write_text(f"cluster: laptop.yaml\nworkload: {workload}\npolicy: fifo\ntiming: {{mode: analytic, model: asrpt}}\n")
    return t


def test_malformed_row_exits_2_with_one_line(data_root, tmp_path, capsys):
    write_google(data_root, google_rows(2) + ["1500.0,1,1,2,x,30.0,FINISH\n"])
    out = tmp_path / "r"
    assert main(["run", str(_trial(tmp_path, "{kind: google}")), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and re.search(r"line 4: column 'logical_job_name_idx': 'x' is not a number$", err)
    assert not out.exists()


def test_jobs_csv_carries_the_recurrence_key(data_root, tmp_path):
    out = tmp_path / "r"
    trial = _trial(tmp_path, "{kind: google, jobs: 12, start: 30, arrival_scale: 0.1}")
    assert main(["run", str(trial), "--out", str(out), "--quiet"]) == 0
    df = pd.read_csv(out / "jobs.csv", dtype={"group": str, "user": str})
    assert len(df) == 12
    rows = range(31, 43)  # kept-row index 30 is file row 31 (row 12 has no run time)
    assert df["group"].tolist() == [f"n{i % 6}" for i in rows]
    assert df["user"].tolist() == [f"u{i % 3}" for i in rows]


def test_trial_example_runs_on_a_small_cluster(data_root, tmp_path):
    from raytestbed.config import load_trial
    loaded = load_trial(REPO / "workloads" / "trials" / "google_asrpt.yaml")
    wl = loaded.trial.workload.model_dump()
    assert wl["kind"] == "google" and wl["history_jobs"] > 0
    assert loaded.cluster_config.build().total_gpus == 2000


# ---- the real file in shared/data (skipped when absent; ~10-30 s to read 668k rows)

@pytest.mark.slow
def test_real_google_window():
    d = None if os.environ.get(ENV_VAR) else find_data_dir([Path(__file__).parent])
    if d is None or not (d / "google-2011-jobs" / "google2011_job_arrivals.csv.gz").is_file():
        pytest.skip("shared/data/google-2011-jobs not available")
    from raytestbed.config import CLUSTER_CONFIG_DIR, load_cluster
    cl = load_cluster(CLUSTER_CONFIG_DIR / "asrpt_sim_250x8.yaml").build()
    jobs = load_workload("google", {"start_s": 86_400.0, "span_s": 3_600.0, "history_jobs": 200}, cl, 1, Path("."))
    assert 400 < len(jobs) < 3_200  # SOURCE.md: 444..3,164 jobs per hour
    assert all(j.group.startswith("n") and j.user.startswith("u") and j.iterations >= 1 for j in jobs)
    assert len(jobs.predictor_history) == 200
    assert sum(j.gpus == 1 for j in jobs) / len(jobs) > 0.5
