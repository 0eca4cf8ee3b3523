"""The flow simulator's fast-forward (sim/fastforward.py): skipped periods give the times every event gives."""

import numpy as np
import pytest

from conftest import rar_job, small_cluster
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.sim.fastforward import FastForward, Mark, find_period
from raytestbed.sim.flownet import FlowNet

MB = 1e6


def _pipe(job_id, arrival, replicas, iterations, out_mb=6.0, param_mb=8.0, fwd=0.004, bwd=0.008) -> Job:
    stages = tuple(Stage(k, StageProfile(fwd, bwd, out_bytes=(out_mb * MB if s + 1 < len(replicas) else 0.0),
                                         param_bytes=param_mb * MB)) for s, k in enumerate(replicas))
    return Job(job_id, arrival, iterations, stages, CommPattern.PIPELINE)


def _ps(job_id, arrival, workers, iterations, param_mb, num_ps) -> Job:
    return Job(job_id, arrival, iterations, (Stage(workers, StageProfile(0.01, 0.02, 0.0, param_mb * MB)),),
               CommPattern.PS, num_ps=num_ps)


def _jobs():
    """A split 3-stage pipeline on servers 0-1, a PS job on servers 2-3 (both alone on their links),
    a ring job that waits for GPUs and starts when the pipeline ends, a 2-stage pipeline inside one
    server after it, and an arrival in the middle of the pipeline's run (a window ends before it)."""
    return [_pipe(0, 0.0, (1, 2, 1), iterations=160),
            _ps(1, 0.01, 4, 120, 4.0, 2),
            rar_job(2, 0.5, workers=4, iterations=30, grad_bytes=20 * MB),
            _pipe(3, 1.0, (1, 1), iterations=90, out_mb=2.0),
            _pipe(4, 3.0, (2, 2), iterations=60)]


def _run(fast_forward: bool, q: int = 1):
    cl = small_cluster(4, 2, nic_gbps=1, intra_gbs=10)
    sim = Simulator(cl, _jobs(), make_policy("fifo", "placement", 0), mode="flow", iterations_per_coflow=q,
                    fast_forward=fast_forward)
    return sim, sim.run()


@pytest.mark.parametrize("q", [1, 3])
def test_fast_forward_gives_every_job_the_times_of_every_event(q):
    sim_on, on = _run(True, q)
    sim_off, off = _run(False, q)
    assert sim_off.ff is None
    assert on.summary["fast_forward"]["windows"] >= 2
    assert on.summary["fast_forward"]["iterations_skipped"] >= 40 // q
    assert len(on.records) == len(off.records) == 5
    for a, b in zip(on.records, off.records):
        assert a.job.job_id == b.job.job_id and a.placement == b.placement
        assert a.finish_s == pytest.approx(b.finish_s, rel=1e-9, abs=0), a.job.job_id
        assert a.first_start_s == pytest.approx(b.first_start_s, rel=1e-9, abs=0), a.job.job_id
        assert a.lower_bound_s == pytest.approx(b.lower_bound_s, rel=1e-9), a.job.job_id
        assert a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-9), a.job.job_id
    assert on.end_time_s == pytest.approx(off.end_time_s, rel=1e-9)
    assert on.iterations_done == off.iterations_done


def test_fast_forward_is_off_with_a_network_policy():
    cl = small_cluster(4, 2, nic_gbps=1, intra_gbs=10)
    sim = Simulator(cl, _jobs(), make_policy("fifo", "placement", 0), make_policy("fair", "network", 0),
                    mode="flow")
    assert sim.ff is None


def test_a_run_is_steady_only_when_its_states_repeat():
    def mark(t, v):
        return Mark(t, ("s",), (v,), (0,), (0.0,), (0,))
    # iteration times 1, 2, 1, 2, ... and states that repeat with them: period 2
    ts = np.cumsum([1.0, 2.0] * 10)
    marks = [mark(t, float(k % 2)) for k, t in enumerate(ts)]
    assert find_period(marks, 1e-9, 4, 4) == 2
    # the same times, a state that drifts: not steady
    drift = [mark(t, k * 1e-3) for k, t in enumerate(ts)]
    assert find_period(drift, 1e-9, 4, 4) is None
    # too few marks to tell
    assert find_period(marks[:5], 1e-9, 4, 4) is None
    ff = FastForward()
    assert ff.whole_periods(10.0, 2.5) == 3  # (the 4th would end at the instant of the change)
    assert ff.whole_periods(10.1, 2.5) == 4


def test_detached_flows_come_back_as_they_were():
    cl = small_cluster(3, 2)
    jobs = [rar_job(0), rar_job(1), rar_job(2)]
    net = FlowNet(cl, jobs)
    for j in jobs:
        net.add_coflow(j.job_id, (j.job_id, 0, 0), np.array([0, 1]), np.array([1, 2]), np.array([5e6, 7e6]), 0.0)
    net.reallocate()
    net.advance(0.001)
    before = {c: getattr(net, c).copy() for c in ("uid", "rank", "rem", "total", "share")}
    saved = net.detach(1)
    assert len(net) == 4 and 1 not in net.rank.tolist()
    net.attach(1, saved)
    for c, v in before.items():
        assert np.array_equal(getattr(net, c), v), c


def test_runs_that_share_links_are_skipped_together_by_their_common_period():
    """Two 3-stage pipelines with server 1 in common (first fit on 3 x 2 GPUs): one group, skipped
    only when their joint state repeats; every job's times as with every event."""
    def jobs():
        return [_pipe(0, 0.0, (1, 1, 1), iterations=300), _pipe(1, 0.0, (1, 1, 1), iterations=250, out_mb=3.0)]
    cl = small_cluster(3, 2, nic_gbps=1, intra_gbs=10)
    on = Simulator(cl, jobs(), make_policy("fifo", "placement", 0), mode="flow").run()
    off = Simulator(cl, jobs(), make_policy("fifo", "placement", 0), mode="flow", fast_forward=False).run()
    servers = [{int(p.split(":")[1].split("x")[0]) for p in r.placement.split("|")} for r in on.records]
    assert servers[0] & servers[1]  # (they share a server: one group)
    assert on.summary["fast_forward"]["iterations_skipped"] >= 200
    for a, b in zip(on.records, off.records):
        assert a.finish_s == pytest.approx(b.finish_s, rel=1e-9, abs=0), a.job.job_id
        assert a.lower_bound_s == pytest.approx(b.lower_bound_s, rel=1e-9), a.job.job_id
