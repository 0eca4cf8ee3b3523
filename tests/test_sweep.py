"""raytestbed sweep: cells through run_into, tables with 95 % CIs, resume after an interruption,
failed cells reported, Ray tasks giving the serial results, one-line errors for bad sweep files."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from raytestbed.cli import main
from raytestbed.config import load_trial
from raytestbed.experiments import load_sweep, run_sweep
from raytestbed.experiments.tables import deterministic_columns
from raytestbed.trial import PolicyPair, run_into

TRIAL = """
name: small
seed: 1
cluster: {name: c4x4, nic_gbps: 10, intra_gbytes_per_s: 300, servers: [{count: 4, gpus: 4}]}
workload: {kind: synthetic, jobs: 30, mean_interarrival_s: 30, iterations: [50, 400],
           gpu_mix: {1: 0.4, 2: 0.2, 4: 0.2, 8: 0.2}, models: [vgg16, resnet50]}
policy: fifo
timing: {mode: analytic, model: asrpt}
"""


def _write(tmp_path: Path, body: str, name: str = "sweep.yaml") -> Path:
    (tmp_path / "small.yaml").write_text(TRIAL)
    p = tmp_path / name
    p.write_text(body)
    return p


SWEEP = """
trials: [small.yaml]
policies: [fifo, spjf]
seeds: [1, 2]
grid:
  cluster.nic_gbps: [1, 10]
