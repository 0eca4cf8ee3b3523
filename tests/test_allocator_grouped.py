"""The flow simulator's grouped allocator equals the reference RateAllocator on random instances."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from raytestbed.network.allocator import RateAllocator, grouped_max_min_rates


@st.composite
def instances(draw):
    n_links = draw(st.integers(1, 8))
    caps = draw(st.lists(st.floats(0.5, 100.0), min_size=n_links, max_size=n_links))
    k = draw(st.integers(1, 3))
    n_groups = draw(st.integers(1, 6))
    groups = [draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=k)) for _ in range(n_groups)]
    n_flows = draw(st.integers(1, 25))
    flow_group = draw(st.lists(st.integers(0, n_groups - 1), min_size=n_flows, max_size=n_flows))
    weights = draw(st.lists(st.sampled_from([1.0, 1.0, 0.5, 2.0, 3.7, 10.0]), min_size=n_flows, max_size=n_flows))
    return caps, groups, flow_group, weights


def reference(caps, groups, flow_group, weights):
    alloc = RateAllocator({l: c for l, c in enumerate(caps)})
    for f, (g, w) in enumerate(zip(flow_group, weights)):
        alloc.add_flow(f, groups[g], weight=w)
    r = alloc.rates()
    return np.array([r[f] for f in range(len(flow_group))])


def grouped(caps, groups, flow_group, weights):
    k = max(len(g) for g in groups)
    gl = np.full((len(groups), k), -1, dtype=np.int64)
    for i, g in enumerate(groups):
        gl[i, :len(g)] = g
    return grouped_max_min_rates(np.array(flow_group), np.array(weights), gl, np.array(caps))


@settings(max_examples=300, deadline=None)
@given(instances())
def test_grouped_equals_rate_allocator(inst):
    ref = reference(*inst)
    got = grouped(*inst)
    assert np.allclose(got, ref, rtol=1e-9, atol=1e-9 * max(inst[0]))


def test_max_min_certificate_on_a_large_random_instance():
    """150 ports, 20,000 flows between random server pairs: every flow crosses a saturated link on
    which its rate per unit weight is the largest, and no link is over capacity."""
    rng = np.random.default_rng(3)
    s, n = 150, 20_000
    src = rng.integers(0, s, n)
    dst = (src + rng.integers(1, s, n)) % s
    pair, group = np.unique(src * s + dst, return_inverse=True)
    gl = np.stack([pair // s, s + pair % s], axis=1)
    w = rng.choice([1.0, 2.0, 0.5], n)
    cap = rng.uniform(1.0, 2.0, 2 * s)
    r = grouped_max_min_rates(group, w, gl, cap)
    links = np.stack([src, s + dst], axis=1)
    load = np.bincount(links.ravel(), weights=np.repeat(r, 2), minlength=2 * s)
    assert (load <= cap * (1 + 1e-9)).all()
    sat = load >= cap * (1 - 1e-9)
    lvl = r / w
    top = np.zeros(2 * s)
    np.maximum.at(top, links.ravel(), np.repeat(lvl, 2))
    ok = (sat[links] & (lvl[:, None] >= top[links] * (1 - 1e-9))).any(axis=1)
    assert ok.all()
