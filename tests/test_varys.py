"""Varys (SEBF + MADD + backfill) on hand-made coflows whose CCTs are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from raytestbed.core.cluster import Cluster, Server
from raytestbed.core.job import CommPattern, Job, JobTraffic, Stage, StageProfile
from raytestbed.errors import PolicyError
from raytestbed.schedulers.base import make_policy
from raytestbed.schedulers.fifo import FifoPolicy
from raytestbed.sim.engine import Simulator

C = 1e6  # port capacity, bytes/s; sizes below are multiples of C, so times are whole seconds


def cluster(n: int = 3) -> Cluster:
    return Cluster(tuple(Server(i, 2, C, C) for i in range(n)), intra_bps=1e12, name="varys-test")


def job(jid: int, flows, arrival: float = 0.0) -> Job:
    return Job(jid, arrival, 1, (Stage(1, StageProfile(0.0, 0.0)),), CommPattern.RAR,
               traffic=JobTraffic(coflows=(tuple((s, d, b * C) for s, d, b in flows),), compute_s=0.0))


def ccts(netpol, jobs, n: int = 3) -> dict[int, float]:
    res = Simulator(cluster(n), jobs, FifoPolicy(), netpol, mode="flow").run()
    return {r.job.job_id: r.finish_s - r.job.arrival_s for r in res.records}


# A: 0->1 (4), 2->1 (1): Gamma 5 (ingress 1).  B: 0->2 (1): Gamma 1.  C: 1->2 (1), 1->0 (1): Gamma 2 (egress 1).
THREE = [job(0, [(0, 1, 4), (2, 1, 1)]), job(1, [(0, 2, 1)]), job(2, [(1, 2, 1), (1, 0, 1)])]


def test_sebf_madd_backfill_by_hand():
    """t=0, SEBF order B (1), C (2), A (5). MADD: B takes egress 0 and ingress 2 at C; C needs ingress 2
    and A egress 0, both full: nothing. Backfill in SEBF order: C's 1->0 (egress 1, ingress 0 free) at C;
    A's 2->1 (egress 2, ingress 1 free) at C; A's 0->1 and C's 1->2 stay blocked.
    t=1: B, C's 1->0 and A's 2->1 are done; B finishes (CCT 1). Order C (1 left, Gamma 1), A (4 left,
    Gamma 4): C's 1->2 at C, A's 0->1 at C. t=2: C finishes (CCT 2). A has 3 left at C: t=5 (CCT 5)."""
    got = ccts(make_policy("varys", "network"), THREE)
    assert got == pytest.approx({0: 5.0, 1: 1.0, 2: 2.0}, rel=1e-9)


def test_without_backfill_by_hand():
    """No backfill: t=0 only B runs. t=1 order C (Gamma 2), A (Gamma 5): C's two flows share egress 1,
    Gamma_R = 2 -> 1/2 C each; A: egress 0 free, ingress 1
    free -> Gamma_R 5 -> 0->1 at 4/5 C, 2->1 at 1/5 C. t=3: C finishes (CCT 3). Rates stay until then;
    A then has 4 - 1.6 = 2.4 and 1 - 0.4 = 0.6 left, Gamma 3 (ingress 1) -> finishes at t=6."""
    got = ccts(make_policy("varys", "network", backfill=False), THREE)
    assert got == pytest.approx({0: 6.0, 1: 1.0, 2: 3.0}, rel=1e-9)


def test_madd_rates_finish_together():
    """One coflow 0->1 (2), 0->2 (1): Gamma 3 on egress 0; MADD rates 2/3 C and 1/3 C; egress 0 is full,
    so the backfill adds nothing; both flows end at t=3."""
    got = ccts(make_policy("varys", "network"), [job(0, [(0, 1, 2), (0, 2, 1)])])
    assert got == pytest.approx({0: 3.0}, rel=1e-12)


def test_sebf_beats_fair_and_order_total():
    """Fair sharing gives B only half of egress 0 at first, so B's CCT exceeds Varys's 1 s."""
    fair = ccts(make_policy("fair", "network"), THREE)
    assert fair[1] > 1.5
    # ordering by total bytes (fixed at the start) gives the same order here
    got = ccts(make_policy("varys", "network", sebf_bytes="total"), THREE)
    assert got == pytest.approx({0: 5.0, 1: 1.0, 2: 2.0}, rel=1e-9)


def test_bad_parameter():
    with pytest.raises(PolicyError):
        make_policy("varys", "network", sebf_bytes="largest")


def test_ties_broken_by_arrival():
    """Two identical coflows on one port: the earlier arrival goes first (CCT 1), the other waits (2)."""
    jobs = [job(0, [(0, 1, 1)], arrival=0.0), job(1, [(0, 1, 1)], arrival=0.0)]
    got = ccts(make_policy("varys", "network"), jobs)
    assert sorted(got.values()) == pytest.approx([1.0, 2.0])
    assert got[0] == pytest.approx(1.0)
    assert np.isfinite(list(got.values())).all()


# X: 0->1 (1), Gamma 1.  Y: 0->2 (2), 2->3 (2), Gamma 2.  Z: 0->1 (1), 1->3 (3), Gamma 3.
BLOCKED = [job(0, [(0, 1, 1)]), job(1, [(0, 2, 2), (2, 3, 2)]), job(2, [(0, 1, 1), (1, 3, 3)])]


def test_backfill_styles_by_hand():
    """t=0: MADD gives X egress 0; Y and Z need egress 0 and get nothing.
    Greedy backfill in SEBF order: Y's 2->3 takes all of ingress 3, Z's 1->3 gets nothing. t=1 (X done):
    MADD Y at Gamma 2 (0->2 at C, 2->3 at C/2), Z blocked again; backfill lifts 2->3 to C. t=3: Y done;
    Z alone, Gamma 3: 1->3 ends at t=6.
    CoflowSim's style: at t=0 the blocked Y and Z, as one coflow, split ingress 3 (C/2 each); at t=1
    MADD Y (0->2 at C, 2->3 with 1.5 left at 0.75 C), Z's 1->3 gets the 0.25 C left on ingress 3, so at
    t=3 (Y done) it has 2 left: Z's MADD at Gamma 2 plus backfill ends it at t=5."""
    greedy = ccts(make_policy("varys", "network"), BLOCKED, n=4)
    assert greedy == pytest.approx({0: 1.0, 1: 3.0, 2: 6.0}, rel=1e-9)
    cfs = ccts(make_policy("varys", "network", backfill_style="coflowsim"), BLOCKED, n=4)
    assert cfs == pytest.approx({0: 1.0, 1: 3.0, 2: 5.0}, rel=1e-9)
    with pytest.raises(PolicyError):
        make_policy("varys", "network", backfill_style="fair")