"""


def test_sweep_cells_match_single_runs_and_tables_have_t_intervals(tmp_path):
    sweep = load_sweep(_write(tmp_path, SWEEP))
    res = run_sweep(sweep, tmp_path / "out", executor="serial", show_progress=False)
    assert len(res.ran) == 8 and not res.failed and not res.kept
    df = pd.read_csv(tmp_path / "out" / "sweep.csv")
    assert len(df) == 8 and set(df["cluster.nic_gbps"]) == {1, 10} and set(df["seed"]) == {1, 2}
    # a cell is exactly `raytestbed run` of the trial with the grid value set
    loaded = load_trial(tmp_path / "small.yaml")
    cfg = loaded.cluster_config.model_copy(update={"nic_gbps": 1.0})
    one = run_into(tmp_path / "one", loaded.model_copy(update={"cluster_config": cfg}), PolicyPair("spjf"), 2,
                   "sim", show_progress=False, report=False)
    row = df[(df["policy"] == "spjf") & (df["seed"] == 2) & (df["cluster.nic_gbps"] == 1)].iloc[0]
    assert row["total_jct_s"] == one["total_jct_s"] and row["makespan_s"] == one["makespan_s"]
    # slower NICs never help these pipeline/ring jobs
    piv = df.groupby("cluster.nic_gbps")["total_jct_s"].sum()
    assert piv[1] > piv[10]
    agg = pd.read_csv(tmp_path / "out" / "aggregate.csv")
    assert len(agg) == 4 and (agg["seeds"] == 2).all()
    g = df[(df["policy"] == "fifo") & (df["cluster.nic_gbps"] == 10)]["total_jct_s"].to_numpy()
    a = agg[(agg["policy"] == "fifo") & (agg["cluster.nic_gbps"] == 10)].iloc[0]
    assert a["total_jct_s_mean"] == pytest.approx(g.mean())
    assert a["total_jct_s_ci95"] == pytest.approx(stats.t.ppf(0.975, 1) * g.std(ddof=1) / math.sqrt(2))
    report = (tmp_path / "out" / "report.md").read_text()
    assert "± " in report and "small_total_jct_s_vs_cluster.nic_gbps.png" in report
    assert (tmp_path / "out" / "small_total_jct_s_vs_cluster.nic_gbps.png").stat().st_size > 1000
    cell = tmp_path / "out" / "cells" / "small" / "cluster.nic_gbps=1" / "spjf" / "seed-2"
    for f in ("summary.json", "jobs.csv", "events.jsonl", "config.yaml", "cell.json"):
        assert (cell / f).is_file()
    assert not (cell / "journal.jsonl").exists()  # a finished cell's journal repeats its jobs.csv
    assert (tmp_path / "one" / "journal.jsonl").is_file()  # a single run keeps it
    assert json.loads((cell / "summary.json").read_text())["total_jct_s"] == one["total_jct_s"]



def test_sweep_without_logs_writes_empty_logs_and_the_same_results(tmp_path):
    """``log_events: false`` and ``log_decisions: false`` leave the two logs empty; the cells' results, and
    their fingerprints (a finished cell is not run again when only the logs change), are the same."""
    one = "trials: [small.yaml]\npolicies: [spjf]\nseeds: [1]\n"
    full = run_sweep(load_sweep(_write(tmp_path, one, "a.yaml")), tmp_path / "a", executor="serial",
                     show_progress=False)
    bare_sweep = load_sweep(_write(tmp_path, one + "log_events: false\nlog_decisions: false\n", "b.yaml"))
    bare = run_sweep(bare_sweep, tmp_path / "b", executor="serial", show_progress=False)
    assert len(full.ran) == len(bare.ran) == 1
    cell = lambda root: next((tmp_path / root / "cells").rglob("summary.json")).parent  # noqa: E731
    a, b = cell("a"), cell("b")
    assert (a / "decisions.jsonl").stat().st_size > 0 and (a / "events.jsonl").stat().st_size > 0
    assert (b / "decisions.jsonl").stat().st_size == 0 and (b / "events.jsonl").stat().st_size == 0
    assert (a / "jobs.csv").read_bytes() == (b / "jobs.csv").read_bytes()
    assert json.loads((a / "cell.json").read_text())["fingerprint"] == json.loads((b / "cell.json").read_text())["fingerprint"]

@pytest.mark.slow  # a long end-to-end run: `make test-slow`
def test_interrupted_sweep_resumes_only_the_missing_cells(tmp_path):
    sweep = load_sweep(_write(tmp_path, SWEEP))
    out = tmp_path / "out"
    seen = []

    def stop_after_three(cell, result):
        seen.append(cell.key)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, out, executor="serial", show_progress=False, on_cell=stop_after_three)
    assert len(pd.read_csv(out / "sweep.csv")) == 3  # the finished cells are tabled already
    stamps = {k: (out / "cells" / k / "summary.json").stat().st_mtime_ns for k in seen}
    again = []
    res = run_sweep(load_sweep(tmp_path / "sweep.yaml"), out, executor="serial", show_progress=False,
                    on_cell=lambda c, r: again.append(c.key))
    all_keys = [c.key for c in sweep.cells()]
    assert sorted(res.kept) == sorted(seen) and sorted(again) == sorted(set(all_keys) - set(seen))
    assert {k: (out / "cells" / k / "summary.json").stat().st_mtime_ns for k in seen} == stamps
    # the resumed sweep equals one run without interruption
    full = run_sweep(sweep, tmp_path / "full", executor="serial", show_progress=False)
    a, b = pd.read_csv(out / "sweep.csv"), full.table
    cols = [c for c in deterministic_columns(b) if c != "cell"]
    pd.testing.assert_frame_equal(a[cols].reset_index(drop=True), b[cols].reset_index(drop=True))
    # a third run has nothing to do; a changed grid value runs only its new cells
    assert run_sweep(sweep, out, executor="serial", show_progress=False).ran == []
    (tmp_path / "sweep.yaml").write_text(SWEEP.replace("[1, 10]", "[1, 25]"))
    res = run_sweep(load_sweep(tmp_path / "sweep.yaml"), out, executor="serial", show_progress=False)
    assert len(res.ran) == 4 and len(res.kept) == 4 and all("nic_gbps=25" in k for k in res.ran)


def test_a_failed_cell_is_reported_and_the_others_finish(tmp_path, capsys):
    p = _write(tmp_path, """
trials: [small.yaml]
policies: [fifo]
seeds: [1]
grid:
  workload.models: [[vgg16], [no-such-model]]
