"""Every trace kind on a cluster whose servers differ in GPU count and type: a run, or one line naming
the loader or policy that needs identical servers (exit status 2, before anything runs)."""

from pathlib import Path

import pytest
import yaml

from raytestbed.cli import main

REPO = Path(__file__).resolve().parents[1]
MIXED = {"name": "mixed", "nic_gbps": 10, "intra_gbytes_per_s": 300,
         "servers": [{"count": 2, "gpus": 2, "gpu_type": "k80"},
                     {"count": 2, "gpus": 4, "nic_gbps": 25, "gpu_type": "p100"},
                     {"count": 2, "gpus": 8, "gpu_type": "v100"}]}
A_SRPT_KINDS = ["aaic", "philly", "dirlab", "google"]


def write_trial(tmp_path, workload, **extra):
    t = {"name": "mixed", "seed": 1, "cluster": MIXED, "workload": workload, **extra}
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(t))
    return p


def one_line_error(capsys):
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("kind", A_SRPT_KINDS)
def test_asrpt_trace_kinds_refused_in_one_line(kind, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(write_trial(tmp_path, {"kind": kind})), "--out", str(out), "--quiet"]) == 2
    err = one_line_error(capsys)
    assert f"workload kind {kind!r} builds A-SRPT jobs" in err and "needs identical servers" in err
    assert "servers of 2, 4, 8 GPUs" in err
    assert not out.exists()


def test_csv_with_durations_refused_in_one_line(tmp_path, capsys):
    """A csv trace with ``duration_s`` converts durations with A-SRPT's alpha~min, which needs g."""
    (tmp_path / "jobs.csv").write_text("job_id,arrival_s,gpus,model,duration_s\n0,0,2,vgg16,100\n")
    p = write_trial(tmp_path, {"kind": "csv", "path": "jobs.csv"})
    assert main(["run", str(p), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = one_line_error(capsys)
    assert "jobs.csv line 2: duration_s" in err and "needs identical servers" in err and "servers of 2, 4, 8 GPUs" in err


@pytest.mark.parametrize("workload,extra", [
    ({"kind": "synthetic", "jobs": 6, "comm_mix": {"rar": 0.5, "pipeline": 0.5}}, {}),
    ({"kind": "csv", "path": "jobs.csv"}, {}),
    ({"kind": "gadget", "jobs": 8, "slot_s": 60, "budget_mode": "iterations"},
     {"policy": "gadget", "timing": {"model": "gadget"}}),
    ({"kind": "sjfbco", "durations": "uniform", "arrivals": "batch", "mix": {1: 4, 2: 2, 4: 2}},
     {"policy": "sjf-bco", "timing": {"model": "sjfbco"}}),
], ids=["synthetic", "csv", "gadget", "sjfbco"])
def test_kinds_that_run_on_mixed_servers(workload, extra, tmp_path, capsys):
    (tmp_path / "jobs.csv").write_text("job_id,arrival_s,gpus,model,iterations\n0,0,2,vgg16,50\n1,5,8,resnet50,20\n")
    out = tmp_path / "out"
    assert main(["run", str(write_trial(tmp_path, workload, **extra)), "--out", str(out), "--quiet"]) == 0
    assert (out / "jobs.csv").is_file()


@pytest.mark.parametrize("kind,params", [("ms60", {}), ("fb_coflow", {})])
def test_coflow_kinds_give_one_line_on_a_small_mixed_cluster(kind, params, tmp_path, capsys):
    """Parrot's workloads need more servers than this cluster has: one line, exit 2 (their size, not the
    GPU counts, is what they refuse)."""
    p = write_trial(tmp_path, {"kind": kind, **params}, policy="fifo+fair", timing={"mode": "flow"})
    assert main(["run", str(p), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert "servers" in one_line_error(capsys)


@pytest.mark.parametrize("backend", ["sim", "emu"])
def test_asrpt_policies_refused_before_anything_runs(backend, tmp_path, capsys):
    """``compare --policies fifo,asrpt,spjf`` on mixed servers: A-SRPT is refused before the first policy
    runs (on the emulator: before Ray starts), naming the policy."""
    import ray

    p = write_trial(tmp_path, {"kind": "synthetic", "jobs": 4})
    out = tmp_path / "out"
    rc = main(["compare", str(p), "--policies", "fifo,asrpt,spjf", "--backend", backend, "--out", str(out), "--quiet"])
    assert rc == 2
    err = one_line_error(capsys)
    assert "policy 'asrpt' needs identical servers" in err and "servers of 2, 4, 8 GPUs" in err
    assert not out.exists()
    assert not ray.is_initialized()
