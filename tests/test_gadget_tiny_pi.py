"""GADGET's per-slot objective (10) in exact arithmetic: pi far below float resolution still orders jobs.

With the experiments' sigmoid (lambda2 in (0, 1)) the gain of a job far from lambda3 is e^-100 .. e^-2000,
0 in float64; the exact optimum of (10) still gives such jobs the GPUs nobody else can use (the
sigmoid is strictly increasing). These tests pin the log-space gain, the fill order and the policy's
behaviour with ``tiny_pi: order`` (default) vs ``drop`` (the float64 reading)."""

import math
from pathlib import Path

import numpy as np
import pytest

from raytestbed.core.cluster import Cluster, Rack, Server
from raytestbed.core.timing import GadgetModel
from raytestbed.placement.gvne import SlotJob, fill_by_log_pi
from raytestbed.placement.ring_embedding import Substrate, validate_embeddings
from raytestbed.placement.utility import JobUtility, total_utility
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import load_workload

GB = 1e9 / 8
SLOT = 60.0


def test_log_gain_matches_float_and_stays_finite_below_underflow():
    u = JobUtility("sigmoid", zeta=100, budget=3000, lambda1=50, lambda2=0.5, lambda3=1500)
    for x0, x1 in [(1400, 1500), (1450, 1550), (100, 300), (1000, 1200), (1480, 1490)]:
        want = math.log(u.mu(x1) - u.mu(x0))
        assert u.log_gain(x0, x1) == pytest.approx(want, rel=1e-9)
    # float64 gives 0 here; the exact gain is lambda1 e^{-lambda2 (lambda3 - x1)} (1 - e^{-lambda2 (x1 - x0)})
    for x0, x1 in [(0, 100), (0, 50)]:
        assert u.mu(x1) - u.mu(x0) == 0.0 or u.mu(x1) - u.mu(x0) < 1e-300
        want = math.log(50) - 0.5 * (1500 - x1) + math.log1p(-math.exp(-0.5 * (x1 - x0)))
        assert u.log_gain(x0, x1) == pytest.approx(want, rel=1e-9)
    # past lambda3 (saturated): 1 - 1 in float64, exact gain e^{-lambda2 (x0 - lambda3)} (1 - e^{...})
    want = math.log(50) - 0.5 * (3000 - 1500) + math.log1p(-math.exp(-0.5 * 100))
    assert u.mu(3100) - u.mu(3000) == 0.0
    assert u.log_gain(3000, 3100) == pytest.approx(want, rel=1e-9)
    assert u.log_gain(500, 500) == -math.inf
    assert np.all(np.diff(u.log_gain(0.0, np.array([100.0, 200.0, 300.0]))) > 0)  # larger ring, larger gain