""")
    assert main(["sweep", str(p), "--out", str(tmp_path / "out"), "--serial", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "no-such-model" in err and "failed" in err
    df = pd.read_csv(tmp_path / "out" / "sweep.csv")
    assert len(df) == 1 and df["finished"].iloc[0] == 30
    fail = pd.read_csv(tmp_path / "out" / "failures.csv")
    assert len(fail) == 1 and "no-such-model" in fail["cell"].iloc[0]


@pytest.mark.parametrize("body, needle", [
    ("trials: [small.yaml]\npolicies: [nope]\n", "unknown policy 'nope'"),
    ("trials: [small.yaml]\nseeds: 0\n", "seeds"),
    ("trials: [small.yaml]\nbogus: 1\n", "bogus"),
    ("trials: [missing.yaml]\n", "missing.yaml"),
    ("trials: [small.yaml]\ngrid: {cluster.nic_gbps: [0]}\n", "cluster.nic_gbps"),
    ("trials: [small.yaml]\ngrid: {cluster.servers.5.count: [2]}\n", "cluster.servers.5"),
    ("trials: [small.yaml]\nbackend: gpu\n", "backend"),
])
def test_bad_sweep_files_are_one_line_errors(tmp_path, capsys, body, needle):
    p = _write(tmp_path, body)
    assert main(["sweep", str(p), "--out", str(tmp_path / "out"), "--serial", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and str(p) in err
    assert not (tmp_path / "out").exists()


def test_policy_variants_and_network_wildcard(tmp_path):
    p = _write(tmp_path, """
trials: [small.yaml]
policies: [{label: "fifo[packed]", policy: fifo, params: {spread: packed}},
           {label: "fifo[random]", policy: fifo, params: {spread: random}}]
""")
    sweep = load_sweep(p)
    cells = sweep.cells()
    assert [c.data["policy_params"]["fifo"]["spread"] for c in cells] == ["packed", "random"]
    assert [c.seed for c in cells] == [1, 1]  # the trial's own seed
    p2 = _write(tmp_path, """
trials: [small.yaml]
policies: [fifo+parrot, fifo+aalo, fifo]
grid:
  policy_params.@network.observe_interval_s: [0.01, 0.05]
