"""A-SRPT trace loaders (aaic, philly, dirlab): data-folder resolution, row validation, workload construction."""

import gzip
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import small_cluster
from raytestbed.core.timing import asrpt_alpha_min_tilde
from raytestbed.errors import ConfigError, TraceError
from raytestbed.placement.heavy_edge import heavy_edge_mapper
from raytestbed.traces.datadir import ENV_VAR, data_file, find_data_dir
from raytestbed.traces.registry import load_workload, workload_kinds

AAIC_HEADER = "id, user, group, queue, nodes, gpus, walltime_req, termcode, time_submit, time_start, time_end, waittime, walltime\n"


def _aaic_rows(n=40):
    out = []
    for i in range(n):
        user, nodes, gpus = i % 3, 1 + (i % 5 == 0), (1, 2, 4)[i % 3]
        out.append(f"{i}, {user}, 0, {i % 2}, {nodes}, {gpus}, 3600, 0, {1_500_000_000 + 100 * i}, 0, 0, 0, {50 + 10 * i}\n")
    return out


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A fake shared/data folder with tiny files of the three traces."""
    root = tmp_path / "shared" / "data"
    (root / "aaic-gpu-workload").mkdir(parents=True)
    with gzip.open(root / "aaic-gpu-workload" / "aaicwl-201807-201812.csv.gz", "wt") as f:
        f.write(AAIC_HEADER + "".join(_aaic_rows()))
    (root / "philly-jobs-rfold").mkdir()
    (root / "philly-jobs-rfold" / "philly_trace.csv").write_text(
        "#job id,arrival time (sec),topology,shape,size,duration (sec)\n"
        + "".join(f"{i},{10.0 * i},CLOS,{'4+4' if i % 4 == 0 else (1, 2, 4, 1)[i % 4]},"
                  f"{8 if i % 4 == 0 else (1, 2, 4, 1)[i % 4]},{100.0 + i}\n" for i in range(30)))
    (root / "dirlab-helios-philly-15k").mkdir()
    rows = "".join(f"{i},{1 + i % 4},{(0, 1, 2, 8)[i % 4]},1,1,{5 * (i > 0)},{60 + i},0,Pass\n" for i in range(24))
    for t in ("helios", "philly"):
        (root / "dirlab-helios-philly-15k" / f"{t}_data_training.csv").write_text(
            "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n" + rows)
    monkeypatch.setenv(ENV_VAR, str(root))
    return root


def _load(kind, params, base=Path("."), seed=0, cluster=None):
    return load_workload(kind, params, cluster or small_cluster(4, 4), seed, base)


def test_kinds_registered():
    assert {"aaic", "philly", "dirlab"} <= set(workload_kinds())


def test_data_dir_env_and_walk_up(data_root, tmp_path, monkeypatch):
    assert find_data_dir() == data_root
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # no per-user data folder
    trial_dir = tmp_path / "a" / "b"
    trial_dir.mkdir(parents=True)
    assert find_data_dir([trial_dir]) == data_root.resolve()
    with pytest.raises(TraceError) as e:
        data_file("nope/missing.csv", [trial_dir])
    assert "nope/missing.csv" in str(e.value) and str(data_root.resolve()) in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_data_dir_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "absent"))
    with pytest.raises(TraceError, match="RAYTESTBED_DATA_DIR") as e:
        _load("philly", {})
    assert "\n" not in str(e.value)


def test_aaic_jobs_follow_the_paper_construction(data_root):
    cl = small_cluster(4, 4)
    jobs = _load("aaic", {"iteration_scale": 0.5, "arrival_scale": 0.1}, cluster=cl)
    assert len(jobs) == 40
    assert jobs[0].arrival_s == 0.0 and jobs[3].arrival_s == pytest.approx(30.0)
    assert [j.gpus for j in jobs[:6]] == [2, 2, 4, 1, 2, 8]
    by_group = {}
    for j in jobs:
        # same group -> same model and configuration
        assert by_group.setdefault(j.group, (j.model, j.replicas())) == (j.model, j.replicas())
        a = asrpt_alpha_min_tilde(j, 4, cl.nic_bps, cl.intra_bps, heavy_edge_mapper(0))
        assert j.iterations == max(1, round(j.duration_hint_s / a * 0.5))
    assert jobs[0].group.startswith("u0:q0:n2:g1")
    assert len({j.user for j in jobs}) == 3
    again = _load("aaic", {"iteration_scale": 0.5, "arrival_scale": 0.1}, cluster=cl)
    assert [(j.model, j.replicas(), j.iterations) for j in again] == [(j.model, j.replicas(), j.iterations) for j in jobs]


def test_slice_and_single_gpu_share(data_root):
    jobs = _load("philly", {"jobs": 20, "start": 5})
    assert len(jobs) == 20 and jobs[0].extra["trace_row"].endswith("line 7")
    for share in (0.0, 0.25, 1.0):
        js = _load("philly", {"single_gpu_share": share}, seed=3)
        assert sum(j.gpus == 1 for j in js) == round(share * 30)
        groups = {}
        for j in js:
            assert groups.setdefault(j.group, j.gpus) == j.gpus
    rnd = _load("aaic", {"jobs": 10, "start": "random"}, seed=1)
    assert len(rnd) == 10
    with pytest.raises(ConfigError, match="jobs: 99 jobs asked"):
        _load("aaic", {"jobs": 99})


def test_dirlab_skips_cpu_jobs_and_rebuilds_arrivals(data_root):
    jobs = _load("dirlab", {"trace": "philly"})
    assert len(jobs) == 18  # every 4th row has gpu_num 0
    assert jobs[0].arrival_s == 0.0 and jobs[1].arrival_s == pytest.approx(5.0)
    assert jobs[0].group == "u2:g1:c1:n1"


def test_oversize_jobs(data_root):
    with pytest.raises(TraceError, match="line 2: job needs 8 GPUs but the cluster has 4"):
        _load("philly", {}, cluster=small_cluster(1, 4))
    assert all(j.gpus <= 4 for j in _load("philly", {"oversize": "drop"}, cluster=small_cluster(1, 4)))


@pytest.mark.parametrize("kind, rel, bad, msg", [
    ("aaic", "aaic-gpu-workload/aaicwl-201807-201812.csv.gz", "3, 1, 0, 0, 1, x, 3600, 0, 1, 0, 0, 0, 5\n",
     "line 3: column 'gpus': 'x' is not a number"),
    ("philly", "philly-jobs-rfold/philly_trace.csv", "1,5.0,CLOS,1,1,\n", "line 3: column 'duration (sec)': missing value"),
    ("dirlab", "dirlab-helios-philly-15k/helios_data_training.csv", "1,1,1,1,1,-4,3,0,Pass\n",
     "line 3: column 'interval': '-4' is negative"),
])
def test_bad_rows_named_by_line(data_root, kind, rel, bad, msg):
    p = data_root / rel
    if kind == "aaic":
        with gzip.open(p, "wt") as f:
            f.write(AAIC_HEADER + _aaic_rows(1)[0] + bad)
    else:
        lines = p.read_text().splitlines(keepends=True)
        p.write_text(lines[0] + lines[1] + bad)
    with pytest.raises(TraceError, match=re.escape(msg)):
        _load(kind, {})


def test_unknown_parameter_is_config_error(data_root):
    with pytest.raises(ConfigError, match="jobz"):
        _load("philly", {"jobz": 3})


# ---- the real traces in shared/data (skipped when absent)

def _real_data():
    """The data folder as the loaders find it ($RAYTESTBED_DATA_DIR or shared/data), or None."""
    return find_data_dir([Path(__file__).parent])


@pytest.mark.parametrize("kind, params, rows", [
    ("aaic", {"jobs": 2000, "start": 100_000}, 2000),
    pytest.param("philly", {"jobs": 2000, "start": "random"}, 2000, marks=pytest.mark.slow),
    ("dirlab", {"trace": "philly"}, 15000),
])
def test_real_traces(kind, params, rows):
    d = _real_data()
    if d is None or not (d / "aaic-gpu-workload").is_dir():
        pytest.skip("shared/data not available")
    from raytestbed.config import load_cluster, CLUSTER_CONFIG_DIR
    cl = load_cluster(CLUSTER_CONFIG_DIR / "asrpt_sim_250x8.yaml").build()
    jobs = load_workload(kind, params, cl, 0, Path("."))
    assert len(jobs) == rows
    assert all(j.iterations >= 1 and j.gpus >= 1 for j in jobs)
    assert 0.5 < sum(j.gpus == 1 for j in jobs) / len(jobs) <= 1.0


def test_asrpt_aaic_trial_parses():
    from raytestbed.config import load_trial
    loaded = load_trial(Path(__file__).parents[1] / "workloads" / "trials" / "asrpt_aaic.yaml")
    assert loaded.trial.workload.kind == "aaic" and loaded.cluster_config.build().total_gpus == 2000


def test_asrpt_aaic_paper_trial_parses():
    from raytestbed.config import load_trial
    loaded = load_trial(Path(__file__).parents[1] / "workloads" / "trials" / "asrpt_aaic_paper.yaml")
    wl = loaded.trial.workload.model_dump()
    assert wl["offered_load"] == 1.0 and wl["history_jobs"] > 0 and "arrival_scale" not in wl
    assert loaded.cluster_config.build().total_gpus == 2000


def test_offered_load_derives_the_arrival_scale(data_root):
    cl = small_cluster(4, 4)  # 16 GPUs
    rows = [(1 + (i % 5 == 0)) * (1, 2, 4)[i % 3] * (50 + 10 * i) for i in range(40)]  # GPUs x run time
    busy = sum(rows) / (100 * 39)  # the fake trace's arrival span: 39 x 100 s
    plain = _load("aaic", {"jobs": 10, "start": 25}, cluster=cl)
    assert plain.arrival_scale == 1.0
    for load in (0.5, 2.0):
        js = _load("aaic", {"jobs": 10, "start": 25, "offered_load": load}, cluster=cl)
        scale = busy / (16 * load)
        assert js.arrival_scale == pytest.approx(scale)
        assert [j.arrival_s for j in js] == pytest.approx([j.arrival_s * scale for j in plain])
        # the same jobs otherwise
        assert [(j.group, j.iterations) for j in js] == [(j.group, j.iterations) for j in plain]
    with pytest.raises(ConfigError, match=r"workload\.offered_load: give either offered_load or arrival_scale"):
        _load("aaic", {"jobs": 10, "offered_load": 1.0, "arrival_scale": 0.5}, cluster=cl)
    with pytest.raises(ConfigError, match="offered_load"):
        _load("aaic", {"jobs": 10, "offered_load": 0}, cluster=cl)


def test_history_jobs_are_the_rows_before_the_set(data_root):
    cl = small_cluster(4, 4)
    base = _load("aaic", {"jobs": 10, "start": 25}, cluster=cl)
    assert base.predictor_history == []
    js = _load("aaic", {"jobs": 10, "start": 25, "history_jobs": 20}, cluster=cl)
    # the job set itself does not depend on history_jobs
    assert [(j.group, j.model, j.replicas(), j.iterations, j.arrival_s) for j in js] == \
        [(j.group, j.model, j.replicas(), j.iterations, j.arrival_s) for j in base]
    assert js[0].extra["trace_row"].endswith("line 27")
    hist = js.predictor_history
    assert len(hist) == 20
    # rows 5..24 of the trace: compare with those jobs built as a job set of their own
    ref = _load("aaic", {"jobs": 30, "start": 5}, cluster=cl)
    set_job = {j.group: j for j in js}
    shared = 0
    for (g, u, n), row in zip(hist, ref[:20]):
        assert (g, u) == (row.group, row.user) and n >= 1
        if g in set_job:  # same group -> the set's model and configuration -> its alpha~min
            a = asrpt_alpha_min_tilde(set_job[g], 4, cl.nic_bps, cl.intra_bps, heavy_edge_mapper(0))
            assert n == max(1, round(row.duration_hint_s / a))
            shared += 1
    assert shared > 0
    with pytest.raises(ConfigError, match="history_jobs: 20 history rows need start >= 20"):
        _load("aaic", {"jobs": 10, "start": 5, "history_jobs": 20}, cluster=cl)
    for seed in (1, 2):  # a random start draws the same set with or without history
        rnd0 = _load("aaic", {"jobs": 10, "start": "random"}, seed=seed, cluster=cl)
        rnd = _load("aaic", {"jobs": 10, "start": "random", "history_jobs": 15}, seed=seed, cluster=cl)
        assert [j.extra["trace_row"] for j in rnd] == [j.extra["trace_row"] for j in rnd0]
        first = int(rnd[0].extra["trace_row"].rsplit(" ", 1)[1]) - 2  # 0-based trace index
        assert len(rnd.predictor_history) == min(15, first)


def test_joint_history_mode_builds_one_run_and_splits_it(data_root):
    """history_mode joint: H + N consecutive rows from a start drawn by default_rng(seed), built as one
    workload; the first H are the history, the set is shifted to arrive from 0 (the A-SRPT reproduction)."""
    cl = small_cluster(4, 4)
    for seed in (1, 2):
        js = _load("aaic", {"jobs": 10, "start": "random", "history_jobs": 15, "history_mode": "joint"},
                   seed=seed, cluster=cl)
        start = int(np.random.default_rng(seed).integers(0, 40 - 25 + 1))
        run = _load("aaic", {"jobs": 25, "start": start}, seed=seed, cluster=cl)
        assert js.predictor_history == [(j.group, j.user, j.iterations) for j in run[:15]]
        assert [(j.group, j.model, j.replicas(), j.iterations) for j in js] == \
            [(j.group, j.model, j.replicas(), j.iterations) for j in run[15:]]
        assert [j.arrival_s for j in js] == [j.arrival_s - run[15].arrival_s for j in run[15:]]
        assert [j.job_id for j in js] == list(range(10))


def test_history_span_all_fits_on_every_row_before_the_same_set(data_root):
    """history_span all: every trace row before the job set is history, in both modes; the set's rows are
    the ones the window would give (the same start draw)."""
    cl = small_cluster(4, 4)
    for mode in ("before", "joint"):
        for seed in (1, 2):
            spec = {"jobs": 10, "start": "random", "history_jobs": 5, "history_mode": mode}
            win = _load("aaic", spec, seed=seed, cluster=cl)
            every = _load("aaic", {**spec, "history_span": "all"}, seed=seed, cluster=cl)
            assert [j.extra["trace_row"] for j in every] == [j.extra["trace_row"] for j in win]
            first = int(every[0].extra["trace_row"].rsplit(" ", 1)[1]) - 2  # 0-based trace index of the set
            assert len(every.predictor_history) == first > len(win.predictor_history) == 5
            assert [j.extra["trace_row"] for j in every.history_jobs] == \
                [f"{every[0].extra['trace_row'].rsplit(' ', 1)[0]} {i + 2}" for i in range(first)]
    every = _load("aaic", {"jobs": 10, "start": 25, "history_jobs": 20, "history_span": "all"}, cluster=cl)
    assert len(every.predictor_history) == 25


def test_history_rows_reach_the_predicting_policies(data_root):
    from raytestbed.trial import with_workload_history

    js = _load("aaic", {"jobs": 10, "start": 25, "history_jobs": 20})
    for name in ("asrpt", "asrpt-perfect", "spjf", "wcs-subtime"):
        assert with_workload_history(name, {"tau": 0.0}, js)["history"] == js.predictor_history
    assert "history" not in with_workload_history("fifo", {}, js)
    assert with_workload_history("asrpt", {"history": []}, js) == {"history": []}  # explicit wins
    from raytestbed.schedulers.base import make_policy

    pol = make_policy("asrpt", "placement", 0, **with_workload_history("asrpt", {}, js))
    assert pol.history_rows == 20 and len(pol.get_params()["history"]) == 20 and pol.predictor.fits == 1
    g, u, n = js.predictor_history[-1]
    probe = next(j for j in js if j.group == g and j.user == u) if any(j.group == g for j in js) else None
    if probe is not None:
        assert pol.predictor.predict(probe) > 0  # a seen group is no longer predicted 0


def test_bench_sim_runs_a_trials_jobs_with_both_forests(data_root, tmp_path, capsys):
    """``raytestbed bench sim --trial``: a trial's jobs and its whole earlier trace as history, simulated with
    scikit-learn's forest and the exact one; the per-job results agree."""
    from benchmarks import sim

    trial = tmp_path / "t.yaml"
    trial.write_text("cluster: {name: t, servers: [{count: 4, gpus: 4}], nic_gbps: 10, intra_gbytes_per_s: 300}\n"
                     "workload: {kind: aaic, jobs: 10, start: 25, history_jobs: 5}\n", encoding="utf-8")
    rc = sim.main(["--trial", str(trial), "--set", "workload.history_span=all", "--policy", "asrpt",
                   "--param", "retrain_every=3", "--forest", "both"])
    out = capsys.readouterr().out
    assert rc == 0 and "history=25 jobs" in out and "per-job results identical" in out
    with pytest.raises(SystemExit):
        sim.main(["--set", "workload.jobs=5"])  # --set without --trial


