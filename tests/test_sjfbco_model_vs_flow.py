"""Eq. (8) against flow-level timing on cases where the answer is known by hand."""

import pytest

from raytestbed.core.cluster import Cluster, Server
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.core.timing import SjfbcoModel, SjfbcoParams, sjfbco_iteration_time
from raytestbed.core.events import JobArrived, StartJob
from raytestbed.core.policy import Policy
from raytestbed.sim.engine import Simulator

BW = 1.25e9


class SplitPairs(Policy):
    """Job i on GPU i of server 0 and GPU i of server 1."""

    name = "split-pairs-test"

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            i, g = event.job.job_id, view.cluster.servers[0].gpus
            return [StartJob(i, Placement(((i, g + i),)))]
        return []


def _run(k, compute_s=0.0, iterations=20):
    cluster = Cluster((Server(0, k, BW, BW), Server(1, k, BW, BW)), 3e11)
    jobs = [Job(i, 0.0, iterations, (Stage(2, StageProfile(0.0, compute_s, 0.0, 50e6)),), CommPattern.RAR)
            for i in range(k)]
    res = Simulator(cluster, jobs, SplitPairs(), mode="flow", iterations_per_coflow=1).run()
    return jobs, res


@pytest.mark.parametrize("k", [1, 2, 4])
def test_fully_overlapping_communication_matches_eq8_with_equal_sharing(k):
    jobs, res = _run(k)
    alone = sjfbco_iteration_time(jobs[0], 2, 1, BW, 3e11, SjfbcoParams())
    assert alone == pytest.approx(2 * 0.5 * 50e6 / BW)  # 2(w-1)/w m / b^e with w = 2
    eq_share = sjfbco_iteration_time(jobs[0], 2, k, BW, 3e11, SjfbcoParams(degradation_alpha=0.0))
    degraded = sjfbco_iteration_time(jobs[0], 2, k, BW, 3e11, SjfbcoParams(degradation_alpha=1.0))
    for r in res.records:
        assert r.iteration_time_s == pytest.approx(eq_share, rel=1e-9)
        assert r.finish_s == pytest.approx(20 * eq_share, rel=1e-9)
    if k > 1:
        assert degraded > eq_share  # f(alpha=1, k) = 2k - 1 > k: eq. 8 predicts more than max-min gives


def test_model_sees_contention_flow_only_when_overlapping():
    # with compute 10x the ring time, two jobs in phase still collide every iteration (same start)
    jobs, res = _run(2, compute_s=0.4)
    model = SjfbcoModel(SjfbcoParams(degradation_alpha=0.0))
    c = Cluster((Server(0, 2, BW, BW), Server(1, 2, BW, BW)), 3e11)
    est = model.iteration_time(jobs[0], Placement(((0, 2),)), c, {1: (jobs[1], Placement(((1, 3),)))})
    assert est == pytest.approx(0.4 + 2 * 0.04)
    for r in res.records:
        assert r.iteration_time_s == pytest.approx(est, rel=1e-9)
