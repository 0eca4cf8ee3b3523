"""Queueing while GPUs are free (raytestbed.results.queueing) and its summary entries."""

import numpy as np
import pandas as pd
import pytest

from conftest import small_cluster
from raytestbed.results.queueing import free_gpu_steps, queue_gpus_free
from raytestbed.results.records import job_rows, summarize
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from test_asrpt import plain


def _jobs(rows):
    return pd.DataFrame(rows, columns=["arrival_s", "first_start_s", "gpus"])


def _intervals(rows):
    return pd.DataFrame(rows, columns=["job_id", "start_s", "end_s", "gpus"])


def test_hand_made_schedule_on_four_gpus():
    """Job 0 holds all 4 GPUs 0-10 s; job 1 (2 GPUs, arrived at 0) starts at 10 as job 0 ends; job 2
    (1 GPU, arrived at 10) is held back until 20 while 2 GPUs are free; job 3 (4 GPUs, arrived at 5)
    waits until 21 and never sees 4 free; job 4 never starts."""
    iv = _intervals([(0, 0.0, 10.0, 4), (1, 10.0, 20.0, 2), (2, 20.0, 21.0, 1), (3, 21.0, 30.0, 4)])
    jobs = _jobs([(0.0, 0.0, 4), (0.0, 10.0, 2), (10.0, 20.0, 1), (5.0, 21.0, 4), (3.0, np.nan, 1)])
    assert queue_gpus_free(jobs, iv, 4).tolist() == pytest.approx([0.0, 0.0, 10.0, 0.0, 0.0])
    t, free = free_gpu_steps(iv, 4)
    assert t.tolist() == [0.0, 10.0, 20.0, 21.0, 30.0]
    assert free.tolist() == [0.0, 2.0, 3.0, 0.0, 4.0]  # at 10 s job 0's release counts before job 1's start


def test_wait_before_the_first_start_counts_when_the_job_fits():
    iv = _intervals([(0, 5.0, 8.0, 2)])
    jobs = _jobs([(1.0, 5.0, 2), (1.0, 8.0, 4), (2.0, 8.0, 3)])
    # job 1 (4 GPUs) sees 4 free for 1-5 s only; job 2 (3 GPUs) for 2-5 s, then 2 free until 8
    assert queue_gpus_free(jobs, iv, 4).tolist() == pytest.approx([4.0, 4.0, 3.0])


def _brute_force(jobs, iv, total):
    """Free GPUs at the midpoint of every piece between breakpoints, summed per job."""
    points = np.unique(np.concatenate([iv["start_s"], iv["end_s"], jobs["arrival_s"], jobs["first_start_s"]]))
    out = []
    for a, s, g in jobs.itertuples(index=False):
        seconds = 0.0
        for lo, hi in zip(points[:-1], points[1:]):
            if a <= lo and hi <= s:
                mid = (lo + hi) / 2
                busy = iv.loc[(iv["start_s"] <= mid) & (mid < iv["end_s"]), "gpus"].sum()
                seconds += (hi - lo) * (total - busy >= g)
        out.append(seconds)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_matches_a_brute_force_count_on_random_intervals(seed):
    rng = np.random.default_rng(seed)
    n = 40
    start = np.round(rng.uniform(0, 100, n), 1)
    iv = _intervals(list(zip(range(n), start, start + np.round(rng.uniform(0.5, 30, n), 1), rng.integers(1, 5, n))))
    arrival = np.round(start - rng.uniform(0, 40, n), 1)
    jobs = _jobs(list(zip(arrival, start, rng.integers(1, 9, n))))
    assert queue_gpus_free(jobs, iv, 16).tolist() == pytest.approx(_brute_force(jobs, iv, 16))


def test_summary_separates_a_strict_queue_from_a_work_conserving_one():
    """SPJF holds job 2 (1 GPU) behind job 1 (8 GPUs) from 2 s to 105 s while job 0 leaves 4 of 8 GPUs
    free until 100 s; WCS-Duration starts it at once."""
    c = small_cluster(servers=2, gpus=4)
    jobs = [plain(0, 0.0, 4, 100), plain(1, 1.0, 8, 5), plain(2, 2.0, 1, 50)]
    for name, free_s, queue_s in (("spjf", 98.0, 99.0 + 103.0), ("wcs-duration", 0.0, 99.0)):
        res = Simulator(c, jobs, make_policy(name, predictor="perfect")).run()
        busy = _intervals(list(res.busy_gpu_intervals))
        s = summarize(job_rows(res.records), res.decision_times_s, c.total_gpus, intervals=busy)
        assert s["queue_gpus_free_s"] == pytest.approx(free_s), name
        assert s["total_queue_s"] == pytest.approx(queue_s), name