@pytest.mark.slow  # a long end-to-end run: `make test-slow`
def test_testbed_script_with_history_and_trace_choice(data_root, tmp_path):
    from benchmarks import asrpt_testbed as mod

    out = tmp_path / "tb"
    rc = mod.main(["--out", str(out), "--sets", "1", "--jobs", "8", "--backends", "sim", "--history-jobs", "5",
                   "--trace", "helios", "--policies", "asrpt,wcs-subtime", "--compress", "1"])
    assert rc == 0
    import yaml

    cfg = yaml.safe_load((out / "set0" / "sim" / "asrpt" / "config.yaml").read_text())
    assert cfg["workload"]["kind"] == "dirlab" and cfg["workload"]["history_jobs"] == 5
    assert mod.main(["--out", str(out), "--trace", "nope", "--backends", "sim"]) == 2


def test_real_trace_tests_follow_the_loaders_data_folder(tmp_path, monkeypatch):
    # $RAYTESTBED_DATA_DIR (the documented override) must not switch the real-trace tests off
    d = find_data_dir([Path(__file__).parent])
    if d is None:
        pytest.skip("no data folder: nothing to point $RAYTESTBED_DATA_DIR at")
    monkeypatch.setenv(ENV_VAR, str(d))
    assert _real_data() == d
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "absent"))
    assert _real_data() is None
