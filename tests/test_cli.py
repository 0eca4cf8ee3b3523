"""The CLI contract: run/compare/policies outputs, determinism, and one-line errors with exit 2."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from raytestbed.cli import main

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "workloads" / "trials" / "demo.yaml"
REQUIRED = ["policy", "backend", "jobs", "total_jct_s", "avg_jct_s", "makespan_s",
            "decision_time_p50_s", "decision_time_p99_s", "wall_s"]


def test_asrpt_run_splits_its_queueing_in_jobs_csv(tmp_path):
    """A-SRPT's own columns: when each job left its virtual instance (between arrival and start; with
    no history every job is predicted 0 and leaves at once); the summary's queueing with GPUs free is
    part of its queueing."""
    out = tmp_path / "r"
    assert main(["run", str(DEMO), "--backend", "sim", "--policy", "asrpt", "--out", str(out), "--quiet"]) == 0
    jobs = pd.read_csv(out / "jobs.csv")
    assert jobs["asrpt_released_s"].notna().all()
    assert (jobs["asrpt_released_s"] >= jobs["arrival_s"] - 1e-9).all()
    assert (jobs["asrpt_released_s"] <= jobs["first_start_s"] + 1e-9).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total_queue_s"] == pytest.approx(jobs["queue_s"].sum())
    assert 0.0 <= summary["queue_gpus_free_s"] <= summary["total_queue_s"]


def test_run_writes_results_folder(tmp_path):
    out = tmp_path / "r"
    assert main(["run", str(DEMO), "--backend", "sim", "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    for k in REQUIRED:
        assert k in summary
    assert summary["jobs"] == 60 and summary["finished"] == 60
    for f in ("jobs.csv", "events.jsonl", "decisions.jsonl", "config.yaml"):
        assert (out / f).is_file()
    jobs = pd.read_csv(out / "jobs.csv")
    assert len(jobs) == 60 and (jobs["jct_s"] >= 0).all()
    assert not list(tmp_path.glob("*.partial-*"))


def test_same_seed_gives_byte_identical_jobs(tmp_path):
    for name in ("a", "b"):
        assert main(["run", str(DEMO), "--out", str(tmp_path / name), "--seed", "3", "--quiet"]) == 0
    assert (tmp_path / "a" / "jobs.csv").read_bytes() == (tmp_path / "b" / "jobs.csv").read_bytes()
    assert main(["run", str(DEMO), "--out", str(tmp_path / "c"), "--seed", "4", "--quiet"]) == 0
    assert (tmp_path / "a" / "jobs.csv").read_bytes() != (tmp_path / "c" / "jobs.csv").read_bytes()


def test_compare_writes_table_and_plot(tmp_path):
    trial = _write(tmp_path, "t.yaml", """
cluster: laptop.yaml
workload: {kind: synthetic, jobs: 8, iterations: [20, 50]}
timing: {mode: flow, iterations_per_coflow: 5}
""")
    out = tmp_path / "cmp"
    assert main(["compare", str(trial), "--policies", "fifo,fifo+fair", "--out", str(out), "--quiet"]) == 0
    df = pd.read_csv(out / "comparison.csv")
    assert df["policy"].tolist() == ["fifo", "fifo+fair"]
    # per-flow max-min with equal weights is what the allocator does by default: same result
    assert df["total_jct_s"][0] == pytest.approx(df["total_jct_s"][1])
    assert (out / "fifo" / "jobs.csv").is_file() and (out / "fifo+fair" / "summary.json").is_file()
    report = (out / "report.md").read_text()
    assert "fifo+fair" in report and "(fifo/report.md)" in report
    for png in ("jct_cdf.png", "gpu_utilisation.png", "gantt.png", "decision_latency.png"):
        assert (out / "fifo" / png).stat().st_size > 1000
    assert (out / "comparison.png").stat().st_size > 1000
    for k in REQUIRED:
        assert k in df.columns


def test_policies_lists_ids(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    assert "fifo" in out and "fair" in out


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def _err(tmp_path, capsys, args):
    out = tmp_path / "out"
    code = main(args + ["--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert not out.exists() and not list(tmp_path.glob("out.partial-*"))
    assert len(err.splitlines()) == 1, err
    return err


def test_malformed_yaml(tmp_path, capsys):
    t = _write(tmp_path, "t.yaml", "name: x\ncluster: [unclosed\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert "t.yaml" in err and "invalid YAML" in err


def test_unknown_policy(tmp_path, capsys):
    err = _err(tmp_path, capsys, ["run", str(DEMO), "--policy", "nosuch"])
    assert "unknown placement policy 'nosuch'" in err and "fifo" in err


def test_zero_bandwidth(tmp_path, capsys):
    t = _write(tmp_path, "t.yaml", """
