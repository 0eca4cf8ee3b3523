"""Tests for Parrot's single-coflow optimum O3 (raytestbed.core.o3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from raytestbed.core.o3 import o3_cct, o3_gamma, o3_rates


def arrays(flows):
    """(src, dst, bytes) arrays of ``(src, dst, bytes)`` tuples of integer servers."""
    return (np.array([f[0] for f in flows], dtype=np.int64), np.array([f[1] for f in flows], dtype=np.int64),
            np.array([f[2] for f in flows], dtype=float))


def test_hand_example() -> None:
    # Server 0 sends 3 B to 1 and 2 B to 2; server 1 sends 1 B to 2; 4 B stay on server 2.
    # Egress 1 B/s each: loads 5, 1. Ingress: server 1 gets 3 at 1 B/s, server 2 gets 3 at 2 B/s.
    flows = [(0, 1, 3.0), (0, 2, 2.0), (1, 2, 1.0), (2, 2, 4.0), (1, 0, 0.0)]
    egress = {0: 1.0, 1: 1.0, 2: 1.0}
    ingress = {0: 1.0, 1: 1.0, 2: 2.0}
    eg, ig = np.array(list(egress.values())), np.array(list(ingress.values()))
    assert o3_gamma(*arrays(flows), eg, ig).tolist() == [5.0]  # server 0's egress: (3 + 2) / 1
    assert o3_cct(iter(flows), egress, ingress) == 5.0
    assert o3_rates(*arrays(flows), eg, ig).tolist() == [0.6, 0.4, 0.2, math.inf, 0.0]
    # two coflows at once: the second is the first's flows on server 0's egress only
    cf = np.array([0, 0, 0, 0, 0, 1, 1])
    src, dst, v = arrays(flows + [(0, 1, 3.0), (0, 2, 2.0)])
    assert o3_gamma(src, dst, v, eg, ig, cf, 2).tolist() == [5.0, 5.0]


def test_ingress_bound_and_empty() -> None:
    flows = [(0, 2, 4.0), (1, 2, 4.0)]
    assert o3_cct(flows, {0: 8.0, 1: 8.0}, {2: 2.0}) == 4.0  # 8 B into a 2 B/s port
    assert o3_cct([], {}, {}) == 0.0
    assert o3_cct([(0, 0, 7.0)], {0: 1.0}, {0: 1.0}) == 0.0
    assert o3_rates(*arrays([(0, 0, 7.0)]), np.ones(1), np.ones(1)).tolist() == [math.inf]
    assert o3_rates(*arrays([(0, 0, 7.0)]), np.ones(1), np.ones(1), intra_rate=3.0).tolist() == [3.0]


def test_validation() -> None:
    with pytest.raises(ValueError, match="'x'"):
        o3_cct([("x", 1, 1.0)], {0: 1.0}, {1: 1.0})
    with pytest.raises(ValueError, match="'y'"):
        o3_cct([(0, "y", 1.0)], {0: 1.0}, {1: 1.0})
    with pytest.raises(ValueError, match="bytes"):
        o3_cct([(0, 1, -1.0)], {0: 1.0}, {1: 1.0})
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="capacity"):
            o3_cct([(0, 1, 1.0)], {0: bad}, {1: 1.0})
        with pytest.raises(ValueError, match="capacity"):
            o3_cct([(0, 1, 1.0)], {0: 1.0}, {1: bad})


def lp_cct(flows, egress, ingress) -> float:
    """Solve O3 with HiGHS: variables (b_1..b_n, x = 1/Gamma), maximise x s.t.
    b_k - V_k x = 0, sum of b over each egress / ingress port <= its capacity."""
    net = [(s, d, v) for s, d, v in flows if s != d]
    n = len(net)
    c = np.zeros(n + 1)
    c[-1] = -1.0
    a_eq = np.zeros((n, n + 1))
    for k, (_, _, v) in enumerate(net):
        a_eq[k, k], a_eq[k, -1] = 1.0, -v
    rows, rhs = [], []
    for ports, cap, side in ((egress, egress, 0), (ingress, ingress, 1)):
        for p in ports:
            row = np.zeros(n + 1)
            for k, f in enumerate(net):
                if f[side] == p:
                    row[k] = 1.0
            rows.append(row)
            rhs.append(cap[p])
    res = linprog(c, A_ub=np.array(rows), b_ub=rhs, A_eq=a_eq, b_eq=np.zeros(n),
                  bounds=[(0, None)] * (n + 1), method="highs")
    assert res.status == 0
    return 1.0 / res.x[-1]


def test_closed_form_matches_lp() -> None:
    rng = np.random.default_rng(42)
    for _ in range(20):
        n_servers = int(rng.integers(2, 7))
        egress = {s: float(rng.uniform(1e9, 1.25e10)) for s in range(n_servers)}
        ingress = {s: float(rng.uniform(1e9, 1.25e10)) for s in range(n_servers)}
        flows = [(int(rng.integers(n_servers)), int(rng.integers(n_servers)), float(rng.uniform(1e6, 1e9)))
                 for _ in range(int(rng.integers(1, 15)))]
        flows.append((0, 1, float(rng.uniform(1e6, 1e9))))  # at least one fabric flow
        eg, ig = np.array(list(egress.values())), np.array(list(ingress.values()))
        gamma = float(o3_gamma(*arrays(flows), eg, ig)[0])
        rates = o3_rates(*arrays(flows), eg, ig).tolist()
        assert o3_cct(flows, egress, ingress) == pytest.approx(gamma, rel=1e-12)
        assert gamma == pytest.approx(lp_cct(flows, egress, ingress), rel=1e-9)
        sent = dict.fromkeys(egress, 0.0)
        got = dict.fromkeys(ingress, 0.0)
        for (s, d, v), b in zip(flows, rates):
            if s == d:
                assert b == math.inf
                continue
            assert v / b == pytest.approx(gamma, rel=1e-12)  # all finish together
            sent[s] += b
            got[d] += b
        usage = [sent[s] / egress[s] for s in egress] + [got[d] / ingress[d] for d in ingress]
        assert max(usage) == pytest.approx(1.0, rel=1e-12)  # some port saturated
        assert all(u <= 1.0 + 1e-12 for u in usage)  # none over capacity
