"""A-SRPT's fast paths give the results of the plain computations they replace.

Each test runs the fast code against a reference that does not use it: scikit-learn's forest
refitted on every row, an eq. (7) iteration model without a cache that is handed the other
running jobs as a plain dict, the server walk written with a full sort, the forest fitted on
spelled-out rows. Per-job results must be identical (start, finish, placement, prediction).
"""

from __future__ import annotations

import heapq
import itertools
import random

import numpy as np
import pytest

from conftest import small_cluster
from raytestbed.core.job import Stage
from raytestbed.core.placement import Placement
from raytestbed.core.profile import default_profiles
from raytestbed.core.timing import AsrptModel, IterationModel, asrpt_iteration_time
from raytestbed.placement.heavy_edge import heavy_edge_assignment, heavy_edge_placement
from raytestbed.placement.select import least_available, most_available
from raytestbed.predict import forest
from raytestbed.predict.iterations import CompletedRows, OnlinePredictor, RandomForestPredictor
from raytestbed.resources import package_root
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import OtherJobs, Simulator
from raytestbed.traces.registry import WorkloadContext
from raytestbed.traces.synthetic import synthetic_workload


def _workload(jobs: int, gap_s: float):
    """The benchmark's recurring-group workload (``raytestbed bench sim``), 200 groups, on 12 x 8 GPUs."""
    cluster = small_cluster(servers=12, gpus=8)
    ctx = WorkloadContext(cluster, 0, package_root(), default_profiles())
    return cluster, synthetic_workload({
        "jobs": jobs, "mean_interarrival_s": gap_s, "groups": 200, "users": 30,
        "gpu_mix": {1: 0.7, 2: 0.1, 4: 0.1, 8: 0.07, 16: 0.03}, "iterations": [100, 20000],
    }, ctx)


def _per_job(result):
    return sorted((r.job.job_id, r.first_start_s, r.finish_s, r.placement, r.predicted_iterations)
                  for r in result.records)


def _run(cluster, jobs, engine="exact", model=None):
    before = RandomForestPredictor.engine
    RandomForestPredictor.engine = engine
    try:
        policy = make_policy("asrpt", seed=0)
        res = Simulator(cluster, jobs, policy, model=model).run()
    finally:
        RandomForestPredictor.engine = before
    return res, policy


@pytest.fixture(scope="module")
def busy_days():
    """1,500 jobs 2 minutes apart on 96 GPUs: more work than GPUs, a queue most of the time, about
    5 days of trace (daily refits), comm-heavy jobs that wait in their delay window."""
    cluster, jobs = _workload(1500, 120.0)
    res, policy = _run(cluster, jobs)
    return cluster, jobs, res, policy


def test_run_equals_the_run_with_scikit_learns_forest(busy_days):
    """Daily refits from the online predictor's distinct (group, user) rows, predictions made when
    first asked, against scikit-learn fitted on every completed row with every known pair predicted
    at each fit."""
    cluster, jobs, res, policy = busy_days
    assert policy.predictor.fits >= 3 and policy.delayed > 0
    assert sum(bool(r.predicted_iterations) for r in res.records) > 300
    ref, _ = _run(cluster, jobs, engine="sklearn")
    assert _per_job(res) == _per_job(ref)


@pytest.mark.parametrize("ratio", [0, 10**9])
def test_run_equals_the_run_predicting_keys_only_one_by_one_or_all_at_each_refit(busy_days, monkeypatch, ratio):
    """The exact forest predicts every known (group, user) at a refit when that is cheaper than one
    by one (``BATCH_RATIO``): the run equals the run that never does (ratio 0: every key when first
    asked) and the run that does so at every refit that follows asked keys."""
    cluster, jobs, res, policy = busy_days
    assert policy.predictor.model.batch_fits >= 1  # the default run did predict in batches
    monkeypatch.setattr(RandomForestPredictor, "BATCH_RATIO", ratio)
    ref, ref_policy = _run(cluster, jobs)
    batched = ref_policy.predictor.model.batch_fits
    assert batched == 0 if ratio == 0 else batched >= policy.predictor.model.batch_fits
    assert _per_job(res) == _per_job(ref)


def _heavy_edge_reference(job, servers_gpus, seed, ps):
    """Heavy-Edge's mapping written out: each server's vertices, in (stage, replica) order, take its GPUs."""
    stage_gpus = [[-1] * st.replicas for st in job.stages]
    caps = [len(g) for _, g in servers_gpus]
    for (_, gpus), verts in zip(servers_gpus, heavy_edge_assignment(job, caps, seed)):
        for (s, r), gpu in zip(verts, gpus):
            stage_gpus[s][r] = int(gpu)
    return Placement(tuple(tuple(x) for x in stage_gpus), tuple(ps))