""", "net.yaml")
    cells = load_sweep(p2).cells()
    assert len(cells) == 6
    got = [(c.policy, c.data["policy_params"].get(c.pair.partition("+")[2], {}).get("observe_interval_s"))
           for c in cells]
    assert got == [("fifo+parrot", 0.01), ("fifo+aalo", 0.01), ("fifo", None),
                   ("fifo+parrot", 0.05), ("fifo+aalo", 0.05), ("fifo", None)]
    assert all("parrot" not in c.data["policy_params"] for c in cells if c.policy == "fifo+aalo")


def test_ray_tasks_give_the_serial_results(tmp_path):
    pytest.importorskip("ray")
    sweep = load_sweep(_write(tmp_path, SWEEP))
    serial = run_sweep(sweep, tmp_path / "serial", executor="serial", show_progress=False).table
    par = run_sweep(sweep, tmp_path / "ray", executor="ray", workers=2, show_progress=False)
    assert len(par.ran) == 8 and not par.failed
    cols = deterministic_columns(serial)
    pd.testing.assert_frame_equal(serial[cols], par.table[cols])
    assert np.isfinite(par.table["total_jct_s"]).all()


@pytest.mark.slow
def test_two_node_ray_cluster_gives_the_serial_sweep_csv():
    """`raytestbed bench sweep` on a small size: exit 0 = identical schedule columns, no failed cell."""
    pytest.importorskip("ray")
    from benchmarks.sweep import main as bench

    trial = Path(__file__).resolve().parents[1] / "workloads" / "trials" / "asrpt_synthetic.yaml"
    assert bench(["--seeds", "1", "--jobs", "100", "--trial", str(trial)]) == 0


def test_a_local_ray_that_does_not_start_falls_back_to_this_process(tmp_path, monkeypatch, capsys):
    from raytestbed.emu import raysession

    def fail(*a, **k):
        raise Exception("The current node timed out during startup.")

    monkeypatch.setattr(raysession.RaySession, "open", classmethod(lambda cls, *a, **k: fail()))
    sweep = load_sweep(_write(tmp_path, SWEEP))
    res = run_sweep(sweep, tmp_path / "out", executor="ray", show_progress=False)
    assert len(res.ran) == 8 and not res.failed
    assert "did not start (The current node timed out" in capsys.readouterr().err
    from raytestbed.errors import RaytestbedError

    with pytest.raises(RaytestbedError, match="--address 10.0.0.1:6379: cannot connect"):
        run_sweep(sweep, tmp_path / "out2", executor="ray", address="10.0.0.1:6379", show_progress=False)


@pytest.mark.parametrize("starts_ray", [False, True])
def test_cells_of_a_backend_that_starts_its_own_ray_never_go_to_the_sweeps_ray(tmp_path, monkeypatch, starts_ray):
    """The executor asks the backend (``Backend.starts_ray``), not its name: such cells run here, one by one."""
    from raytestbed.experiments import runner
    from raytestbed.sim.backend import SimBackend

    sent: list = []

    def on_ray(cells, *a, **k):
        sent.extend(cells)
        return False  # "Ray unavailable": the caller runs them in this process

    monkeypatch.setattr(runner, "_run_on_ray", on_ray)
    monkeypatch.setattr(SimBackend, "starts_ray", starts_ray)
    res = run_sweep(load_sweep(_write(tmp_path, SWEEP)), tmp_path / "out", executor="ray", show_progress=False)
    assert len(res.ran) == 8 and not res.failed
    assert len(sent) == (0 if starts_ray else 8)


def test_reuse_copies_cells_of_the_same_fingerprint_from_another_folder(tmp_path, capsys):
    first = run_sweep(load_sweep(_write(tmp_path, SWEEP)), tmp_path / "a", executor="serial", show_progress=False)
    assert len(first.ran) == 8
    # another sweep sharing the fifo cells at 10 Gbit/s (same trial, policy, seed): those are copied, not run
    other = SWEEP.replace("[fifo, spjf]", "[fifo, asrpt]").replace("[1, 10]", "[10, 25]")
    sweep = load_sweep(_write(tmp_path, other, "other.yaml"))
    ran = []
    res = run_sweep(sweep, tmp_path / "b", executor="serial", show_progress=False, reuse=(tmp_path / "a",),
                    on_cell=lambda c, r: ran.append(c.key))
    shared = sorted(c.key for c in sweep.cells() if c.policy == "fifo" and "nic_gbps=10" in c.key)
    assert len(shared) == 2 and sorted(res.reused) == shared and sorted(res.kept) == shared
    assert len(ran) == 6 and not set(ran) & set(shared)
    for k in shared:  # the same files, cell.json naming this sweep's cell and where it came from
        a, b = tmp_path / "a" / "cells" / k, tmp_path / "b" / "cells" / k
        assert (a / "jobs.csv").read_bytes() == (b / "jobs.csv").read_bytes()
        meta = json.loads((b / "cell.json").read_text())
        assert meta["cell"] == k and meta["reused_from"] == str(a)
    # the copied cells are this sweep's own from now on: a rerun keeps them and runs nothing
    again = run_sweep(sweep, tmp_path / "b", executor="serial", show_progress=False)
    assert again.ran == [] and again.reused == [] and len(again.kept) == 8
    # the table equals a sweep that ran every cell itself
    full = run_sweep(sweep, tmp_path / "c", executor="serial", show_progress=False)
    cols = [c for c in deterministic_columns(full.table) if c != "cell"]
    pd.testing.assert_frame_equal(res.table[cols].reset_index(drop=True), full.table[cols].reset_index(drop=True))
    # a folder that is not there: a one-line error
    assert main(["sweep", str(tmp_path / "other.yaml"), "--out", str(tmp_path / "d"), "--serial", "--quiet",
                 "--reuse", str(tmp_path / "nowhere")]) == 2
    assert "--reuse" in capsys.readouterr().err
