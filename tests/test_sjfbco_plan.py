"""SJF-BCO planner on hand-made instances (sjfbco.md §4)."""

import numpy as np
import pytest

from conftest import rar_job, small_cluster
from raytestbed.core.cluster import Cluster, Server
from raytestbed.core.timing import SjfbcoParams, sjfbco_contention_count
from raytestbed.placement.sjfbco_plan import (
    SjfbcoPlanner,
    fa_ffp,
    first_fit,
    lbsgf,
    list_scheduling,
)
from raytestbed.placement.sjfbco_trial import ContentionTrial, PlanContext

PARAMS = SjfbcoParams(xi1=1.0, xi2_s=1e-3, degradation_alpha=1.0)


def _servers(ctx, gpus):
    return sorted({int(ctx.gpu_server[g]) for g in gpus})


def test_fa_ffp_packs_onto_already_used_server():
    c = small_cluster(servers=3, gpus=4)
    ctx = PlanContext(c, PARAMS)
    tr = ContentionTrial(ctx)
    tr.start(rar_job(1, workers=1), np.array([5]), 10.0)  # one GPU busy on server 1
    job = rar_job(2, workers=2)
    picked = fa_ffp(tr, job, 10.0, 100.0)
    assert _servers(ctx, picked) == [1]  # packed next to the running job, not on empty server 0
    assert 5 not in picked
    # LS and FF, with the same loads, open server 0
    assert _servers(ctx, list_scheduling(tr, job, 10.0, 100.0)) == [0]
    assert _servers(ctx, first_fit(tr, job, 10.0, 100.0)) == [0]


def test_fa_ffp_best_fit_among_used_servers_and_budget():
    c = small_cluster(servers=3, gpus=4)
    ctx = PlanContext(c, PARAMS)
    tr = ContentionTrial(ctx)
    tr.start(rar_job(1, workers=1), np.array([0]), 10.0)       # server 0: 3 free
    tr.start(rar_job(2, workers=2), np.array([4, 5]), 10.0)    # server 1: 2 free
    picked = fa_ffp(tr, rar_job(3, workers=2), 10.0, 100.0)
    assert _servers(ctx, picked) == [1]  # fewest free GPUs first
    # a budget below U + rho excludes loaded GPUs; U=0 GPUs remain
    tr.U[[1, 2, 3, 6, 7]] = 95.0
    picked = fa_ffp(tr, rar_job(4, workers=2), 10.0, 100.0)
    assert _servers(ctx, picked) == [2]
    assert fa_ffp(tr, rar_job(5, workers=8), 10.0, 100.0) is None


def test_lbsgf_spreads_only_within_lambda_selected_servers():
    c = small_cluster(servers=3, gpus=4)
    ctx = PlanContext(c, PARAMS)
    tr = ContentionTrial(ctx)
    tr.U[:] = [1, 1, 1, 1, 0, 0, 3, 3, 4, 4, 4, 4]  # average loads 1, 1.5, 4
    job = rar_job(1, workers=4)
    one = lbsgf(tr, job, 10.0, 100.0, lam=1.0)
    assert _servers(ctx, one) == [0]  # least-busy server alone holds lambda*G = 4 GPUs
    two = lbsgf(tr, job, 10.0, 100.0, lam=2.0)
    assert _servers(ctx, two) == [0, 1]  # least-U GPUs among the two least-busy servers
    assert sorted(two.tolist()) == [0, 1, 4, 5]
    assert 2 not in _servers(ctx, lbsgf(tr, job, 10.0, 100.0, lam=8 / 4))
    # lambda large enough to include every server: takes the least-U GPUs anywhere, never beyond budget
    tr.U[4:6] = 95.0
    wide = lbsgf(tr, job, 10.0, 100.0, lam=3.0)
    assert set(wide.tolist()) == {0, 1, 2, 3}