def test_one_gpu_placement_equals_heavy_edge_mapping():
    cluster, jobs = _workload(300, 30.0)
    one = [j for j in jobs if j.gpus == 1]
    assert len(one) > 100
    for j in one:
        for servers_gpus in ([(3, [25])], [(0, []), (5, [41])], [(2, [17]), (4, [])]):
            got = heavy_edge_placement(j, servers_gpus, 0, (1,) if j.num_ps else ())
            assert got == _heavy_edge_reference(j, servers_gpus, 0, (1,) if j.num_ps else ())


def test_job_gpus_follows_its_stages():
    job = _workload(5, 30.0)[1][0]
    before = job.gpus
    assert before == sum(st.replicas for st in job.stages)
    job.stages = job.stages + (Stage(3, job.stages[0].profile),)
    assert job.gpus == before + 3


class _PlainEq7(IterationModel):
    """A-SRPT eq. (7) on the placement's counts, no cache, the other running jobs as a dict."""

    name = "asrpt-plain"

    def __init__(self):
        self.others_seen = 0

    def iteration_time(self, job, placement, cluster, running):
        others = dict(running)  # what the simulator used to build for every start
        assert job.job_id not in others
        self.others_seen = max(self.others_seen, len(others))
        return asrpt_iteration_time(job, placement.counts(cluster), cluster.gpus_per_server,
                                    cluster.nic_bps, cluster.intra_bps)


def test_run_equals_the_run_with_an_uncached_iteration_model(busy_days):
    cluster, jobs, res, _ = busy_days
    plain = _PlainEq7()
    ref, _ = _run(cluster, jobs, model=plain)
    assert plain.others_seen > 10  # the lazy mapping did reach the model with the running jobs
    assert _per_job(res) == _per_job(ref)


def test_cached_eq7_equals_eq7_on_any_server_order():
    """The model caches eq. (7) per (stages, per-server counts): every placement, whatever its servers
    and their order, gets what eq. (7) gives on its own counts."""
    cluster, jobs = _workload(400, 30.0)
    model = AsrptModel()
    rng = random.Random(1)
    g = cluster.gpus_per_server
    for job in jobs:
        for _ in range(4):
            gpus: list[int] = []
            for m in rng.sample(range(cluster.num_servers), cluster.num_servers):
                gpus += [m * g + i for i in rng.sample(range(g), min(g, job.gpus - len(gpus), rng.randint(1, g)))]
                if len(gpus) == job.gpus:
                    break
            rng.shuffle(gpus)
            it = iter(gpus)
            pl = Placement(tuple(tuple(next(it) for _ in range(st.replicas)) for st in job.stages))
            assert pl.gpus == tuple(x for st in pl.stage_gpus for x in st)
            want = asrpt_iteration_time(job, pl.counts(cluster), g, cluster.nic_bps, cluster.intra_bps)
            assert model.iteration_time(job, pl, cluster, {}) == want
    assert len(model._alpha) < 4 * len(jobs)  # placements of one shape shared an entry


def test_other_jobs_is_the_dict_it_replaces():
    running = {k: type("R", (), {"job": f"j{k}", "placement": f"p{k}"})() for k in (3, 5, 8)}
    view = OtherJobs(running, 5)
    assert dict(view) == {3: ("j3", "p3"), 8: ("j8", "p8")} and len(view) == 2 and 5 not in view
    assert len(OtherJobs(running, 7)) == 3


def _walk_reference(free, need, descending):
    """Servers with free GPUs sorted by free count (descending or ascending), ties by id, taken in order."""
    order = sorted((m for m in range(len(free)) if free[m] > 0),
                   key=lambda m: (-free[m] if descending else free[m], m))
    out, left = [], need
    for m in order:
        if left == 0:
            break
        take = min(int(free[m]), left)
        out.append((m, take))
        left -= take
    return out


def test_server_walks_equal_the_sorted_walk():
    rng = np.random.default_rng(4)
    for _ in range(300):
        free = rng.integers(0, 9, int(rng.integers(1, 40))).astype(np.int64)
        free[rng.random(free.size) < 0.5] = 0
        for need in (1, 2, 3, 8):
            if need > free.sum():
                continue
            assert most_available(free, need) == _walk_reference(free, need, True)
            assert least_available(free, need) == _walk_reference(free, need, False)


