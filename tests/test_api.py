"""The public Python API (raytestbed/api.py, importable from ``raytestbed``): trials, overrides, runs and
comparisons as pandas objects, the same results as the CLI, and the types a policy needs in one place."""

import json
import sys
import tempfile
import uuid
from pathlib import Path

import pandas as pd
import pytest

import raytestbed as rtb
from raytestbed.cli import main

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "workloads" / "trials" / "demo.yaml"


def test_the_policy_types_and_the_api_come_from_one_place():
    from raytestbed import api
    from raytestbed.core import events, policy, state

    for name in api.__all__:
        assert getattr(rtb, name) is getattr(api, name)
    assert rtb.Policy is policy.Policy and rtb.ClusterView is state.ClusterView
    for name in ("JobArrived", "JobStarted", "JobFinished", "JobFailed", "IterationMeasured", "CoflowStarted",
                 "CoflowGrew", "CoflowFinished", "Tick", "ServerLost", "StartJob", "Preempt", "Resize", "WakeUp",
                 "SetFlowWeights", "SetFlowRates"):
        assert getattr(rtb, name) is getattr(events, name)
    with pytest.raises(AttributeError):
        rtb.no_such_thing  # noqa: B018


def test_load_and_replace():
    t = rtb.load_trial(DEMO)
    assert (t.name, t.seed, t.config["workload"]["jobs"]) == ("demo", 1, 60)
    small = {"servers": [{"count": 2, "gpus": 2}]}
    with pytest.raises(rtb.ConfigError, match="needs 8 GPUs but the cluster has 4"):  # demo's 8-GPU jobs
        t.replace(seed=5, workload={"jobs": 7}, cluster=small).jobs()
    s = t.replace(seed=5, workload={"jobs": 7, "oversize": "clip"}, cluster=small)
    assert s.seed == 5 and len(s.jobs()) == 7 and max(j.gpus for j in s.jobs()) <= 4
    assert s.config["workload"]["models"] == t.config["workload"]["models"]  # other keys kept
    assert s.cluster.total_gpus == 4 and s.config["cluster"]["nic_gbps"] == t.config["cluster"]["nic_gbps"]
    assert t.config["workload"]["jobs"] == 60  # the original is unchanged
    with pytest.raises(rtb.ConfigError, match="workload: jobs: Input should be greater than 0"):
        t.replace(workload={"jobs": 0}).jobs()
    d = rtb.load_trial({**t.config, "seed": 9})
    assert d.seed == 9 and d.config["cluster"] == t.config["cluster"]


def test_run_and_compare_give_the_cli_results_as_pandas(tmp_path):
    t = rtb.load_trial(DEMO, workload={"jobs": 12})
    before = set(Path(tempfile.gettempdir()).glob("raytestbed-*"))
    mem = rtb.run(t, "fifo", seed=3)
    assert mem.folder is None and set(Path(tempfile.gettempdir()).glob("raytestbed-*")) == before
    assert isinstance(mem.summary, pd.Series) and isinstance(mem.jobs, pd.DataFrame)
    assert mem.summary["policy"] == "fifo" and mem.summary["seed"] == 3 and len(mem.jobs) == 12

    # the same run through the CLI writes the same per-job table
    trial_file = tmp_path / "t.yaml"
    trial_file.write_text(json.dumps({**t.config}))
    assert main(["run", str(trial_file), "--seed", "3", "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    cli = pd.read_csv(tmp_path / "cli" / "jobs.csv")
    pd.testing.assert_frame_equal(mem.jobs, cli)

    cmp = rtb.compare(t, ["fifo", "asrpt-perfect"], out=tmp_path / "cmp")
    assert cmp.folder == tmp_path / "cmp" and (cmp.folder / "comparison.png").is_file()
    pd.testing.assert_frame_equal(cmp.table, pd.read_csv(tmp_path / "cmp" / "comparison.csv"))
    assert list(cmp.results) == ["fifo", "asrpt-perfect"]
    assert cmp.results["asrpt-perfect"].summary["total_jct_s"] == cmp.table["total_jct_s"][1]
    assert len(cmp.jobs) == 24 and cmp.jobs.columns[0] == "policy"
    with pytest.raises(rtb.RaytestbedError, match="exists"):
        rtb.compare(t, ["fifo"], out=tmp_path / "cmp")  # an existing folder needs force=True
    assert rtb.compare(t, ["fifo"], out=tmp_path / "cmp", force=True).table["policy"].tolist() == ["fifo"]


def test_address_sets_the_trials_emu_address():
    from raytestbed.api import _prepare

    t = rtb.load_trial(DEMO)
    assert t.config["emu"]["address"] is None
    assert _prepare(t, "10.0.0.1:6379").config["emu"]["address"] == "10.0.0.1:6379"


POLICY = '''
from raytestbed import FreePool, Placement, Policy, StartJob


class Greedy(Policy):
    role = "placement"

    def on_event(self, event, view):
        out, pool = [], FreePool(view)
        for job in sorted(view.pending.values(), key=lambda j: j.job_id):
            m = next((m for m in range(view.cluster.num_servers) if pool.free_count[m] >= job.gpus), None)
            if m is not None:
                out.append(StartJob(job.job_id, Placement.fill_in_order(job, [(m, pool.take(m, job.gpus))])))
        return out
'''


@pytest.mark.slow
def test_emulated_run_on_a_ray_cluster_by_address(tmp_path, monkeypatch):
    """``address=``: a 2-node Ray cluster (ray.cluster_utils), a plug-in policy from a folder its nodes
    cannot import from; ~30 s on the 2-core host."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.cluster_utils")
    from raytestbed.emu.raysession import local_cluster

    assert not ray.is_initialized()
    mod = f"apipol_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{mod}.py").write_text(POLICY)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    with local_cluster(nodes=2, cpus_per_node=1, emu_gpus_per_node=2) as c:
        (tmp_path / "jobs.csv").write_text("job_id,arrival_s,gpus,iterations,model,comm\n"
                                           "0,0,2,10,resnet-small,rar\n1,0.2,2,10,resnet-small,rar\n")
        t = rtb.load_trial({"cluster": {"nic_gbps": 0.5, "intra_gbytes_per_s": 1, "servers": [{"count": 2, "gpus": 2}]},
                            "workload": {"kind": "csv", "path": str(tmp_path / "jobs.csv")},
                            "timing": {"mode": "flow"}, "emu": {"progress_s": 0.5}})
        res = rtb.run(t, f"{mod}:Greedy", backend="emu", address=c.address)
        assert res.summary["backend"] == "emu" and res.summary["finished"] == 2
        assert (res.jobs["measured_iterations"] >= 10).all()
