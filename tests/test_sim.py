"""The event-driven simulator with FIFO: analytic and flow timing, preemption, faults, determinism."""

import math

import pytest

from conftest import MB, rar_job, small_cluster
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.core.timing import AsrptModel, SjfbcoModel
from raytestbed.core.events import JobArrived, Preempt, StartJob, Tick
from raytestbed.core.policy import Policy
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Fault, Simulator


def single(job_id, arrival, iters, compute=1.0, gpus=1):
    return Job(job_id, arrival, iters, (Stage(gpus, StageProfile(compute / 2, compute / 2, 0, 0)),),
               CommPattern.RAR)


def test_fifo_queue_and_completion_times():
    c = small_cluster(servers=1, gpus=2)
    jobs = [single(0, 0.0, 10, gpus=2), single(1, 1.0, 5), single(2, 2.0, 5)]
    res = Simulator(c, jobs, make_policy("fifo")).run()
    fin = {r.job.job_id: (r.first_start_s, r.finish_s) for r in res.records}
    assert fin[0] == (0.0, 10.0)
    assert fin[1] == (10.0, 15.0)  # waits for job 0
    assert fin[2] == (10.0, 15.0)


def test_fifo_is_strict_head_of_line():
    c = small_cluster(servers=1, gpus=2)
    jobs = [single(0, 0.0, 10), single(1, 1.0, 5, gpus=2), single(2, 2.0, 1)]
    res = Simulator(c, jobs, make_policy("fifo")).run()
    start = {r.job.job_id: r.first_start_s for r in res.records}
    assert start[1] == 10.0 and start[2] == 15.0  # job 2 fits at t=2 but waits behind job 1


def test_analytic_time_matches_model(spec_job):
    c = small_cluster(servers=2, gpus=4)
    res = Simulator(c, [spec_job], make_policy("fifo")).run()
    alpha = AsrptModel().iteration_time(spec_job, Placement(((0, 1), (2, 3))), c, {})
    assert res.records[0].finish_s == pytest.approx(spec_job.iterations * alpha)


def test_contention_model_slows_co_running_split_jobs():
    c = small_cluster(servers=2, gpus=2)
    # two 2-GPU jobs that FIFO first-fit puts whole on one server each -> no contention
    jobs = [rar_job(0, workers=2, iterations=100), rar_job(1, workers=2, iterations=100)]
    res = Simulator(c, jobs, make_policy("fifo"), model=SjfbcoModel()).run()
    assert res.records[0].finish_s == pytest.approx(res.records[1].finish_s)


class _SplitPolicy(Policy):
    """Test policy: starts each job on one GPU of every server (forces splitting)."""

    name = "split-test"

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            j = event.job
            gpus = [view.free_gpus(m)[0] for m in range(j.gpus)]
            return [StartJob(j.job_id, Placement((tuple(gpus),)))]
        return []


def test_flow_mode_contention_emerges_on_shared_nic():
    c = small_cluster(servers=2, gpus=2, nic_gbps=8)  # 1e9 B/s
    one = [rar_job(0, workers=2, iterations=4, fwd=0.0, bwd=0.0, grad_bytes=1e9)]
    two = one + [rar_job(1, workers=2, iterations=4, fwd=0.0, bwd=0.0, grad_bytes=1e9)]
    alone = Simulator(c, one, _SplitPolicy(), mode="flow").run().records[0].finish_s
    shared = Simulator(c, two, _SplitPolicy(), mode="flow").run().records[0].finish_s
    # ring of 2 on 2 servers: each hop carries 2(w-1)m/w = 1e9 bytes at 1e9 B/s -> 1 s/iteration
    assert alone == pytest.approx(4.0)
    assert shared == pytest.approx(8.0)  # both jobs share each NIC direction: half rate


@pytest.mark.timeout(60)
def test_flow_mode_finishes_a_transfer_shorter_than_the_clock_resolution():
    """At t = 1e6 s the clock tells instants 1.2e-10 s apart; a 1-byte hop at 300 GB/s takes 3.3e-12 s.
    Its finish time (anchor time + bytes / rate, ``core.flows.finish_time``) rounds to the instant it
    started: it ends there and the run goes on (time must not stand still), on both backends alike."""
    from conftest import run_emulated_in_process

    c = small_cluster(servers=1, gpus=2)
    job = lambda: rar_job(0, arrival=1e6, workers=2, iterations=3, fwd=0.0, bwd=0.0, grad_bytes=1.0)  # noqa: E731
    (rec,) = Simulator(c, [job()], make_policy("fifo"), mode="flow").run().records
    assert rec.finish_s == pytest.approx(1e6, abs=1e-6)
    emu, _, _ = run_emulated_in_process(c, [job()], [make_policy("fifo")], fast_forward=False)
    assert emu["records"][0].finish_s == rec.finish_s


def test_flow_mode_matches_analytic_when_uncontended():
    c = small_cluster(servers=1, gpus=2)
    job = single(0, 0.0, 20, compute=0.5, gpus=1)
    a = Simulator(c, [job], make_policy("fifo")).run().records[0].finish_s
    f = Simulator(c, [job], make_policy("fifo"), mode="flow", iterations_per_coflow=3).run().records[0].finish_s
    assert a == pytest.approx(f) == pytest.approx(10.0)