def _cluster():
    racks = (Rack(0, 10 * GB, 10 * GB), Rack(1, 10 * GB, 10 * GB))
    servers = tuple(Server(m, 2, 10 * GB, 10 * GB, rack=m // 2, memory_gb=64) for m in range(4))
    return Cluster(servers, 300e9, racks)


def test_fill_by_log_pi_orders_by_exact_gain_and_keeps_capacity():
    c = _cluster()
    sub = Substrate.full(c)
    # 8 GPUs; jobs want 4 each; the one with the largest log pi must be served first
    jobs = [SlotJob(i, (0.0,) * 4, 1 * GB, 1.0, tuple(lp + np.log(k) for k in range(1, 5)))
            for i, lp in enumerate([-900.0, -200.0, -700.0, -50.0])]
    out = fill_by_log_pi({}, jobs, sub)
    validate_embeddings(out.values(), sub)
    assert set(out) == {3, 1}
    assert all(e.workers == 4 for e in out.values())
    # jobs without log pi (or only -inf) are never added
    none = [SlotJob(9, (0.0,), 0.0, 0.0), SlotJob(8, (0.0,), 0.0, 0.0, (-math.inf,))]
    assert fill_by_log_pi({}, none, sub) == {}


def _far_jobs(cluster, n=12):
    # N_i * zeta_i = at most 100 iterations per slot, lambda3 = 2000 and lambda2 >= 0.9: pi = e^-1700 or less
    params = dict(jobs=n, slots=4, slot_s=SLOT, zeta=(50, 50), max_workers=(1, 2), lambda3=(2000, 2000),
                  lambda2=(0.9, 1.0), budget=(2500, 2500))
    return load_workload("gadget", params, cluster, 7, Path("."))


def _run(cluster, jobs, slots, **kw):
    pol = make_policy("gadget", "placement", 0, slot_s=SLOT, **kw)
    res = Simulator(cluster, jobs, pol, model=GadgetModel(), until_s=slots * SLOT).run()
    return pol, res


def test_gadget_serves_underflowing_jobs_only_with_exact_order():
    c = _cluster()
    jobs = _far_jobs(c)
    pol_drop, res_drop = _run(c, jobs, 30, tiny_pi="drop")
    assert not pol_drop.allocations  # float64 reading: every pi is 0, the cluster stays idle
    pol, res = _run(c, jobs, 30)
    assert pol.allocations
    busy = [sum(w for s, _, _, w in pol.allocations if s == k) for k in range(pol.slot)]
    assert max(busy) == c.total_gpus  # work conserving once jobs have arrived
    assert total_utility(jobs, res.iterations_done) > total_utility(jobs, res_drop.iterations_done)
    # z_{i,t} and the simulator agree: progress = min(F_i, zeta_i * worker-slots of the slots that ran
    # before the horizon; the Tick at t = T itself decides a slot that is never run), budgets kept
    for j in jobs:
        z = sum(w for _, t, jid, w in pol.allocations if jid == j.job_id and t < 30 * SLOT - 1e-9)
        want = min(j.extra["F"], j.extra["zeta"] * z)
        assert res.iterations_done[j.job_id] == pytest.approx(want, rel=1e-6, abs=1e-6)
        assert res.iterations_done[j.job_id] <= j.extra["F"] + 1e-6


def _slot_job(jid: int, u: JobUtility, z: float, q: int) -> SlotJob:
    """A SlotJob as GadgetPolicy.slot_jobs builds it for a tiny-pi job (progress x = zeta z, capped at F)."""
    x = u.zeta * z
    x1 = np.minimum(x + u.zeta * np.arange(1, q + 1), u.budget)
    pi = tuple(float(max(p, 0.0)) for p in np.asarray(u.mu(x1)) - u.mu(x))
    return SlotJob(jid, pi, 0.0, 0.0, tuple(float(v) for v in u.log_gain(x, x1)))


def test_exact_pi_feeds_a_saturated_job_before_a_job_that_crosses_next_slot():
    """The myopic per-slot objective (10) (docs/results.md, "Diagnoses", GADGET).

    Job 0 is 300 iterations past lambda3 (mu = lambda1 (1 - e^-60)): 4 more workers gain
    ~e^-60. Job 1 is 800 iterations short of lambda3 with zeta N = 400 per slot: with the 4 GPUs
    now and next slot it reaches lambda3 (gain lambda1 / 2), but its gain within *this* slot is
    ~e^-76. Both pi are below pi_tol (GADGET's leftover fill); the exact optimum of (10) gives the
    GPUs to job 0, whose remaining utility is < 1e-24 — the loss mechanism behind GADGET < LAS at
    high load.
    """
    sat = JobUtility("sigmoid", zeta=100, budget=6000, lambda1=50, lambda2=0.2, lambda3=1000)
    far = JobUtility("sigmoid", zeta=100, budget=6000, lambda1=50, lambda2=0.2, lambda3=1000)
    jobs = [_slot_job(0, sat, 13.0, 4), _slot_job(1, far, 2.0, 4)]
    assert max(jobs[0].pi) < 1e-6 and max(jobs[1].pi) < 1e-6  # both only in the leftover fill
    assert max(jobs[0].log_pi) > max(jobs[1].log_pi)
    racks = (Rack(0, 10 * GB, 10 * GB),)
    sub = Substrate.full(Cluster((Server(0, 4, 10 * GB, 10 * GB, rack=0, memory_gb=64),), 300e9, racks))
    out = fill_by_log_pi({}, jobs, sub)
    assert set(out) == {0} and out[0].workers == 4
    # what the 4 GPUs were worth to job 1 over two slots vs to job 0 in this one
    assert far.mu(far.zeta * (2.0 + 8)) - far.mu(far.zeta * 2.0) > 0.49 * far.lambda1
    assert sat.mu(sat.zeta * (13.0 + 4)) - sat.mu(sat.zeta * 13.0) < 1e-24