def test_lbsgf_waits_instead_of_leaving_its_servers():
    c = small_cluster(servers=2, gpus=4)
    ctx = PlanContext(c, PARAMS)
    tr = ContentionTrial(ctx)
    tr.start(rar_job(1, workers=1, iterations=100), np.array([0]), 1.0)
    tr.U[:] = 0.0  # both servers equally idle: server 0 is selected (ties by id) but has 3 free GPUs
    assert lbsgf(tr, rar_job(2, workers=4), 1.0, 100.0, lam=1.0) is None


def _brute_force_min_feasible(planner, run):
    for theta in range(1, int(planner.horizon) + 1):
        res = run(theta)
        if res.feasible and res.makespan < planner.horizon:
            return theta
    return None


@pytest.mark.parametrize("rule", ["ff", "ls"])
def test_bisection_returns_tightest_feasible_budget(rule):
    # one 2-GPU server, three 1-GPU jobs of 10 s: the third must reuse a GPU -> budget >= 20
    c = small_cluster(servers=1, gpus=2)
    jobs = [rar_job(i, workers=1, iterations=1000, fwd=0.0, bwd=0.01, grad_bytes=0) for i in range(3)]
    pl = SjfbcoPlanner(c, jobs, SjfbcoParams(), horizon_s=100)
    sel = {"ff": first_fit, "ls": list_scheduling}[rule]
    plan = pl.plan(rule)
    assert plan.feasible
    assert plan.makespan == pytest.approx(20.0)
    assert plan.theta == _brute_force_min_feasible(pl, lambda th: pl.trial(th, lambda j: sel)) == 20
    # the printed strict rule moves up on equal makespans and misses the tightest budget
    listing = SjfbcoPlanner(c, jobs, SjfbcoParams(), horizon_s=100, bisection="listing").plan(rule)
    assert listing.makespan == pytest.approx(20.0) and listing.theta > 20


def test_sjfbco_bisection_tightest_on_mixed_instance():
    c = Cluster((Server(0, 4, 1.25e9, 1.25e9), Server(1, 2, 1.25e9, 1.25e9)), 3e11)
    jobs = [rar_job(0, workers=1, iterations=1500, fwd=0.0, bwd=0.01, grad_bytes=1e6),
            rar_job(1, workers=2, iterations=1000, fwd=0.0, bwd=0.02, grad_bytes=1e6),
            rar_job(2, workers=4, iterations=800, fwd=0.0, bwd=0.01, grad_bytes=1e6),
            rar_job(3, workers=2, iterations=700, fwd=0.0, bwd=0.01, grad_bytes=1e6)]
    pl = SjfbcoPlanner(c, jobs, SjfbcoParams(xi2_s=1e-4), horizon_s=200)
    plan = pl.plan("sjf-bco")
    assert plan.feasible and set(plan.order) == {0, 1, 2, 3}

    def best(theta):
        rs = [pl.sjfbco_trial(theta, k) for k in (1, 2, 4)]
        ok = [r for r in rs if r.feasible and r.makespan < pl.horizon]
        return min(ok, key=lambda r: r.makespan) if ok else rs[0]

    tight = _brute_force_min_feasible(pl, best)
    # the makespan never gets worse as the budget grows here, so the tightest feasible budget wins
    ms = [best(t).makespan for t in range(tight, 201)]
    assert all(a >= b - 1e-9 for a, b in zip(ms, ms[1:]))
    assert plan.theta == tight
    assert plan.makespan == pytest.approx(best(tight).makespan)


def test_smallest_job_first_order_and_gang_start():
    c = small_cluster(servers=2, gpus=4)
    jobs = [rar_job(0, workers=4, iterations=100), rar_job(1, workers=1, iterations=100),
            rar_job(2, workers=2, iterations=100)]
    plan = SjfbcoPlanner(c, jobs, PARAMS, horizon_s=1000).plan("sjf-bco")
    assert plan.order == [1, 2, 0]
    starts = [plan.starts[j] for j in plan.order]
    assert starts == sorted(starts)
    for jid, gpus in plan.gpus.items():
        assert len(gpus) == next(j.gpus for j in jobs if j.job_id == jid)