cluster: {nic_gbps: 0, intra_gbytes_per_s: 300, servers: [{count: 2, gpus: 4}]}
workload: {kind: synthetic, jobs: 3}
""")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert "cluster.nic_gbps" in err and "greater than 0" in err


def test_negative_bandwidth_in_cluster_file(tmp_path, capsys):
    _write(tmp_path, "c.yaml", "nic_gbps: 10\nintra_gbytes_per_s: -1\nservers: [{gpus: 2}]\n")
    t = _write(tmp_path, "t.yaml", "cluster: c.yaml\nworkload: {kind: synthetic, jobs: 3}\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert "c.yaml" in err and "intra_gbytes_per_s" in err


def test_job_bigger_than_cluster(tmp_path, capsys):
    _write(tmp_path, "jobs.csv", "job_id,arrival_s,gpus,iterations,model\n0,0,2,10,vgg16\n1,5,64,10,vgg16\n")
    t = _write(tmp_path, "t.yaml", "cluster: laptop.yaml\nworkload: {kind: csv, path: jobs.csv}\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert "jobs.csv line 3" in err and "64 GPUs" in err and "16" in err


def test_trace_row_missing_value(tmp_path, capsys):
    _write(tmp_path, "jobs.csv", "job_id,arrival_s,gpus,iterations,model\n0,0,2,10,vgg16\n1,5,,10,vgg16\n")
    t = _write(tmp_path, "t.yaml", "cluster: laptop.yaml\nworkload: {kind: csv, path: jobs.csv}\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert "jobs.csv line 3" in err and "'gpus'" in err and "missing" in err


def test_trace_missing_column(tmp_path, capsys):
    _write(tmp_path, "jobs.csv", "job_id,arrival_s,iterations,model\n0,0,10,vgg16\n")
    t = _write(tmp_path, "t.yaml", "cluster: laptop.yaml\nworkload: {kind: csv, path: jobs.csv}\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert "missing column 'gpus'" in err


def test_unknown_trial_field(tmp_path, capsys):
    t = _write(tmp_path, "t.yaml", "cluster: laptop.yaml\nworkload: {kind: synthetic}\npolicyy: fifo\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert "policyy" in err


def test_existing_results_folder_is_kept_without_force(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    code = main(["run", str(DEMO), "--out", str(out), "--quiet"])
    assert code == 2 and (out / "keep.txt").exists()
    assert "--force" in capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    (["run", str(DEMO), "--seed", "abc"], "argument --seed: 'abc' is not an integer"),
    (["run", str(DEMO), "--seed", "-1"], "argument --seed: -1 is not in"),
    (["run", str(DEMO), "--backend", "gpu"], "argument --backend: invalid choice: 'gpu'"),
    (["run", str(DEMO), "--bogus"], "unrecognized arguments: --bogus"),
    (["compare", str(DEMO), "--seed", "1.5", "--policies", "fifo"], "argument --seed: '1.5' is not an integer"),
    (["parity", str(DEMO), "--limit", "x"], "argument --limit: invalid float value: 'x'"),
    (["nosuch"], "invalid choice: 'nosuch'"),
    ([], "the following arguments are required: command"),
])
def test_bad_cli_flag_is_one_line_exit_2(tmp_path, capsys, args, says):
    out = tmp_path / "x"
    assert main(args + (["--out", str(out)] if args else [])) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.startswith("raytestbed: error: ") and cap.err.count("\n") == 1, cap.err
    assert says in cap.err and "usage:" not in cap.err
    assert not out.exists()


@pytest.mark.parametrize("column, cell", [
    ("arrival_s", "nan"), ("arrival_s", "inf"), ("arrival_s", "-5"), ("duration_s", "nan"), ("duration_s", "inf"),
])
def test_non_finite_or_negative_cell_is_one_line_naming_row_and_column(tmp_path, capsys, column, cell):
    row = {"arrival_s": "3", "duration_s": "100", column: cell}
    _write(tmp_path, "jobs.csv", "job_id,arrival_s,gpus,duration_s,model\n0,0,2,50,vgg16\n"
           f"1,{row['arrival_s']},2,{row['duration_s']},vgg16\n")
    t = _write(tmp_path, "t.yaml", "cluster: laptop.yaml\nworkload: {kind: csv, path: jobs.csv}\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert f"jobs.csv line 3: column '{column}': '{cell}' is " in err


@pytest.mark.parametrize("lines, field", [
    ("cluster: {nic_gbps: .inf, intra_gbytes_per_s: 300, servers: [{gpus: 4}]}", "cluster.nic_gbps"),
    ("cluster: {nic_gbps: 10, intra_gbytes_per_s: .nan, servers: [{gpus: 4}]}", "cluster.intra_gbytes_per_s"),
    ("cluster: laptop.yaml\nemu: {pace: .inf}", "emu.pace"),
    ("cluster: laptop.yaml\ntiming: {model_params: {xi1: .nan}}", "timing.model_params.xi1"),
    ("cluster: laptop.yaml\nseed: -1", "seed"),
])
def test_non_finite_trial_field_is_one_line_naming_it(tmp_path, capsys, lines, field):
    t = _write(tmp_path, "t.yaml", lines + "\nworkload: {kind: synthetic, jobs: 3}\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert f"t.yaml: {field}: " in err and ", got " in err


def test_utilisation_series_counts_busy_gpus():
    from raytestbed.results.report import utilisation_series

    iv = pd.DataFrame({"job_id": [0, 1], "start_s": [0.0, 5.0], "end_s": [10.0, 10.0], "gpus": [2, 2]})
    ts, u = utilisation_series(iv, total_gpus=4, points=11)
    assert u[0] == 0.5 and u[6] == 1.0 and u[-1] == 0.0


def test_compare_runs_placement_and_network_policy_pairs(tmp_path):
    """Parrot issue item 4: a placement policy (A-SRPT, SJF-BCO, FIFO) composed with a coflow network policy;
    the records say which pair ran and both policies decided."""
    cluster = _write(tmp_path, "c.yaml", "name: c4\nnic_gbps: 1\nintra_gbytes_per_s: 300\n"
                                         "servers: [{count: 4, gpus: 4}]\n")
    trial = _write(tmp_path, "t.yaml", f"""
