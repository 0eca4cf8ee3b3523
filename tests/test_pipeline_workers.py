"""Pipeline jobs in flow timing run replica by replica (sim/pipeline_workers.py): the emulator's schedule."""

from dataclasses import replace

import pytest

from conftest import rar_job, run_emulated_in_process, small_cluster
from raytestbed.core.events import CoflowFinished, CoflowStarted, IterationMeasured
from raytestbed.core.job import CommPattern, Job, JobTraffic, Stage, StageProfile
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.sim.pipeline_workers import uses_workers

MB = 1e6


def _pipe(job_id, arrival, replicas, iterations=12, out_mb=6.0, param_mb=8.0, fwd=0.004, bwd=0.008) -> Job:
    stages = tuple(Stage(k, StageProfile(fwd, bwd, out_bytes=(out_mb * MB if s + 1 < len(replicas) else 0.0),
                                         param_bytes=param_mb * MB)) for s, k in enumerate(replicas))
    return Job(job_id, arrival, iterations, stages, CommPattern.PIPELINE)


def _jobs():
    """A 3-stage pipeline whose middle stage has a replica on each server (filled in GPU order on 2 x 2
    GPUs: stage 1 on GPUs 1 and 2), then a 2-stage pipeline and a ring job that contend with it."""
    return [_pipe(0, 0.0, (1, 2, 1), iterations=15),
            _pipe(1, 0.05, (1, 1), iterations=10, out_mb=12.0),
            rar_job(2, 0.1, workers=2, iterations=8, grad_bytes=20 * MB)]


def test_which_jobs_run_worker_by_worker():
    assert uses_workers(_pipe(0, 0.0, (1, 2)))
    assert not uses_workers(_pipe(0, 0.0, (2,)))
    assert not uses_workers(rar_job(0))
    explicit = replace(_pipe(0, 0.0, (1, 2)), traffic=JobTraffic(coflows=(((0, 1, 1e6),),)))
    assert not uses_workers(explicit)


def test_a_pipeline_with_an_explicit_compute_time_is_refused_by_name():
    job = replace(_pipe(4, 0.0, (1, 2)), traffic=JobTraffic(compute_s=0.5))
    with pytest.raises(ValueError, match="job 4: a pipeline job run worker by worker takes its compute"):
        Simulator(small_cluster(2, 2), [job], make_policy("fifo", "placement", 0), mode="flow").run()


def test_flow_timing_matches_the_emulator_per_job_on_split_stage_pipelines():
    """The emulator (real worker programs on the virtual clock, in-process) and the flow simulator
    give every job the same finish time: the same schedule, the same fluid model."""
    cl = small_cluster(2, 2, nic_gbps=1, intra_gbs=10)
    emu, emu_events, _ = run_emulated_in_process(cl, _jobs(), [make_policy("fifo", "placement", 0)],
                                                 fast_forward=False)
    sim_events = []
    sim = Simulator(cl, _jobs(), make_policy("fifo", "placement", 0), mode="flow", on_event=sim_events.append).run()
    assert {r.job.job_id for r in sim.records} == {0, 1, 2}
    for r in sim.records:
        assert emu["records"][r.job.job_id].finish_s == pytest.approx(r.finish_s, rel=1e-6), r.job.job_id
        assert emu["records"][r.job.job_id].placement == r.placement
    # the all-reduce coflows of the pipelines' split stage as the emulator reports them (the ring job's
    # iteration is one coflow in the simulator, 2(k-1) steps in the emulator: not compared)
    def coflows(events):
        return sorted((e.job_id, type(e).__name__, round(e.time, 9), round(e.bytes)) for e in events
                      if isinstance(e, (CoflowStarted, CoflowFinished)) and e.job_id in (0, 1))
    assert any(j == 0 for j, *_ in coflows(sim_events))
    assert coflows(sim_events) == coflows(emu_events)


