"""GADGET Algorithm 1 and its baselines in the simulator: valid rings within capacity every slot,
budgets never exceeded, elastic resizing, fixed worker counts for the baselines."""

import math
from pathlib import Path

import numpy as np
import pytest

from raytestbed.core.cluster import Cluster, Rack, Server
from raytestbed.core.timing import GadgetModel
from raytestbed.errors import ConfigError
from raytestbed.placement.ring_embedding import Substrate, make_embedding, validate_embeddings
from raytestbed.placement.utility import JobUtility, total_utility
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import load_workload

GB = 1e9 / 8
SLOT = 60.0


def small_cluster():
    racks = (Rack(0, 8 * GB, 8 * GB), Rack(1, 6 * GB, 6 * GB))
    gpus = [4, 2, 1, 2, 4, 2, 1, 2]
    servers = tuple(Server(m, g, 10 * GB, 10 * GB, rack=m % 2, memory_gb=16) for m, g in enumerate(gpus))
    return Cluster(servers, 300e9, racks, name="small")


def jobs_for(cluster, n=40, seed=3, **kw):
    params = dict(jobs=n, slots=10, slot_s=SLOT, **kw)
    return load_workload("gadget", params, cluster, seed, Path("."))


def run(policy_name, cluster, jobs, until_slots=None, **params):
    pol = make_policy(policy_name, "placement", 0, slot_s=SLOT, **params)
    checks = []

    def on_event(ev):  # every event: the running jobs form valid rings within all capacities
        embs = [make_embedding(j, rj.placement.gpus_per_server(cluster), cluster, rj.job.extra["b_bps"],
                               rj.job.extra["mem_gb"]) for j, rj in sim.state.running.items()]
        validate_embeddings(embs, Substrate.full(cluster))
        checks.append(len(embs))

    sim = Simulator(cluster, jobs, pol, model=GadgetModel(), on_event=on_event,
                    until_s=None if until_slots is None else until_slots * SLOT)
    res = sim.run()
    return pol, res, checks


def test_gadget_rings_valid_budget_kept_and_elastic():
    c = small_cluster()
    jobs = jobs_for(c)
    pol, res, checks = run("gadget", c, jobs, tie_break=1e-6)
    assert sum(checks) > 0
    assert all(not math.isnan(r.finish_s) for r in res.records)  # everyone finishes
    by_job: dict[int, list[int]] = {}
    for _, _, jid, w in pol.allocations:
        by_job.setdefault(jid, []).append(w)
    for j in jobs:
        budget = j.extra["F"] / j.extra["zeta"]
        alloc = by_job.get(j.job_id, [])
        assert sum(alloc) <= math.ceil(budget - 1e-9) + 1e-9  # (11): never more worker-slots than the budget
        assert all(1 <= w <= j.extra["N"] for w in alloc)
        assert res.iterations_done[j.job_id] <= j.extra["F"] + 1e-6
        assert pol.served[j.job_id] == pytest.approx(sum(alloc))
    assert any(len(set(a)) > 1 for a in by_job.values())  # elastic: some job ran with several sizes
    assert sum(r.preemptions for r in res.records) > 0  # preemptive


def test_gadget_utilities_and_modes_run():
    c = small_cluster()
    jobs = jobs_for(c, n=12, seed=5)
    for util in ("sqrt", "log", "energy"):
        pol, res, _ = run("gadget", c, jobs, utility=util, until_slots=6)
        assert pol.allocations
    pol, res, _ = run("gadget", c, jobs_for(c, n=8, seed=6), mode="exact", until_slots=4)
    assert all(e["embedded"] >= 0 for e in pol.slot_log)


@pytest.mark.parametrize("name", ["fifo-ring", "drf", "las"])
def test_baselines_fixed_workers_and_valid_rings(name):
    c = small_cluster()
    jobs = jobs_for(c, n=30, seed=4)
    pol, res, checks = run(name, c, jobs)
    assert sum(checks) > 0
    want = {j.job_id: (j.extra["N"] if name == "drf" else j.extra["fixed_workers"]) for j in jobs}
    for _, _, jid, w in pol.allocations:
        assert w == want[jid]
    pre = sum(r.preemptions for r in res.records)
    assert (pre > 0) if name == "las" else (pre == 0)


def test_fifo_ring_starts_in_arrival_order():
    c = small_cluster()
    jobs = jobs_for(c, n=30, seed=4)
    pol, res, _ = run("fifo-ring", c, jobs)
    starts = sorted((r.first_start_s, r.job.arrival_s) for r in res.records)
    arrivals = [a for _, a in starts]
    assert arrivals == sorted(arrivals)


def test_gadget_utility_above_fifo_on_a_tight_cluster():
    """With a tight cluster, GADGET's utility beats FIFO's (the paper's Fig. 4 direction)."""
    c = small_cluster()
    jobs = jobs_for(c, n=40, seed=8)
    got = {}
    for name, kw in (("gadget", {"tie_break": 1e-6}), ("fifo-ring", {})):
        pol, res, _ = run(name, c, jobs, until_slots=10, **kw)
        got[name] = total_utility(jobs, res.iterations_done)
    assert got["gadget"] > got["fifo-ring"]


def test_utility_increments_and_errors():
    u = JobUtility("sigmoid", zeta=100, budget=1000, lambda1=10, lambda2=0.01, lambda3=500)
    pi = u.slot_gains(0, 4)
    assert u.slot_ring_sizes(0, 99) == 10 and u.slot_ring_sizes(9.5, 99) == 1 and u.slot_ring_sizes(0, 4) == 4
    assert all(b >= a for a, b in zip(pi, pi[1:])) and pi[0] > 0
    assert u.mu(1000) <= 10
    with pytest.raises(ValueError):
        JobUtility("cubic", 1, 1)
    with pytest.raises(ConfigError):
        jobs_for(small_cluster(), budget_mode="weird")


def test_sigmoid_envelope_is_concave_majorant():
    u = JobUtility("sigmoid", zeta=100, budget=3000, lambda1=50, lambda2=0.5, lambda3=1500)
    x = np.linspace(0, 3000, 3001)
    env, mu = u.mu_envelope(x), u.mu(x)
    assert (env >= mu - 1e-9).all()
    assert (np.diff(env, 2) <= 1e-9).all()  # concave
    assert env[-1] == pytest.approx(mu[-1])
    # far below lambda3 the raw pi is ~0 but the envelope's is positive
    assert u.slot_gains(0, 2)[0] < 1e-100
    assert u.slot_gains(0, 2, envelope=True)[0] > 0.1
    assert u.mu_envelope(200.0) - u.mu_envelope(100.0) > 0.1