cluster: {cluster}
workload: {{kind: synthetic, jobs: 6, mean_interarrival_s: 2, iterations: [20, 40], models: [vgg16, resnet50],
           gpu_mix: {{6: 0.5, 8: 0.5}}, comm_mix: {{rar: 1.0}}}}
timing: {{mode: flow, iterations_per_coflow: 5}}
""")
    out = tmp_path / "cmp"
    pairs = ["asrpt+parrot", "sjf-bco+aalo", "fifo+lccf"]
    assert main(["compare", str(trial), "--policies", ",".join(pairs), "--out", str(out), "--quiet"]) == 0
    df = pd.read_csv(out / "comparison.csv")
    assert df["policy"].tolist() == pairs and (df["finished"] == 6).all()
    for pair in pairs:
        placement, network = pair.split("+")
        summary = json.loads((out / pair / "summary.json").read_text())
        assert (summary["policy"], summary["network_policy"]) == (placement, network)
        deciders = {json.loads(line)["policy"] for line in (out / pair / "decisions.jsonl").open()}
        assert deciders == {placement, network}


def test_sjfbco_on_pipeline_jobs_is_a_clear_error(tmp_path, capsys):
    trial = _write(tmp_path, "t.yaml", """
cluster: laptop.yaml
workload: {kind: synthetic, jobs: 4, iterations: [20, 40], comm_mix: {pipeline: 1.0}}
timing: {mode: flow, iterations_per_coflow: 5}
""")
    assert main(["compare", str(trial), "--policies", "sjf-bco", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "sjf-bco" in err and "single-stage" in err and "Traceback" not in err


@pytest.mark.parametrize("lines, says", [
    ("policy_params: {asrpt: {tau: []}}", "policy 'asrpt': parameter tau: Input should be a valid number, got []"),
    ("policy_params: {asrpt: {retrain_every: .inf}}", "parameter retrain_every: Input should be a valid integer, got inf"),
    ("policy_params: {asrpt: {tau: .nan}}", "asrpt.tau: NaN is not a number"),
    ("timing: {model: sjfbco, model_params: {reduction_bps: 0}}", "timing.model_params: reduction_bps must be > 0"),
])
def test_bad_policy_or_model_parameter_is_one_line(tmp_path, capsys, lines, says):
    t = _write(tmp_path, "t.yaml", f"cluster: laptop.yaml\npolicy: asrpt\n{lines}\nworkload: {{kind: synthetic, jobs: 3}}\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert says in err


def test_scripts_are_thin_entry_points_of_registered_benches():
    """scripts/*.py hold no logic (no def/class: the code lives in the package or benchmarks/), and every
    module of benchmarks/ is a `raytestbed bench NAME` choice with a main(argv)."""
    import argparse
    import ast
    import importlib

    from raytestbed.cli import BENCHMARKS, benchmark_module, build_parser

    for script in sorted((REPO / "scripts").glob("*.py")):
        tree = ast.parse(script.read_text(encoding="utf-8"))
        defs = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        assert not defs, f"{script.name} defines {defs}: move them into the package or benchmarks/"
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    choices = next(a for a in sub.choices["bench"]._actions if a.dest == "name").choices
    assert list(choices) == list(BENCHMARKS)
    mods = {p.stem for p in (REPO / "benchmarks").glob("*.py")} - {"__init__"}
    assert {benchmark_module(n) for n in BENCHMARKS} == mods
    for m in sorted(mods):
        assert callable(importlib.import_module(f"benchmarks.{m}").main)
    assert not (REPO / "raytestbed" / "experiments" / "benches").exists()


def test_bench_outside_a_checkout_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    """An installed package without the source tree: `raytestbed bench` names the problem, exit 2."""
    import raytestbed.cli as cli

    monkeypatch.setattr(cli, "_checkout", lambda: tmp_path)
    assert main(["bench", "sim", "--help"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "checkout" in err and "benchmarks/" in err


def test_bench_runs_a_benchmark_of_the_checkout(capsys):
    """From a checkout, `raytestbed bench NAME` reaches benchmarks/NAME.py's own options."""
    with pytest.raises(SystemExit) as done:
        main(["bench", "wcs-orders", "--help"])  # the benchmark's argparse prints its help and exits 0
    assert done.value.code == 0
    assert "wcs-duration" in capsys.readouterr().out


def test_synthetic_job_larger_than_the_cluster_is_refused_unless_clipped(tmp_path, capsys):
    cluster = "cluster: {name: one, nic_gbps: 10, intra_gbytes_per_s: 300, servers: [{count: 1, gpus: 8}]}\n"
    t = _write(tmp_path, "t.yaml", cluster + "workload: {kind: synthetic, jobs: 4, gpu_mix: {16: 1}}\n")
    err = _err(tmp_path, capsys, ["run", str(t)])
    assert "job 0 (group g" in err and "needs 16 GPUs but the cluster has 8" in err and "oversize: clip" in err
    t = _write(tmp_path, "c.yaml", cluster + "workload: {kind: synthetic, jobs: 4, gpu_mix: {16: 1}, oversize: clip}\n")
    out = tmp_path / "clipped"
    assert main(["run", str(t), "--out", str(out), "--quiet"]) == 0
    assert (pd.read_csv(out / "jobs.csv")["gpus"] == 8).all()


@pytest.mark.parametrize("args,says", [
    (["compare", "parity_ps.yaml", "--policies", "fifo,fifo+parrot", "--backend", "sim:analytic"],
     "network policy 'parrot' needs timing.mode: flow"),
    (["parity", "parity_ps.yaml", "--policies", "fifo+fair", "--backends", "sim:analytic,emu"],
     "network policy 'fair' needs timing.mode: flow"),
    (["run", "parrot_ms60.yaml", "--backend", "emu"], "backend emu: job 0 gives an explicit compute time and random"),
    (["parity", "parrot_ms60.yaml", "--policies", "fifo+parrot"], "backend emu: job 0 gives"),
])
def test_a_backend_that_cannot_honour_the_trial_refuses_before_the_run(tmp_path, capsys, args, says):
    """No silent no-op: the analytic simulator has no flows for a network policy, and the emulator's
    workers cannot move a job's explicit traffic; either refuses in one line, exit 2, nothing written."""
    trials = Path(__file__).resolve().parents[1] / "workloads" / "trials"
    args = [str(trials / a) if a.endswith(".yaml") else a for a in args]
    if "parrot_ms60.yaml" in args[1]:  # Parrot's trial on three jobs in its trace's format (no data folder needed)
        (tmp_path / "ms.csv").write_text("job_id,num_gpu,submit_time,iterations,model_name,duration\n"
                                         "1,1,0,100,resnet50,50\n2,2,5,200,vgg16,120\n3,1,9,50,resnet50,20\n")
        trial = yaml.safe_load(Path(args[1]).read_text())
        trial["workload"]["path"] = str(tmp_path / "ms.csv")
        args[1] = str(tmp_path / "ms3.yaml")
        Path(args[1]).write_text(yaml.safe_dump(trial))
    out = tmp_path / "out"
    assert main([*args, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not out.exists()
