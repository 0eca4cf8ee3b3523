"""GPU types: the cluster file, per-type speeds (throughput table, factors) in the analytic simulator,
and the checkpoint restore cost of a restarted job."""

import json
import math

import pytest

from raytestbed.config import parse_cluster
from raytestbed.core.cluster import DEFAULT_GPU_TYPE, Cluster, Server
from raytestbed.core.gpu_types import GpuSpeeds, ThroughputTable
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.errors import ConfigError
from raytestbed.core.events import JobArrived, Preempt, StartJob, Tick, WakeUp
from raytestbed.core.policy import Policy
from raytestbed.sim.engine import Simulator

GB = 1e9


def typed_cluster(types=("v100", "k80"), gpus=2, speed=()):
    """One server per type, ``gpus`` GPUs each, 10 GB/s NICs."""
    servers = tuple(Server(i, gpus, GB, GB, gpu_type=t) for i, t in enumerate(types))
    return Cluster(servers, 100 * GB, gpu_speed=tuple(speed))


def rar(job_id, iters, gpus=1, compute=1.0, model="", arrival=0.0):
    return Job(job_id, arrival, iters, (Stage(gpus, StageProfile(compute / 2, compute / 2, 0, 0)),),
               CommPattern.RAR, model=model)


class OnGpus(Policy):
    """Test policy: starts job j on the GPU ids ``plan[j]`` when it arrives."""

    name = "on-gpus-test"

    def __init__(self, seed: int = 0, plan: dict | None = None) -> None:
        super().__init__(seed)
        self.plan = plan or {}

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            return [StartJob(event.job.job_id, Placement((tuple(self.plan[event.job.job_id]),)))]
        return []


def table(tmp_path, rows):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({t: {str((j, s)): {"null": v} for (j, s), v in r.items()} for t, r in rows.items()}))
    return ThroughputTable.from_json(p)


def test_cluster_file_declares_gpu_types_per_group():
    cfg = parse_cluster({"nic_gbps": 10, "intra_gbytes_per_s": 100, "gpu_speed": {"k80": 0.25},
                         "servers": [{"count": 2, "gpus": 8, "gpu_type": "v100"}, {"count": 1, "gpus": 4, "gpu_type": "k80"},
                                     {"gpus": 2}]}, "c.yaml")
    c = cfg.build()
    assert [s.gpu_type for s in c.servers] == ["v100", "v100", "k80", DEFAULT_GPU_TYPE]
    assert c.gpu_types == ("v100", "k80", DEFAULT_GPU_TYPE)
    assert c.gpus_by_type() == {"v100": 16, "k80": 4, DEFAULT_GPU_TYPE: 2}
    assert c.gpu_type_of(16) == "k80" and c.gpu_type_of(20) == DEFAULT_GPU_TYPE
    assert c.speed_factor("k80") == 0.25 and c.speed_factor("v100") == 1.0
    assert c.heterogeneous


def test_default_cluster_has_one_uniform_type():
    c = Cluster.homogeneous(2, 4, GB, GB)
    assert c.gpu_types == (DEFAULT_GPU_TYPE,) and not c.heterogeneous
    assert GpuSpeeds(c).uniform


def test_gpu_speed_of_an_undeclared_type_is_one_line_error():
    with pytest.raises(ConfigError, match="gpu_speed: no server group has gpu_type 'a100'"):
        parse_cluster({"nic_gbps": 10, "intra_gbytes_per_s": 100, "gpu_speed": {"a100": 2.0},
                       "servers": [{"gpus": 8, "gpu_type": "v100"}]}, "c.yaml")
    with pytest.raises(ConfigError, match="gpu_type"):
        parse_cluster({"nic_gbps": 10, "intra_gbytes_per_s": 100, "servers": [{"gpus": 8, "gpu_type": "v 100"}]},
                      "c.yaml")


def test_throughput_table_reads_gavel_format(tmp_path):
    t = table(tmp_path, {"v100": {("ResNet-18 (batch size 16)", 1): 32.35}, "k80": {("ResNet-18 (batch size 16)", 1): 8.0}})
    assert t.get("v100", "ResNet-18 (batch size 16)", 1) == 32.35
    assert t.get("p100", "ResNet-18 (batch size 16)", 1) is None
    assert t.has("ResNet-18 (batch size 16)", 1) and not t.has("ResNet-18 (batch size 16)", 2)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"v100": {"ResNet": {"null": 1.0}}}))
    with pytest.raises(ValueError, match="job key 'ResNet'"):
        ThroughputTable.from_json(bad)


