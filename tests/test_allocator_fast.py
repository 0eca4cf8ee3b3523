"""The dense fast path of max_min_rates gives the same rates as the segmented reference."""

from __future__ import annotations

import numpy as np
import pytest

from raytestbed.network.allocator import max_min_rates


def random_instance(rng, k: int, with_caps: bool, idle_flows: bool):
    n_links = int(rng.integers(k + 1, 40))
    n_flows = int(rng.integers(1, 300))
    fl, li = [], []
    has = np.ones(n_flows, dtype=bool)
    if idle_flows:
        has[rng.random(n_flows) < 0.1] = False
    for f in range(n_flows):
        if has[f]:
            fl += [f] * k
            li += list(rng.choice(n_links, size=k, replace=False))
    weight = rng.uniform(0.1, 10, n_flows) * (rng.random(n_flows) < 0.5) + 1.0
    cap = np.where(rng.random(n_flows) < 0.3, rng.uniform(1e6, 1e9, n_flows), np.inf) if with_caps \
        else np.full(n_flows, np.inf)
    cap[~has] = rng.uniform(1e6, 1e9, int((~has).sum()))
    capacity = rng.uniform(1e8, 1e10, n_links)
    capacity[rng.random(n_links) < 0.3] = 1e9  # ties between links
    return np.array(fl, dtype=np.intp), np.array(li, dtype=np.intp), weight, cap, capacity


@pytest.mark.parametrize("k", [1, 2, 4])
def test_dense_fast_path_equals_reference(k):
    rng = np.random.default_rng(k)
    for trial in range(60):
        inst = random_instance(rng, k, with_caps=trial % 2 == 1, idle_flows=trial % 3 == 0)
        if inst[0].size == 0:
            continue
        fast = max_min_rates(*inst, fast=True)
        ref = max_min_rates(*inst, fast=False)
        assert np.array_equal(fast, ref), trial


def test_mixed_link_counts_fall_back():
    inc_flow = np.array([0, 0, 1], dtype=np.intp)
    inc_link = np.array([0, 1, 1], dtype=np.intp)
    r = max_min_rates(inc_flow, inc_link, np.ones(2), np.full(2, np.inf), np.array([1.0, 2.0]))
    assert r == pytest.approx([1.0, 1.0])


def test_uniform_instances_take_the_dense_path(monkeypatch):
    import raytestbed.network.allocator as al

    def slow(*args):
        raise AssertionError("segmented path used")

    monkeypatch.setattr(al, "_progressive_filling", slow)
    inst = random_instance(np.random.default_rng(0), 2, with_caps=False, idle_flows=False)
    assert max_min_rates(*inst).sum() > 0
