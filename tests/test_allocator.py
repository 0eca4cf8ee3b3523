"""Tests for the weighted max-min fair rate allocator (raytestbed.network.allocator)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raytestbed.network.allocator import RateAllocator


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-12, abs=1e-12)


def test_one_link_equal_and_weighted_shares() -> None:
    a = RateAllocator({"L": 10.0})
    a.add_flow("f", ["L"])
    a.add_flow("g", ["L"])
    assert a.rates() == {"f": approx(5.0), "g": approx(5.0)}
    a.set_weights({"f": 3.0, "g": 1.0})
    assert a.rate("f") == approx(7.5)
    assert a.rate("g") == approx(2.5)
    assert a.link_load("L") == approx(10.0)


def three_flow() -> RateAllocator:
    a = RateAllocator({"A": 10.0, "B": 10.0})
    a.add_flow(1, ["A", "B"])
    a.add_flow(2, ["A"])
    a.add_flow(3, ["B"])
    return a


def test_classic_three_flows_and_moving_bottleneck() -> None:
    a = three_flow()
    assert a.rates() == {1: approx(5.0), 2: approx(5.0), 3: approx(5.0)}
    a.set_capacity("B", 4.0)
    assert a.rates() == {1: approx(2.0), 2: approx(8.0), 3: approx(2.0)}
    assert a.link_load("A") == approx(10.0)
    assert a.link_load("B") == approx(4.0)


def test_bottleneck_moves_as_flows_finish() -> None:
    a = three_flow()
    a.set_capacity("B", 4.0)
    a.rates()
    a.remove_flow(3)  # flow 1 now alone on B: B caps it at 4, flow 2 takes the rest of A
    assert a.rates() == {1: approx(4.0), 2: approx(6.0)}
    a.remove_flow(1)
    assert a.rates() == {2: approx(10.0)}
    assert a.link_load("B") == 0.0
    with pytest.raises(KeyError):
        a.remove_flow(1)


def test_per_flow_cap() -> None:
    a = RateAllocator({"L": 10.0})
    a.add_flow("capped", ["L"], cap=2.0)
    a.add_flow("other", ["L"])
    assert a.rates() == {"capped": approx(2.0), "other": approx(8.0)}


def test_flow_without_links_runs_at_cap() -> None:
    a = RateAllocator({"L": 10.0})
    a.add_flow("nvlink", [], cap=300.0)
    a.add_flow("net", ["L"])
    assert a.rates() == {"nvlink": 300.0, "net": approx(10.0)}


def test_duplicate_link_in_flow_counts_once() -> None:
    a = RateAllocator({"L": 10.0})
    a.add_flow("f", ["L", "L"])
    a.add_flow("g", ["L"])
    assert a.rates() == {"f": approx(5.0), "g": approx(5.0)}


def test_caching_and_container_protocol() -> None:
    a = three_flow()
    first = a.rates()
    first[1] = -1.0  # the caller's copy; must not leak into the allocator
    assert a.rates() == {1: approx(5.0), 2: approx(5.0), 3: approx(5.0)}
    assert a.rates() == a.rates()
    assert len(a) == 3 and 2 in a and 4 not in a and a.flows() == [1, 2, 3]
    a.set_weight(2, 4.0)  # A: flow 1 at L, flow 2 at 4L -> 5L = 10 -> L = 2; B gives flow 3 the rest
    assert a.rates() == {1: approx(2.0), 2: approx(8.0), 3: approx(8.0)}
    assert a.capacity("A") == 10.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_invalid_capacity(bad: float) -> None:
    with pytest.raises(ValueError, match="'X'"):
        RateAllocator({"X": bad})
    a = RateAllocator({"X": 1.0})
    with pytest.raises(ValueError, match="'X'"):
        a.set_capacity("X", bad)


def test_invalid_flows_and_links() -> None:
    a = RateAllocator({"L": 10.0})
    a.add_flow("f", ["L"])
    with pytest.raises(ValueError, match="'nope'"):
        a.add_flow("g", ["L", "nope"])
    with pytest.raises(ValueError, match="'nope'"):
        a.set_capacity("nope", 1.0)
    with pytest.raises(ValueError, match="already exists"):
        a.add_flow("f", ["L"])
    with pytest.raises(ValueError, match="already exists"):
        a.add_link("L", 5.0)
    with pytest.raises(ValueError, match="finite cap"):
        a.add_flow("h", [])
    for w in (0.0, -2.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            a.add_flow("h", ["L"], weight=w)
        with pytest.raises(ValueError):
            a.set_weight("f", w)
    for c in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError):
            a.add_flow("h", ["L"], cap=c)
    with pytest.raises(KeyError):
        a.set_weights({"f": 2.0, "ghost": 1.0})
    assert a.rate("f") == approx(10.0)  # failed calls changed nothing
    assert "g" not in a and "h" not in a


FlowSpec = tuple[list[int], float, float]  # (links, weight, cap)


def random_instance(rng: np.random.Generator, n_links: int, n_flows: int) -> tuple[RateAllocator, dict]:
    a = RateAllocator({l: float(rng.uniform(1.0, 100.0)) for l in range(n_links)})
    specs: dict[int, FlowSpec] = {}
    for f in range(n_flows):
        links = rng.choice(n_links, size=int(rng.integers(0, 4)), replace=False).tolist()
        capped = not links or rng.random() < 0.2
        cap = float(rng.uniform(0.5, 30.0)) if capped else math.inf
        weight = float(rng.choice([1.0, 2.0, rng.uniform(0.1, 5.0)]))
        a.add_flow(f, links, weight=weight, cap=cap)
        specs[f] = (links, weight, cap)
    return a, specs


def assert_max_min_certificate(a: RateAllocator, specs: dict[int, FlowSpec]) -> None:
    """No link over capacity; every flow is at its cap or crosses a saturated link
    on which its rate/weight is maximal (the max-min fairness certificate)."""
    rates = a.rates()
    assert set(rates) == set(specs)
    on_link: dict[int, list[int]] = {}
    for f, (links, _, _) in specs.items():
        for l in links:
            on_link.setdefault(l, []).append(f)
    for l, fs in on_link.items():
        load = sum(rates[f] for f in fs)
        assert load <= a.capacity(l) * (1 + 1e-9), f"link {l} over capacity"
    for f, (links, weight, cap) in specs.items():
        r = rates[f]
        assert 0 < r <= cap * (1 + 1e-12)
        if r >= cap * (1 - 1e-9):
            continue
        certified = False
        for l in links:
            saturated = sum(rates[g] for g in on_link[l]) >= a.capacity(l) * (1 - 1e-9)
            top = max(rates[g] / specs[g][1] for g in on_link[l])
            if saturated and r / weight >= top * (1 - 1e-9):
                certified = True
                break
        assert certified, f"flow {f} has no bottleneck"


def test_random_instances_are_max_min_fair() -> None:
    rng = np.random.default_rng(20240601)
    for _ in range(30):
        a, specs = random_instance(rng, n_links=20, n_flows=60)
        assert_max_min_certificate(a, specs)
        rates = a.rates()
        for l in range(20):
            load = sum(rates[f] for f, spec in specs.items() if l in spec[0])
            assert a.link_load(l) == pytest.approx(load, rel=1e-12, abs=1e-12)
        # Incremental changes keep the certificate.
        for f in rng.choice(60, size=10, replace=False).tolist():
            a.remove_flow(f)
            del specs[f]
        new_w = {f: float(rng.uniform(0.2, 3.0)) for f in list(specs)[:15]}
        a.set_weights(new_w)
        for f, w in new_w.items():
            specs[f] = (specs[f][0], w, specs[f][2])
        a.set_capacity(0, 0.5)
        assert_max_min_certificate(a, specs)


def test_certificate_rejects_unfair_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    a, specs = random_instance(np.random.default_rng(3), n_links=20, n_flows=60)
    fair = a.rates()
    monkeypatch.setattr(a, "rates", lambda: {f: 0.9 * r for f, r in fair.items()})
    with pytest.raises(AssertionError, match="bottleneck"):
        assert_max_min_certificate(a, specs)


def test_symmetric_ties_saturate_together() -> None:
    # 8 servers, all-to-all with equal weights: every port carries 7 flows -> 10/7 each.
    a = RateAllocator()
    for s in range(8):
        a.add_link(("out", s), 10.0)
        a.add_link(("in", s), 10.0)
    for s in range(8):
        for d in range(8):
            if s != d:
                a.add_flow((s, d), [("out", s), ("in", d)])
    assert all(r == approx(10.0 / 7.0) for r in a.rates().values())


def test_1600_flows_400_links_stay_within_capacity_after_weight_changes() -> None:
    """A large instance (timing lives in scripts/bench_sim.py, not here): rates stay feasible."""
    rng = np.random.default_rng(7)
    cap = {l: float(rng.uniform(1e9, 1e10)) for l in range(400)}
    a = RateAllocator(cap)
    links_of = {}
    for f in range(1600):
        links_of[f] = rng.choice(400, size=int(rng.integers(1, 5)), replace=False).tolist()
        a.add_flow(f, links_of[f], weight=float(rng.uniform(0.5, 2.0)))
    a.rates()
    for i in range(5):
        a.set_weight(i, 1.0 + i)
        rates = a.rates()
    load = dict.fromkeys(cap, 0.0)
    for f, links in links_of.items():
        assert rates[f] > 0
        for l in links:
            load[l] += rates[f]
    assert all(load[l] <= cap[l] * (1 + 1e-9) for l in cap)


def test_max_min_rates_on_arrays_mixed_link_counts_and_caps() -> None:
    """Flows crossing 2 links, 1 link and none; a cap on a flow that crosses a link binds there."""
    from raytestbed.network.allocator import max_min_rates

    inc_flow = np.array([0, 0, 1, 2], dtype=np.intp)
    inc_link = np.array([0, 1, 1, 0], dtype=np.intp)
    r = max_min_rates(inc_flow, inc_link, np.ones(4), np.array([np.inf, np.inf, 0.25, 3.0]), np.array([1.0, 2.0]))
    # flow 2 (cap 0.25) on link 0 with flow 0: flow 0 gets 0.75; link 1 then gives flow 1 the rest, 1.25;
    # flow 3 crosses no link: its cap
    assert r == pytest.approx([0.75, 1.25, 0.25, 3.0])