def test_table_speed_and_slowest_type_in_the_simulator(tmp_path):
    """Alone on a V100 a job runs at the table's V100 throughput; placed on one V100 and one K80 it runs at
    the K80's: 100 iterations at 10 and 2 iterations/s take 10 s and 50 s."""
    t = table(tmp_path, {"v100": {("M", 1): 20.0, ("M", 2): 10.0}, "k80": {("M", 1): 5.0, ("M", 2): 2.0}})
    c = typed_cluster()
    jobs = [rar(0, 100, gpus=2, model="M"), rar(1, 100, gpus=2, model="M", arrival=100.0)]
    plan = {0: [0, 1], 1: [1, 2]}  # job 0 on both V100s, job 1 on a V100 and a K80
    res = Simulator(c, jobs, OnGpus(plan=plan), speeds=GpuSpeeds(c, t)).run()
    fin = {r.job.job_id: r.finish_s for r in res.records}
    assert fin[0] == pytest.approx(10.0)
    assert fin[1] == pytest.approx(100.0 + 50.0)


def test_missing_table_row_for_a_type_is_an_error(tmp_path):
    t = table(tmp_path, {"v100": {("M", 1): 20.0}})
    c = typed_cluster()
    with pytest.raises(ValueError, match="no throughput for \\('M', 1\\) on GPU type k80"):
        Simulator(c, [rar(0, 10, model="M")], OnGpus(plan={0: [2]}), speeds=GpuSpeeds(c, t)).run()


def test_speed_factor_divides_the_profiled_compute():
    """A K80 at factor 0.25 computes 4x slower: 10 iterations of 1 s take 40 s; a job on a V100 and a
    K80 runs at the K80's speed; without factors every type runs at the profile's speed."""
    jobs = [rar(0, 10, model="x"), rar(1, 10, arrival=100.0), rar(2, 10, arrival=200.0)]
    res = Simulator(typed_cluster(), jobs, OnGpus(plan={0: [2], 1: [0], 2: [0]})).run()
    assert [r.finish_s for r in res.records] == pytest.approx([10.0, 110.0, 210.0])
    c = typed_cluster(speed=(("k80", 0.25),))
    res = Simulator(c, jobs, OnGpus(plan={0: [2], 1: [0], 2: [0]}), speeds=GpuSpeeds(c)).run()
    assert [r.finish_s for r in res.records] == pytest.approx([40.0, 110.0, 210.0])
    two = [rar(0, 10, gpus=2)]
    res = Simulator(c, two, OnGpus(plan={0: [1, 2]}), speeds=GpuSpeeds(c)).run()
    assert res.records[0].finish_s == pytest.approx(40.0)


@pytest.mark.parametrize("schedule", ["workers", "transfers", "coflows"])
def test_flow_timing_charges_each_type_its_speed(schedule):
    """Flow timing agrees with the analytic model where both must: a one-GPU job computes at its type's
    speed (no communication), and a data-parallel job across a V100 and a K80 whose all-reduce moves
    nothing runs at the K80's (the slowest type's) speed, worker by worker or as coflows."""
    c = typed_cluster(speed=(("k80", 0.25),))
    sp = GpuSpeeds(c)
    jobs = [rar(0, 10), rar(1, 10, arrival=100.0), rar(2, 10, gpus=2, arrival=200.0)]
    plan = {0: [2], 1: [0], 2: [1, 2]}
    flow = Simulator(c, jobs, OnGpus(plan=plan), mode="flow", speeds=sp, schedule=schedule).run()
    analytic = Simulator(c, jobs, OnGpus(plan=plan), speeds=sp).run()
    assert [r.finish_s for r in flow.records] == pytest.approx([40.0, 110.0, 240.0], rel=1e-12)
    assert [r.finish_s for r in flow.records] == pytest.approx([r.finish_s for r in analytic.records], rel=1e-12)


def test_flow_timing_of_a_job_across_types_is_its_slowest_workers():
    """With communication: a 2-GPU ring across a V100 and a K80 (factor 0.25) takes, per iteration, the
    K80's compute (1 s / 0.25) plus the all-reduce (2 steps of 50 MB each way over 100 MB/s NICs, 1 s),
    whether ring jobs run worker by worker or not (a ring across speeds always does)."""
    c = Cluster(tuple(Server(i, 2, GB / 10, GB / 10, gpu_type=t) for i, t in enumerate(("v100", "k80"))),
                100 * GB, gpu_speed=(("k80", 0.25),))
    job = Job(0, 0.0, 10, (Stage(2, StageProfile(0.5, 0.5, 0, 1e8)),), CommPattern.RAR)
    for schedule in ("workers", "transfers"):
        res = Simulator(c, [job], OnGpus(plan={0: [1, 2]}), mode="flow", speeds=GpuSpeeds(c), schedule=schedule).run()
        assert res.records[0].finish_s == pytest.approx(10 * (4.0 + 1.0), rel=1e-9)


