"""Optimal placement ILP (HiGHS) against exhaustive enumeration of A-SRPT eq. (7)."""

import random

import pytest

from raytestbed.core.job import Job, Stage, StageProfile
from raytestbed.core.timing import contiguous_mapper
from raytestbed.placement.ilp import (
    brute_force_placement,
    enumerate_placements,
    make_ilp_mapper,
    placement_alpha,
    solve_placement_ilp,
)

B_INTER, B_INTRA = 1.25e9, 3e11


def test_spec_job_two_servers(spec_job, spec_bw):
    g, bi, bx = spec_bw
    res = solve_placement_ilp(spec_job, [2, 2], g, bi, bx)
    # asrpt.md §3.1: (2,0)/(0,2) gives 55.933 ms, (1,1)/(1,1) gives 362.813 ms -> optimum is the former
    assert res.alpha_s * 1e3 == pytest.approx(55.933, abs=1e-3)
    assert sorted(map(tuple, res.counts)) == [(0, 2), (2, 0)]
    assert res.objective_s == pytest.approx(res.alpha_s, rel=1e-6)
    one = solve_placement_ilp(spec_job, [4], g, bi, bx)
    assert one.alpha_s * 1e3 == pytest.approx(30.360, abs=1e-3)


def _random_job(rng: random.Random, jid: int) -> Job:
    S = rng.randint(1, 4)
    stages = []
    for s in range(S):
        out = rng.choice([0.0, 1e6, 1e7, 5e7]) if s < S - 1 else 0.0
        stages.append(Stage(rng.randint(1, 3), StageProfile(rng.uniform(0, 0.05), rng.uniform(0, 0.05), out,
                                                            rng.choice([0.0, 1e6, 5e7, 3e8]))))
    return Job(jid, 0.0, 1, tuple(stages))


def test_ilp_equals_brute_force_optimum_and_never_loses():
    rng = random.Random(7)
    for t in range(60):
        job = _random_job(rng, t)
        caps, left = [], job.gpus
        while left:
            c = rng.randint(1, min(4, left))
            caps.append(c)
            left -= c
        exact = rng.random() < 0.6
        if not exact:
            caps.append(rng.randint(1, 4))
        res = solve_placement_ilp(job, caps, 4, B_INTER, B_INTRA, exact=exact)
        best, _, n = brute_force_placement(job, caps, 4, B_INTER, B_INTRA, exact=exact)
        assert n >= 1
        assert res.alpha_s == pytest.approx(best, rel=1e-9, abs=1e-12)
        for counts in enumerate_placements(job, caps, exact):
            assert res.alpha_s <= placement_alpha(job, counts, 4, B_INTER, B_INTRA) * (1 + 1e-9)
        # the ILP's own counts respect the capacities and place every replica
        assert all(sum(x) <= c for x, c in zip(res.counts, caps))
        assert [sum(x[s] for x in res.counts) for s in range(job.num_stages)] == list(job.replicas())


def test_ilp_mapper_beats_or_ties_contiguous():
    rng = random.Random(3)
    mapper = make_ilp_mapper(4, B_INTER, B_INTRA)
    for t in range(20):
        job = _random_job(rng, t)
        caps = [min(4, job.gpus - 4 * i) for i in range((job.gpus + 3) // 4)]
        a_ilp = placement_alpha(job, mapper(job, caps), 4, B_INTER, B_INTRA)
        a_con = placement_alpha(job, contiguous_mapper(job, caps), 4, B_INTER, B_INTRA)
        assert a_ilp <= a_con * (1 + 1e-9)


def test_ilp_rejects_mismatched_capacities(spec_job, spec_bw):
    g, bi, bx = spec_bw
    with pytest.raises(ValueError, match="exact placement needs"):
        solve_placement_ilp(spec_job, [2, 1], g, bi, bx)
    with pytest.raises(ValueError, match="needs 4"):
        solve_placement_ilp(spec_job, [2, 1], g, bi, bx, exact=False)