def test_fair_network_policy_runs_in_flow_mode():
    c = small_cluster(servers=2, gpus=2)
    jobs = [rar_job(i, arrival=i, workers=3, iterations=5) for i in range(3)]
    res = Simulator(c, jobs, make_policy("fifo"), make_policy("fair", "network"), mode="flow").run()
    assert all(not math.isnan(r.finish_s) for r in res.records)


class _PreemptOnce(Policy):
    name = "preempt-test"

    def __init__(self):
        super().__init__()
        self.tick_interval_s = 5.0
        self.done = False

    def on_event(self, event, view):
        out = []
        if isinstance(event, Tick) and event.time == 5.0 and not self.done and 0 in view.running:
            self.done = True
            return [Preempt(0)]
        if isinstance(event, Tick) and event.time == 10.0:
            for jid, j in view.pending.items():
                out.append(StartJob(jid, Placement(((view.free_gpus(0)[0],),))))
        if isinstance(event, JobArrived):
            out.append(StartJob(event.job.job_id, Placement(((view.free_gpus(0)[0],),))))
        return out


def test_preemption_keeps_progress():
    c = small_cluster(servers=1, gpus=1)
    res = Simulator(c, [single(0, 0.0, 20)], _PreemptOnce()).run()
    r = res.records[0]
    assert r.preemptions == 1
    assert r.finish_s == pytest.approx(25.0)  # 5 s run, 5 s paused, 15 s left
    assert r.gpu_seconds == pytest.approx(20.0)


def test_server_failure_requeues_jobs_and_loses_gpus():
    c = small_cluster(servers=2, gpus=1)
    jobs = [single(0, 0.0, 10), single(1, 0.0, 10)]
    res = Simulator(c, jobs, make_policy("fifo"), faults=[Fault("kill_server", 0, 4.0)]).run()
    rec = {r.job.job_id: r for r in res.records}
    assert rec[0].failures == 1
    # job 0 keeps 4 iterations of progress and waits for server 1 (free at t=10)
    assert rec[0].finish_s == pytest.approx(16.0)
    assert rec[1].finish_s == pytest.approx(10.0)


def test_same_input_same_records():
    from raytestbed.traces.synthetic import synthetic_workload
    from raytestbed.traces.registry import WorkloadContext
    from raytestbed.core.profile import default_profiles
    from pathlib import Path

    c = small_cluster(servers=4, gpus=4)
    ctx = WorkloadContext(c, 7, Path("."), default_profiles())
    runs = []
    for _ in range(2):
        jobs = synthetic_workload({"jobs": 40, "mean_interarrival_s": 30}, ctx)
        res = Simulator(c, jobs, make_policy("fifo", seed=7)).run()
        runs.append([(r.job.job_id, r.first_start_s, r.finish_s, r.placement) for r in res.records])
    assert runs[0] == runs[1]


class _ResizeAt(Policy):
    """Starts a job on 1 GPU, then at t=4 resizes it to 2 GPUs."""

    name = "resize-test"

    def __init__(self):
        super().__init__()
        self.tick_interval_s = 4.0

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            return [StartJob(event.job.job_id, Placement(((0,),)))]
        if isinstance(event, Tick) and event.time == 4.0 and 0 in view.running:
            from raytestbed.core.events import Resize
            return [Resize(0, Placement(((0, 1),)))]
        return []


def test_resize_changes_workers_and_keeps_progress():
    c = small_cluster(servers=1, gpus=2)
    # 1 worker: 1 s/iteration (compute only); 2 workers on one server: ring over NVLink, tiny
    job = Job(0, 0.0, 10, (Stage(1, StageProfile(0.5, 0.5, 0, 1e3)),), CommPattern.RAR, max_workers=2)
    res = Simulator(c, [job], _ResizeAt()).run()
    r = res.records[0]
    assert r.finish_s == pytest.approx(4.0 + 6 * (1.0 + 2 * 1e3 / 2 / c.intra_bps))
    assert r.placement == "s0:0x2"
    # a job without max_workers cannot be resized to another worker count
    fixed = Job(0, 0.0, 10, (Stage(1, StageProfile(0.5, 0.5, 0, 1e3)),), CommPattern.RAR)
    from raytestbed.errors import PolicyError
    with pytest.raises(PolicyError):
        Simulator(c, [fixed], _ResizeAt()).run()


class _HalfRate(Policy):
    """Network policy giving every flow of job 0 an explicit 25% of a 1e9 B/s NIC."""

    name = "half-rate-test"
    role = "network"

    def on_event(self, event, view):
        from raytestbed.core.events import CoflowStarted, SetFlowRates
        if isinstance(event, CoflowStarted):
            cf = view.coflows[event.coflow_id]
            return [SetFlowRates({f.flow_id: 0.25e9 for f in cf.flows})]
        return []


def test_set_flow_rates_overrides_allocator():
    c = small_cluster(servers=2, gpus=2, nic_gbps=8)  # 1e9 B/s
    job = rar_job(0, workers=2, iterations=2, fwd=0.0, bwd=0.0, grad_bytes=1e9)
    res = Simulator(c, [job], _SplitPolicy(), _HalfRate(), mode="flow").run()
    assert res.records[0].finish_s == pytest.approx(2 * 1e9 / 0.25e9)