def test_contention_count_only_split_jobs_sharing_a_server():
    c = small_cluster(servers=3, gpus=4)
    ctx = PlanContext(c, PARAMS)
    tr = ContentionTrial(ctx)
    a, b, d, e = (rar_job(1, workers=4), rar_job(2, workers=1), rar_job(3, workers=2),
                  rar_job(4, workers=2))
    tr.start(a, np.array([0, 1, 4, 5]), 1.0)   # split over servers 0, 1
    tr.start(b, np.array([6]), 1.0)            # whole on server 1: shares the server, not the link
    assert tr.jobs[1].tau == pytest.approx(ctx.tau(a, 2, 1))
    tr.start(d, np.array([7, 8]), 1.0)         # split over servers 1, 2
    assert tr.jobs[1].tau == pytest.approx(ctx.tau(a, 2, 2))
    tr.start(e, np.array([2, 3]), 1.0)         # whole on server 0: no contention added
    assert tr.jobs[1].tau == pytest.approx(ctx.tau(a, 2, 2))
    assert tr.jobs[2].tau == pytest.approx(ctx.tau(b, 1, 0))
    assert tr.jobs[4].tau == pytest.approx(ctx.tau(e, 1, 0))
    assert ctx.tau(a, 2, 2) > ctx.tau(a, 2, 1)


def test_incremental_contention_matches_core_eq6_on_random_placements():
    rng = np.random.default_rng(3)
    c = small_cluster(servers=5, gpus=4)
    ctx = PlanContext(c, PARAMS)
    for _ in range(20):
        tr = ContentionTrial(ctx)
        perm = rng.permutation(c.total_gpus)
        i = 0
        jobs = {}
        for jid in range(6):
            w = int(rng.integers(1, 4))
            gpus = perm[i : i + w]
            i += w
            jobs[jid] = (rar_job(jid, workers=w, iterations=10_000), gpus)
            tr.start(jobs[jid][0], gpus, 1.0)
        servers_of = {j: {} for j in jobs}
        for j, (_, gpus) in jobs.items():
            for g in gpus:
                s = int(ctx.gpu_server[g])
                servers_of[j][s] = servers_of[j].get(s, 0) + 1
        gpus_of = {j: job.gpus for j, (job, _) in jobs.items()}
        for j, (job, _) in jobs.items():
            p = sjfbco_contention_count(j, servers_of, gpus_of)
            assert tr.jobs[j].tau == pytest.approx(ctx.tau(job, len(servers_of[j]), p))


def test_trial_progress_under_changing_contention():
    # two split jobs share servers 0 and 1; the shorter one ends first and the other speeds up
    c = small_cluster(servers=2, gpus=4)
    ctx = PlanContext(c, PARAMS)
    tr = ContentionTrial(ctx)
    a = rar_job(1, workers=2, iterations=100)
    b = rar_job(2, workers=2, iterations=300)
    tr.start(a, np.array([0, 4]), 1.0)
    tr.start(b, np.array([1, 5]), 1.0)
    res = tr.finish()
    t_shared = ctx.tau(a, 2, 2)
    assert res.finishes[1] == pytest.approx(100 * t_shared)
    assert res.finishes[2] == pytest.approx(100 * t_shared + 200 * ctx.tau(b, 2, 1))
    assert res.makespan == res.finishes[2]


def test_infeasible_when_budget_too_small_and_rand_uses_horizon():
    c = small_cluster(servers=1, gpus=2)
    jobs = [rar_job(i, workers=1, iterations=1000, fwd=0.0, bwd=0.01, grad_bytes=0) for i in range(3)]
    pl = SjfbcoPlanner(c, jobs, SjfbcoParams(), horizon_s=15)  # needs 20 s
    for rule in ("sjf-bco", "ff", "ls", "rand"):
        plan = pl.plan(rule)
        assert not plan.feasible and plan.makespan == 15
    plan = SjfbcoPlanner(c, jobs, SjfbcoParams(), horizon_s=100, seed=1).plan("rand")
    assert plan.feasible and plan.theta == 100 and plan.makespan == pytest.approx(20.0)