def test_replicas_of_a_split_stage_overlap_opposite_nic_directions():
    """Alone on the cluster, the split pipeline's steady iteration is shorter than its cross-server
    transfers take in the three one-after-another groups of job-wide coflow phases (9 MB per NIC
    direction), though not shorter than one direction's 6 MB."""
    cl = small_cluster(2, 2, nic_gbps=1, intra_gbs=1000)
    job = _pipe(0, 0.0, (1, 2, 1), iterations=20, param_mb=0.001)
    events = []
    Simulator(cl, [job], make_policy("fifo", "placement", 0), mode="flow", on_event=events.append).run()
    steady = [e.seconds for e in events if isinstance(e, IterationMeasured)][5:]
    nic = cl.servers[0].nic_egress_bps
    # per iteration 3 MB slices cross: act 0 -> 1 (replica on server 1) and its gradient back, act from
    # the replica on server 0 to stage 2 (server 1) and its gradient back: 6 MB each way
    assert max(steady) < 9 * MB / nic
    assert min(steady) >= 6 * MB / nic


def test_iterations_per_coflow_lumps_pipeline_iterations():
    """q iterations per cycle: q times fewer iteration events, and the same job later by at most what
    lumping adds: every cycle is q iterations long, the first (the pipeline filling) included, so the
    job ends later by up to (q - 1) x the first iteration's excess over a steady one."""
    cl = small_cluster(2, 2, nic_gbps=1, intra_gbs=10)
    out = {}
    for q in (1, 5):
        events = []
        res = Simulator(cl, [_pipe(0, 0.0, (1, 2, 1), iterations=40)], make_policy("fifo", "placement", 0),
                        mode="flow", iterations_per_coflow=q, on_event=events.append,
                        fast_forward=False).run()  # (every iteration's event: none skipped)
        out[q] = (res.records[0].finish_s, [e.seconds for e in events if isinstance(e, IterationMeasured)])
    assert len(out[5][1]) == 8 and len(out[1][1]) == 40
    first, steady = out[1][1][0], out[1][1][20]
    assert first > steady
    assert 0.0 <= out[5][0] - out[1][0] <= (5 - 1) * (first - steady)


def test_a_preempted_pipeline_resumes_where_it_stopped():
    """Killing a server the split pipeline uses ends its run; it restarts on the servers left and
    every job finishes with all its iterations."""
    from raytestbed.core.events import Fault

    cl = small_cluster(3, 2, nic_gbps=1, intra_gbs=10)
    jobs = [_pipe(0, 0.0, (1, 2, 1), iterations=30)]
    res = Simulator(cl, jobs, make_policy("fifo", "placement", 0), mode="flow",
                    faults=[Fault("kill_server", 1, 0.2)]).run()
    assert res.records[0].finish_s > 0.2
    assert res.iterations_done[0] == 30


def test_pipelines_as_phases_are_the_faster_coflow_approximation():
    """timing.schedule: coflows times the same split pipeline as job-wide coflows (slowest stage's compute,
    then the inbound transfers of stages 0, 3, ..., of 1, 4, ..., of 2, 5, ...): here 12 ms of compute
    and three groups of 3 MB per NIC direction, one after the other."""
    cl = small_cluster(2, 2, nic_gbps=1, intra_gbs=1000)
    job = _pipe(0, 0.0, (1, 2, 1), iterations=20, param_mb=0.0)
    out = {}
    for mode in ("workers", "coflows"):
        events = []
        Simulator(cl, [job], make_policy("fifo", "placement", 0), mode="flow", schedule=mode,
                  on_event=events.append).run()
        out[mode] = [e.seconds for e in events if isinstance(e, IterationMeasured)]
    nic = cl.servers[0].nic_egress_bps
    assert out["coflows"][5] == pytest.approx(0.012 + 9 * MB / nic, rel=1e-6)
    assert max(out["workers"][5:]) < 9 * MB / nic
    with pytest.raises(ValueError, match="unknown flow schedule 'lanes'"):
        Simulator(cl, [job], make_policy("fifo", "placement", 0), mode="flow", schedule="lanes")