def test_flow_timing_and_the_emulator_refuse_jobs_the_throughput_table_times(tmp_path):
    """The table's time per iteration includes communication, which flow timing makes from transfers."""
    c = typed_cluster()
    t = table(tmp_path, {"v100": {("vgg16", 1): 2.0}, "k80": {("vgg16", 1): 0.5}})
    with pytest.raises(ValueError, match="job 0: the throughput table .* communication included"):
        Simulator(c, [rar(0, 10, model="vgg16")], OnGpus(plan={0: [0]}), mode="flow", speeds=GpuSpeeds(c, t))
    # a job the table does not know runs at the factors
    res = Simulator(c, [rar(0, 10, model="other")], OnGpus(plan={0: [0]}), mode="flow", speeds=GpuSpeeds(c, t)).run()
    assert res.records[0].finish_s == pytest.approx(10.0)


class PreemptOnce(Policy):
    """Test policy: starts job 0 on GPU 0 at arrival, preempts it at ``stop_s``, starts it again on GPU
    ``again`` at ``restart_s``."""

    name = "preempt-once-test"

    def __init__(self, seed: int = 0, stop_s: float = 30.0, restart_s: float = 50.0, again: int = 1) -> None:
        super().__init__(seed)
        self.stop_s, self.restart_s, self.again = stop_s, restart_s, again

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            return [StartJob(0, Placement(((0,),))), WakeUp(self.stop_s), WakeUp(self.restart_s)]
        if isinstance(event, Tick) and event.time == self.stop_s and 0 in view.running:
            return [Preempt(0)]
        if isinstance(event, Tick) and event.time == self.restart_s and 0 in view.pending:
            return [StartJob(0, Placement(((self.again,),)))]
        return []


@pytest.mark.parametrize("mode", ["analytic", "flow"])
@pytest.mark.parametrize("restore_s", [0.0, 7.5])
def test_preempted_job_resumes_with_its_progress_and_pays_the_restore_cost(restore_s, mode):
    """100 iterations of 1 s: 30 done by the preemption at 30 s; restarted at 50 s it restores for
    restore_s, then runs the 70 left: it finishes at 50 + restore_s + 70."""
    c = typed_cluster(types=("v100",), gpus=2)
    res = Simulator(c, [rar(0, 100)], PreemptOnce(), restore_s=restore_s, mode=mode).run()
    r = res.records[0]
    assert r.preemptions == 1
    assert r.finish_s == pytest.approx(50.0 + restore_s + 70.0)
    assert r.first_start_s == 0.0


@pytest.mark.parametrize("mode", ["analytic", "flow"])
def test_restore_time_brings_no_progress(mode):
    """Preempted again during its restore, a job keeps exactly the progress it had."""
    c = typed_cluster(types=("v100",), gpus=2)

    class Twice(PreemptOnce):
        def on_event(self, event, view):
            out = super().on_event(event, view)
            if isinstance(event, JobArrived):
                out += [WakeUp(55.0), WakeUp(60.0)]
            if isinstance(event, Tick) and event.time == 55.0:
                assert view.running[0].iterations_done == pytest.approx(30.0)
                out.append(Preempt(0))
            if isinstance(event, Tick) and event.time == 60.0:
                out.append(StartJob(0, Placement(((0,),))))
            return out

    res = Simulator(c, [rar(0, 100)], Twice(), restore_s=10.0, mode=mode).run()
    assert res.records[0].preemptions == 2
    assert res.records[0].finish_s == pytest.approx(60.0 + 10.0 + 70.0)


def test_gavel_throughput_data_set_when_present():
    """The Gavel throughput data set reads as a table (skipped where the data folder is absent)."""
    from raytestbed.traces.datadir import find_data_dir

    d = find_data_dir()
    if d is None or not (d / "gavel-throughputs" / "simulation_throughputs.json").is_file():
        pytest.skip("no Gavel throughput data set in the data folder")
    t = ThroughputTable.from_json(d / "gavel-throughputs" / "simulation_throughputs.json")
    assert {"v100", "p100", "k80"} <= set(t.gpu_types)
    assert t.get("v100", "ResNet-18 (batch size 16)", 1) == pytest.approx(32.35, rel=1e-3)
    assert math.isfinite(t.get("k80", "ResNet-18 (batch size 16)", 1))


