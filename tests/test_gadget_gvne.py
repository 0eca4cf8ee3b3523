"""GADGET ring embedding and per-slot G-VNE (gadget.md §5): rings valid, capacities kept, LP-RS-MDE <= exact."""

import numpy as np
import pytest

from raytestbed.core.cluster import Cluster, Rack, Server
from raytestbed.placement.gvne import (
    SlotJob,
    lp_relaxation,
    solve_exact,
    solve_exact_literal,
    solve_greedy,
    solve_lp_literal,
    solve_lp_rs_mde,
)
from raytestbed.placement.ring_embedding import (
    RingEmbedding,
    Substrate,
    capacity_violations,
    check_ring,
    greedy_ring,
    validate_embeddings,
)

GB = 1e9 / 8  # 1 Gbit/s in bytes/s


def rand_cluster(rng, M=5, R=2):
    racks = tuple(Rack(r, rng.uniform(1, 4) * GB, rng.uniform(1, 4) * GB) for r in range(R))
    servers = tuple(Server(m, int(rng.choice([1, 2, 4])), rng.uniform(1, 4) * GB, rng.uniform(1, 4) * GB,
                           rack=m % R, memory_gb=16) for m in range(M))
    return Cluster(servers, 300e9, racks)


def rand_jobs(rng, n, qmax=4):
    return [SlotJob(i, tuple(np.sort(rng.uniform(0, 10, int(rng.integers(1, qmax + 1))))),
                    rng.uniform(0.5, 3) * GB, float(rng.integers(1, 8))) for i in range(n)]


