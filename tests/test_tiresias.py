"""Tiresias: 2D-LAS queue demotion and the Gittins-index order, on hand-made examples (one GPU)."""

import numpy as np
import pytest

from raytestbed.core.cluster import Cluster, Server
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.schedulers.base import make_policy
from raytestbed.schedulers.tiresias_gittins import gittins_index
from raytestbed.sim.engine import Simulator

GB = 1e9


def job(jid, arrival, seconds, gpus=1):
    """``seconds`` iterations of 1 s on ``gpus`` GPUs."""
    return Job(jid, arrival, seconds, (Stage(gpus, StageProfile(0.5, 0.5, 0, 0)),), CommPattern.RAR)


def one_gpu(n=1):
    return Cluster((Server(0, n, GB, GB),), 100 * GB)


def finish(res):
    return {r.job.job_id: (r.first_start_s, r.finish_s, r.preemptions) for r in res.records}


def test_demotion_lets_a_new_job_overtake():
    """Thresholds [100 GPU-s]. A (300 s) runs from 0; B (30 s) arrives at 50 into the same first queue
    and waits behind A (first come, first served). At 100 s A has attained 100 GPU-s and drops to the
    second queue: B preempts it, runs 100-130; A resumes and finishes at 130 + 200 = 330 s."""
    res = Simulator(one_gpu(), [job(0, 0.0, 300), job(1, 50.0, 30)],
                    make_policy("tiresias", thresholds_gpu_s=[100.0])).run()
    f = finish(res)
    assert f[1] == pytest.approx((100.0, 130.0, 0))
    assert f[0] == pytest.approx((0.0, 330.0, 1))


def test_attained_service_counts_gpus():
    """On 2 GPUs a 2-GPU job attains 2 GPU-s per second: with threshold 100 it is demoted at 50 s, and a
    1-GPU job arrived at 10 s (waiting: no GPU left) starts then; the 2-GPU job waits for a free pair."""
    res = Simulator(one_gpu(2), [job(0, 0.0, 200, gpus=2), job(1, 10.0, 30)],
                    make_policy("tiresias", thresholds_gpu_s=[100.0])).run()
    f = finish(res)
    assert f[1][0] == pytest.approx(50.0) and f[1][1] == pytest.approx(80.0)
    assert f[0][2] == 1 and f[0][1] == pytest.approx(80.0 + 150.0)


def test_three_queues_demote_twice():
    """Thresholds [50, 150]: a lone job is demoted twice (at 50 and 150 s) and runs on; a job arriving at
    160 s enters the first queue and preempts it at once."""
    pol = make_policy("tiresias", thresholds_gpu_s=[50.0, 150.0])
    res = Simulator(one_gpu(), [job(0, 0.0, 400), job(1, 160.0, 10)], pol).run()
    f = finish(res)
    assert f[1] == pytest.approx((160.0, 170.0, 0))
    assert f[0] == pytest.approx((0.0, 410.0, 1))
    assert pol.run_stats()["tiresias_demotions"] == 2


def test_gittins_index_hand_computed():
    """Samples 20, 20, 20, 400 GPU-s. At a = 0 with quantum 100: P(S <= 100) = 3/4 and
    E[min(S, 100)] = (3 x 20 + 100) / 4 = 40, index 3/4 / 40 = 0.01875. At a = 30 (quantum 70) only the
    400 s sample is left and it does not end within the quantum: index 0."""
    s = np.array([20.0, 20.0, 20.0, 400.0])
    assert gittins_index(s, 0.0, 100.0) == pytest.approx(0.01875)
    assert gittins_index(s, 30.0, 70.0) == 0.0
    assert gittins_index(s, 500.0, 100.0) == 0.0


def test_gittins_order_overtakes_within_a_queue():
    """Same queue, thresholds [100]: A (300 s) has attained 30 GPU-s when B (20 s) arrives at 30 s. FIFO
    keeps A (B waits until A's demotion at 100 s); the Gittins index of the distribution 20, 20, 20, 400
    ranks B (0.01875) above A (0), so B runs 30-50 and A finishes at 320 s."""
    jobs = [job(0, 0.0, 300), job(1, 30.0, 20)]
    las = finish(Simulator(one_gpu(), jobs, make_policy("tiresias", thresholds_gpu_s=[100.0])).run())
    assert las[1][:2] == pytest.approx((100.0, 120.0))
    g = finish(Simulator(one_gpu(), jobs, make_policy("tiresias-gittins", thresholds_gpu_s=[100.0],
                                                      prior_service_gpu_s=[20.0, 20.0, 20.0, 400.0])).run())
    assert g[1] == pytest.approx((30.0, 50.0, 0))
    assert g[0] == pytest.approx((0.0, 320.0, 1))