def test_fit_from_distinct_rows_equals_the_fit_on_every_row():
    rng = np.random.default_rng(7)
    rows = CompletedRows()
    names = [(f"g{int(g)}", f"u{int(g) % 5 + int(rng.integers(0, 2))}") for g in rng.zipf(1.3, 3000) % 60]
    iters = rng.integers(1, 5000, len(names))
    for (gr, us), n in zip(names, iters):
        rows.add(gr, us, int(n))
    fast = RandomForestPredictor(seed=2).fit_rows(rows)
    plain = RandomForestPredictor(seed=2).fit([g for g, _ in names], [u for _, u in names], iters)
    query = sorted(set(names)) + [("g1", "nobody"), ("zz", "u0")]
    assert [fast.predict_one(g, u) for g, u in query] == plain.predict(*zip(*query)).tolist()
    # the forest on the distinct inputs with an index per row is the forest on the rows
    X = np.array([[int(g[1:]), int(u[1:])] for g, u in names], dtype=float)
    table, index = np.unique(X, axis=0, return_inverse=True)
    a = forest.fit(X, iters, n_estimators=5, seed=1)
    b = forest.fit_grouped(table, index.reshape(-1), iters, n_estimators=5, seed=1)
    for f in ("features", "thresholds", "lefts", "rights", "values", "offsets"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


def test_online_predictor_keeps_every_row():
    p = OnlinePredictor("rf", retrain_every=4)
    for i, (gr, n) in enumerate(itertools.product(("a", "b"), (10, 30))):
        p.observe(type("J", (), {"group": gr, "user": "u", "iterations": n, "job_id": i})(), n)
    rows = p._rows
    assert len(rows) == 4 and rows.points == [("a", "u"), ("b", "u")]
    assert rows.point_of_row().tolist() == [0, 0, 1, 1] and rows.iterations == [10, 30, 10, 30]
    assert p.fits == 1


def test_group_draw_is_numpys_weighted_choice():
    """The synthetic generator's group draw (cumulative weights made once) draws what
    ``Generator.choice(n, p=weights)`` draws, from the same stream."""
    from raytestbed.traces.synthetic import _weighted_draw

    for n, s in [(2000, 1.1), (20, 1.1), (7, 0.0), (300, 2.5)]:
        w = 1.0 / np.arange(1, n + 1) ** s
        w /= w.sum()
        a, b = np.random.default_rng(5), np.random.default_rng(5)
        draw = _weighted_draw(w)
        assert [int(a.choice(n, p=w)) for _ in range(5000)] == [draw(b) for _ in range(5000)]
        assert a.random() == b.random()  # the streams stayed in step


def _scan_reference(queue, free, work_conserving):
    """The plain scan the per-GPU-count queue replaces: walk the whole queue in key order, start every
    job that fits in the GPUs left (a strict queue stops at the first that does not)."""
    started = []
    for key, gpus in sorted(queue):
        if gpus > free:
            if not work_conserving:
                break
            continue
        started.append(key)
        free -= gpus
    return started


@pytest.mark.parametrize("work_conserving", [True, False])
def test_gpu_count_queue_starts_what_the_full_scan_starts(work_conserving):
    from raytestbed.schedulers.asrpt_baselines import GpuCountQueue

    rng = random.Random(7)
    for _ in range(300):
        items = [((rng.randrange(50), rng.random(), i), rng.choice([1, 1, 2, 4, 8, 16])) for i in range(rng.randrange(40))]
        free = rng.randrange(0, 33)
        q = GpuCountQueue()
        for item, g in items:
            q.push(item, g)
        started, left = [], free
        while left > 0:
            nxt = q.first(left if work_conserving else None)
            if nxt is None or nxt[1] > left:
                break
            started.append(q.pop(nxt[1]))
            left -= nxt[1]
        assert started == _scan_reference(items, free, work_conserving)
        assert len(q) == len(items) - len(started)


@pytest.mark.parametrize("policy", ["wcs-duration", "spjf"])
def test_baseline_run_equals_the_run_with_the_full_queue_scan(busy_days, policy):
    """A whole run of a work-conserving and a strict baseline on the busy workload, against the same
    policy whose queue is walked in full at every event (the code the per-GPU-count queue replaced)."""
    from raytestbed.core.events import StartJob
    from raytestbed.core.job import CommPattern
    from raytestbed.core.state import FreePool
    from raytestbed.schedulers.fifo import random_ps_servers

    cluster, jobs, _, _ = busy_days

    def full_scan(self, view):
        items = []
        for g, h in self._queue._heaps.items():
            items += [(it, g) for it in h]
        out, pool = [], FreePool(view)
        for item, g in sorted(items):
            if g > pool.total_free:
                if not self.work_conserving:
                    break
                continue
            self._queue._heaps[g].remove(item)
            self._queue._len -= 1
            job = view.pending[item[2]]
            sel = self._select(job, pool)
            ps = random_ps_servers(job, [m for m, _ in sel], view.cluster.num_servers, self._rng) \
                if job.comm is CommPattern.PS else []
            out.append(StartJob(job.job_id, self._est.place(job, pool, sel, ps)))
        for h in self._queue._heaps.values():
            heapq.heapify(h)
        return out

    fast = make_policy(policy, seed=0)
    slow = make_policy(policy, seed=0)
    slow._schedule = full_scan.__get__(slow)
    res = Simulator(cluster, jobs, fast).run()
    ref = Simulator(cluster, jobs, slow).run()
    assert len(fast._queue) == 0
    assert _per_job(res) == _per_job(ref)
    assert max(r.first_start_s - r.job.arrival_s for r in res.records) > 0  # jobs did queue