def test_the_trial_names_the_pipeline_timing():
    from raytestbed.config import parse_trial
    from raytestbed.errors import ConfigError

    base = {"name": "t", "cluster": {"nic_gbps": 1, "intra_gbytes_per_s": 10, "servers": [{"count": 2, "gpus": 2}]},
            "workload": {"kind": "synthetic", "jobs": 2}}
    assert parse_trial({**base, "timing": {"mode": "flow"}}, "t").trial.timing.schedule == "workers"
    with pytest.raises(ConfigError, match="schedule"):
        parse_trial({**base, "timing": {"mode": "flow", "schedule": "lanes"}}, "t")


def _ps(job_id, arrival, workers, iterations, param_mb, num_ps) -> Job:
    return Job(job_id, arrival, iterations, (Stage(workers, StageProfile(0.01, 0.02, 0.0, param_mb * MB)),),
               CommPattern.PS, num_ps=num_ps)


def test_parameter_server_jobs_match_the_emulator_while_they_contend():
    """Two 4-worker PS jobs, each with PSs on both servers, sharing the NICs: every PS pulls as soon as its
    own shards arrived, as the emulator's PS tasks do (job-wide push-then-pull coflows were 7 % slower
    in total on the parity_ps trial)."""
    assert uses_workers(_ps(0, 0.0, 2, 5, 1.0, 1))
    jobs = lambda: [_ps(0, 0.0, 4, 12, 8.0, 4), _ps(1, 0.1, 4, 15, 6.0, 4), _ps(2, 0.3, 2, 6, 4.0, 2)]  # noqa: E731
    cl = small_cluster(2, 4, nic_gbps=1, intra_gbs=0.05)
    emu, _, _ = run_emulated_in_process(cl, jobs(), [make_policy("fifo", "placement", 0)], fast_forward=False)
    sim = Simulator(cl, jobs(), make_policy("fifo", "placement", 0), mode="flow").run()
    assert len(sim.records) == 3
    for r in sim.records:
        assert emu["records"][r.job.job_id].placement == r.placement
        assert emu["records"][r.job.job_id].finish_s == pytest.approx(r.finish_s, rel=1e-6), r.job.job_id


def test_a_replicated_pipeline_runs_at_eq7_when_activations_meet_an_all_reduce():
    """Stage 1 has 8x stage 0's parameters, so its all-reduce is still running when stage 0 (done with
    its own) sends the next mini-batch's activations: they share stage 1's ingress port with the ring,
    slowing it by their transfer time, and are not charged again as GPU hold when received (that made
    the iteration 32 % longer than A-SRPT eq. 7 here). Alone on the cluster, the steady iteration is eq. 7."""
    from raytestbed.core.job import Stage, StageProfile
    from raytestbed.core.placement import Placement
    from raytestbed.core.timing import asrpt_iteration_time

    cl = small_cluster(4, 1, nic_gbps=1, intra_gbs=20)
    job = Job(0, 0.0, 20, (Stage(2, StageProfile(0.004, 0.008, out_bytes=6 * MB, param_bytes=1 * MB)),
                           Stage(2, StageProfile(0.004, 0.008, out_bytes=0.0, param_bytes=8 * MB))),
              CommPattern.PIPELINE)
    events = []
    res = Simulator(cl, [job], make_policy("fifo", "placement", 0), mode="flow", on_event=events.append).run()
    assert res.records[0].placement == "s0:0x1+1x1|s1:2x1+3x1"  # one GPU per server
    steady = [e.seconds for e in events if isinstance(e, IterationMeasured)][4:-3]
    eq7 = asrpt_iteration_time(job, Placement(((0, 1), (2, 3))).counts(cl), cl.gpus_per_server, cl.nic_bps,
                               cl.intra_bps)
    assert steady and all(s == pytest.approx(eq7, rel=1e-9) for s in steady), (eq7, steady)