def _trial(tmp_path, **timing):
    from raytestbed.config import parse_trial

    (tmp_path / "t.json").write_text(json.dumps({"v100": {"('vgg16', 1)": {"null": 2.0}},
                                                  "k80": {"('vgg16', 1)": {"null": 0.5}}}))
    data = {"name": "typed", "seed": 1, "policy": "max_min_fairness_perf",
            "cluster": {"nic_gbps": 10, "intra_gbytes_per_s": 100,
                        "servers": [{"gpus": 2, "gpu_type": "v100"}, {"gpus": 2, "gpu_type": "k80"}]},
            "workload": {"kind": "synthetic", "jobs": 6, "mean_interarrival_s": 100, "models": ["vgg16"],
                         "gpu_mix": {1: 1.0}, "comm_mix": {"rar": 1.0}, "iterations": [200, 400]},
            "timing": {"throughputs": "t.json", **timing}}
    return parse_trial(data, str(tmp_path / "trial.yaml"), tmp_path / "trial.yaml")


def test_trial_reads_the_throughput_table_and_restore_cost(tmp_path):
    """A trial with ``timing.throughputs`` runs its vgg16 jobs at the table's speeds: every job's
    iteration time is 1/2 s (V100) or 2 s (K80). The summary's per-type utilisation adds up to the jobs'
    GPU-seconds."""
    import pandas as pd

    from raytestbed.trial import PolicyPair, run_into

    loaded = _trial(tmp_path, restore_s=30.0)
    summary = run_into(tmp_path / "out", loaded, PolicyPair("fifo"), 1, "sim", show_progress=False,
                       report=False)
    jobs = pd.read_csv(tmp_path / "out" / "jobs.csv")
    assert (jobs["status"] == "finished").all()
    assert set(jobs["iteration_time_s"].round(9)) <= {0.5, 2.0}
    by_type = summary["gpu_utilisation_by_type"]
    assert set(by_type) == {"v100", "k80"} and all(0 <= u <= 1 for u in by_type.values())
    held = sum(u * 2 * summary["makespan_s"] for u in by_type.values())
    assert held == pytest.approx(jobs["gpu_seconds"].sum())


def test_the_report_shows_utilisation_per_gpu_type(tmp_path):
    """report.md of a run on a cluster of two GPU types has a row per type with the summary's
    utilisation; without the summary's per-type utilisation (what a one-type run writes) the report
    has no such section."""
    import json

    from raytestbed.results.report import run_report
    from raytestbed.trial import PolicyPair, run_into

    run_into(tmp_path / "out", _trial(tmp_path), PolicyPair("fifo"), 1, "sim", show_progress=False, report=False)
    report = run_report(tmp_path / "out", 4).read_text()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "Per GPU type" in report
    for t, u in summary["gpu_utilisation_by_type"].items():
        assert f"| {t} | {u:.4g} |" in report
    del summary["gpu_utilisation_by_type"]
    (tmp_path / "out" / "summary.json").write_text(json.dumps(summary))
    assert "Per GPU type" not in run_report(tmp_path / "out", 4).read_text()


@pytest.mark.parametrize("timing,backend,message", [
    ({"mode": "flow"}, "sim", "job 0: the throughput table .* flow timing and the emulator make"),
    ({}, "emu", "backend emu: job 0: the throughput table .*use timing.mode: analytic"),
])
def test_table_speeds_refused_where_not_modelled(tmp_path, timing, backend, message):
    """A job the throughput table times cannot run where communication comes from transfers: one line,
    before anything runs (no Ray process for the emulator)."""
    from raytestbed.trial import PolicyPair, run_into

    loaded = _trial(tmp_path, **timing)
    with pytest.raises(ConfigError, match=message):
        run_into(tmp_path / "out", loaded, PolicyPair("fifo"), 1, backend, show_progress=False, report=False)


def test_unknown_throughput_table_is_one_line_error(tmp_path):
    from raytestbed.trial import PolicyPair, run_into

    loaded = _trial(tmp_path, throughputs="missing.json")
    with pytest.raises(ConfigError, match="timing.throughputs: .*missing.json: file not found"):
        run_into(tmp_path / "out", loaded, PolicyPair("fifo"), 1, "sim", show_progress=False, report=False)
