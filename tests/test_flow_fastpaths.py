"""The flow simulator's fast paths give what the plain ones give, to the last bit.

Worker-by-worker runs (sim/pipeline_workers.py) hand the network an instant's steps together and
the compiled passes of sim/kernels.py keep the flow table's books; each is checked here against the
plain way: one step, one call at a time (``Simulator.batch_steps = False``) on small trials, and
numpy's own operations on random tables.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import rar_job, small_cluster
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.schedulers.base import make_policy
from raytestbed.sim import kernels
from raytestbed.sim.engine import Simulator

MB = 1e6


def _pipe(job_id, arrival, replicas, iterations, out_mb=6.0, param_mb=8.0, fwd=0.004, bwd=0.008) -> Job:
    stages = tuple(Stage(k, StageProfile(fwd, bwd, out_bytes=(out_mb * MB if s + 1 < len(replicas) else 0.0),
                                         param_bytes=param_mb * MB)) for s, k in enumerate(replicas))
    return Job(job_id, arrival, iterations, stages, CommPattern.PIPELINE)


def _jobs():
    """Split pipelines whose replicas share NICs with each other and with a PS job and a ring job."""
    return [_pipe(0, 0.0, (2, 2, 2), iterations=40),
            Job(1, 0.01, 30, (Stage(3, StageProfile(0.01, 0.02, 0.0, 4 * MB)),), CommPattern.PS, num_ps=2),
            rar_job(2, 0.02, workers=2, iterations=20, grad_bytes=20 * MB),
            _pipe(3, 0.5, (1, 2, 1), iterations=30, out_mb=3.0),
            _pipe(4, 0.7, (2, 1), iterations=25, out_mb=2.0)]


def _run(batched: bool, fast_forward: bool, policy: str):
    cl = small_cluster(4, 2, nic_gbps=1, intra_gbs=10)
    sim = Simulator(cl, _jobs(), make_policy(policy, "placement", 0), mode="flow", fast_forward=fast_forward)
    sim.batch_steps = batched
    res = sim.run()
    return [(r.job.job_id, r.first_start_s, r.finish_s, r.lower_bound_s, r.iteration_time_s, r.gpu_seconds)
            for r in res.records], res


@pytest.mark.parametrize("policy,fast_forward", [("fifo", False), ("fifo", True), ("asrpt", False)])
def test_steps_handed_to_the_network_together_give_every_job_the_same_times(policy, fast_forward):
    together, res = _run(True, fast_forward, policy)
    alone, _ = _run(False, fast_forward, policy)
    assert len(together) == 5 and all(np.isfinite(r[2]) for r in together)
    assert together == alone  # bit for bit
    assert res.events > 0


def _table(rng, n: int, ranks: int):
    rank = np.sort(rng.integers(0, ranks, n))
    total = rng.random(n) * 1e7
    rem = total * rng.random(n)
    alive = rng.random(n) < 0.7
    return rank, total, rem, alive


def test_bytes_sent_of_the_changed_jobs_are_numpys_block_sums():
    """FlowNet.take_sent: each flagged rank's moved bytes summed as ``np.add.reduceat`` over every
    rank's block of rows sums them (pairwise for long blocks: the same rounding)."""
    rng = np.random.default_rng(3)
    for _ in range(400):
        n, ranks = int(rng.integers(0, 70)), 6
        rank, total, rem, alive = _table(rng, n, ranks)
        dirty = rng.random(ranks) < 0.6
        done = rng.random(ranks) * 1e5
        want = done.copy()
        if n:
            first = np.flatnonzero(np.concatenate(([True], rank[1:] != rank[:-1])))
            want[rank[first]] += np.add.reduceat(np.where(alive, total - rem, 0.0), first)
        flags = dirty.copy()
        got_ranks, has, vals, starts = kernels.sent_segments(flags, rank, alive, total, rem)
        sums = iter(np.add.reduceat(vals, starts).tolist() if starts.size else ())
        got = [done[r] + next(sums) if h else done[r] for r, h in zip(got_ranks.tolist(), has.tolist())]
        assert got_ranks.tolist() == np.flatnonzero(dirty).tolist() and not flags.any()
        assert got == want[np.flatnonzero(dirty)].tolist()


def test_one_pass_splice_equals_dropping_ended_rows_then_inserting():
    rng = np.random.default_rng(4)
    for _ in range(400):
        n, m = int(rng.integers(0, 30)), int(rng.integers(1, 5))
        rank, total, rem, alive = _table(rng, n, 5)
        ints = np.vstack([np.arange(n), rank, rng.integers(0, 9, (4, n))]).astype(np.int64)
        floats = np.vstack([rem, total, rng.random((4, n))])
        r, after = int(rng.integers(0, 5)), bool(rng.integers(0, 2))
        new_i = rng.integers(0, 99, (6, m)).astype(np.int64)
        new_i[1] = r
        new_f = rng.random((6, m))
        ki, kf = ints[:, alive], floats[:, alive]
        pos = int(np.searchsorted(ki[1], r, side="right" if after else "left"))
        want_i = np.concatenate([ki[:, :pos], new_i, ki[:, pos:]], axis=1)
        want_f = np.concatenate([kf[:, :pos], new_f, kf[:, pos:]], axis=1)
        got_i, got_f, got_a = kernels.splice_rows(ints, floats, alive, r, after, new_i, new_f)
        assert np.array_equal(got_i, want_i) and np.array_equal(got_f, want_f) and got_a.all()
        assert got_i.flags.c_contiguous and got_f.flags.c_contiguous


def test_completion_books_equal_the_row_by_row_books():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n, ranks = int(rng.integers(0, 40)), 5
        rank, total, rem, alive = _table(rng, n, ranks)
        eps = np.full(n, 1e-6)
        rem[rng.random(n) < 0.3] = 0.0
        fixed = np.where(rng.random(n) < 0.2, 1.0, np.nan)
        uid = rng.permutation(n).astype(np.int64)
        live = np.bincount(rank[alive], minlength=ranks).astype(np.int64)
        done = rng.random(ranks)
        a = [x.copy() for x in (rem, alive, np.zeros(ranks, bool), fixed, done, live)]
        rows, free = kernels.end_done(np.arange(n), a[0], eps, a[1], rank, a[2], np.ones(n), a[3])
        for i in rows.tolist():
            a[4][rank[i]] += total[i]
            a[5][rank[i]] -= 1
        hit = sorted(set(rank[rows].tolist()))
        b = [x.copy() for x in (rem, alive, np.zeros(ranks, bool), fixed, done, live)]
        got = kernels.end_done_books(np.arange(n), b[0], eps, b[1], rank, uid, total, b[2], np.ones(n), b[3], b[4],
                                     b[5])
        assert np.array_equal(got[0], rows) and got[3] == free
        assert got[1].tolist() == rank[rows].tolist() and got[2].tolist() == uid[rows].tolist()
        assert got[4].tolist() == [r for r in hit if a[5][r] == 0]
        for x, y in zip(a, b):
            assert np.array_equal(x, y, equal_nan=True)