def two_rack():
    racks = (Rack(0, 10 * GB, 10 * GB), Rack(1, 10 * GB, 10 * GB))
    servers = tuple(Server(m, 2, 10 * GB, 10 * GB, rack=m // 2, memory_gb=64) for m in range(4))
    return Cluster(servers, 300e9, racks)


def test_ring_checks_reject_bad_rings():
    c = two_rack()
    check_ring(RingEmbedding(0, ((0, 2),), GB), c)
    check_ring(RingEmbedding(0, ((0, 1), (1, 2), (3, 1)), GB), c)
    with pytest.raises(ValueError):
        check_ring(RingEmbedding(0, ((0, 1), (0, 1)), GB), c)  # server twice
    with pytest.raises(ValueError):
        check_ring(RingEmbedding(0, ((0, 0),), GB), c)  # no worker


def test_ring_link_use_counts_each_hop_once():
    c = two_rack()
    e = RingEmbedding(0, ((0, 1), (1, 1), (2, 1)), 2 * GB)
    use = e.link_use(c)
    for m in (0, 1, 2):
        assert use[("egress", m)] == 2 * GB and use[("ingress", m)] == 2 * GB
    # servers 0,1 in rack 0, server 2 in rack 1: one crossing each way per rack
    assert use[("rack_up", 0)] == 2 * GB and use[("rack_down", 0)] == 2 * GB
    assert use[("rack_up", 1)] == 2 * GB and use[("rack_down", 1)] == 2 * GB
    sub = Substrate.full(c)
    sub.links[("egress", 1)] = 1 * GB
    assert capacity_violations([e], sub)


def test_greedy_ring_valid_and_within_capacity():
    rng = np.random.default_rng(3)
    for _ in range(30):
        c = rand_cluster(rng, M=8, R=3)
        sub = Substrate.full(c)
        placed = []
        for i in range(12):
            e = greedy_ring(i, int(rng.integers(1, 7)), rng.uniform(0.5, 3) * GB, sub, float(rng.integers(1, 6)))
            if e is not None:
                check_ring(e, c)
                assert sub.fits(e)
                sub.take(e)
                placed.append(e)
        validate_embeddings(placed, Substrate.full(c))


def test_greedy_ring_prefers_one_server_and_respects_bandwidth():
    c = two_rack()
    sub = Substrate.full(c)
    e = greedy_ring(0, 2, 20 * GB, sub)
    assert e is not None and len(e.servers) == 1  # fits on one server: no link needed
    assert greedy_ring(1, 3, 20 * GB, sub) is None  # needs 2 servers but b > NIC
    e = greedy_ring(1, 3, 5 * GB, sub)
    assert e is not None and e.workers == 3 and len({c.servers[m].rack for m in e.server_ids}) == 1


def test_compact_ilp_equals_literal_ilp_and_lp():
    rng = np.random.default_rng(7)
    for _ in range(6):
        c = rand_cluster(rng)
        sub = Substrate.full(c)
        jobs = rand_jobs(rng, 4, qmax=3)
        lit = solve_exact_literal(jobs, sub, time_limit=30)
        comp = solve_exact(jobs, sub)
        assert lit.optimal and comp.optimal
        assert comp.utility == pytest.approx(lit.utility, rel=1e-7, abs=1e-9)
        validate_embeddings(lit.embeddings.values(), sub)
        validate_embeddings(comp.embeddings.values(), sub)
        # the reduced LP relaxation has the value of the literal relaxation
        assert lp_relaxation(jobs, sub)[0] == pytest.approx(solve_lp_literal(jobs, sub), rel=1e-6)


def test_lp_rs_mde_feasible_and_below_exact():
    rng = np.random.default_rng(11)
    below_somewhere = False
    for t in range(12):
        c = rand_cluster(rng, M=6, R=2)
        sub = Substrate.full(c)
        jobs = rand_jobs(rng, 6)
        opt = solve_exact(jobs, sub)
        assert opt.optimal
        for fill in (False, True):
            sol = solve_lp_rs_mde(jobs, sub, np.random.default_rng(t), u_b=20, fill=fill)
            validate_embeddings(sol.embeddings.values(), sub)
            for jid, e in sol.embeddings.items():
                assert 1 <= e.workers <= next(j.q for j in jobs if j.job_id == jid)
            assert sol.utility <= opt.utility + 1e-9
            assert sol.lp_bound >= opt.utility - 1e-6
            below_somewhere |= sol.utility < opt.utility - 1e-6
        g = solve_greedy(jobs, sub)
        validate_embeddings(g.embeddings.values(), sub)
        assert g.utility <= opt.utility + 1e-9
    assert below_somewhere  # the check can fail: rounding is not always optimal


def test_lp_rs_mde_on_partly_used_substrate():
    rng = np.random.default_rng(5)
    c = rand_cluster(rng, M=8, R=3)
    sub = Substrate.full(c)
    pre = greedy_ring(99, 4, 1 * GB, sub)
    sub.take(pre)
    jobs = rand_jobs(rng, 8)
    sol = solve_lp_rs_mde(jobs, sub, np.random.default_rng(0))
    validate_embeddings(sol.embeddings.values(), sub)
    validate_embeddings([pre, *sol.embeddings.values()], Substrate.full(c))


def test_lp_rs_mde_without_fill_keeps_a_third_on_average():
    """Theorem 8: LP-RS-MDE keeps >= 1/3 of the optimum of (12) (in expectation; here averaged)."""
    rng = np.random.default_rng(21)
    ratios = []
    for t in range(10):
        c = rand_cluster(rng, M=6, R=2)
        sub = Substrate.full(c)
        jobs = rand_jobs(rng, 5)
        opt = solve_exact(jobs, sub).utility
        sol = solve_lp_rs_mde(jobs, sub, np.random.default_rng(t), u_b=20, fill=False)
        ratios.append(sol.utility / opt)
    assert np.mean(ratios) >= 1 / 3


def test_augmented_lp_relaxes_the_exact_embedding():
    """With the exact optimum's ring sizes fixed, the augmented LP (Alg. 2 line 4) is a relaxation."""
    from raytestbed.placement.gvne import augmented_lp

    rng = np.random.default_rng(9)
    for _ in range(8):
        c = rand_cluster(rng, M=6, R=2)
        sub = Substrate.full(c)
        jobs = rand_jobs(rng, 5)
        opt = solve_exact(jobs, sub)
        kappa = {jid: e.workers for jid, e in opt.embeddings.items()}
        val, _ = augmented_lp(jobs, kappa, sub)
        assert val >= opt.utility - 1e-6
