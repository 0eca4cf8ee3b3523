"""Gavel's policies: the allocation programs on hand-computed examples, and the round mechanism in the
simulator."""

import json

import numpy as np
import pytest

from raytestbed.core.cluster import Cluster, Server
from raytestbed.core.gpu_types import GpuSpeeds, ThroughputTable
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.schedulers.base import make_policy
from raytestbed.schedulers.gavel_lp import finish_time_fairness, max_min_fairness, min_total_duration
from raytestbed.sim.engine import Simulator

GB = 1e9
#: 3 jobs, 2 types (A fast, B slow), one GPU each: jobs 0 and 1 run 4x faster on A, job 2 the same on both
T3 = np.array([[4.0, 1.0], [4.0, 1.0], [2.0, 2.0]])
ONE = np.ones(3)
WORKERS = np.array([1.0, 1.0])


def test_max_min_fairness_perf_hand_computed():
    """Equal share: half of each type, so proportional throughputs are 2.5, 2.5, 2; normalised
    coefficients job 0/1: A 1.6, B 0.4, job 2: A 1, B 1. Jobs 0, 1 share A (1/2 each) and take beta of B
    each, job 2 the rest of B: 0.8 + 0.4 beta = 1 - 2 beta gives beta = 1/12 and every job 5/6 of its
    equal-share throughput. (Jobs 0 and 1 are alike: how they split A and B between them is free, as
    long as each gets 5/6.)"""
    X = max_min_fairness(T3, ONE, ONE, WORKERS)
    assert X[2] == pytest.approx([0.0, 5 / 6], abs=1e-6)
    assert X[:2].sum(axis=0) == pytest.approx([1.0, 1 / 6], abs=1e-6)
    norm = (T3 * X).sum(axis=1) / np.array([2.5, 2.5, 2.0])
    assert norm == pytest.approx([5 / 6] * 3, abs=1e-6)


def test_max_min_fairness_agnostic_gives_equal_time():
    """With throughputs ignored (all 1) every job gets 2/3 of a GPU's time, whatever the type."""
    X = max_min_fairness(np.ones((3, 2)), ONE, ONE, WORKERS)
    assert X.sum(axis=1) == pytest.approx([2 / 3] * 3, abs=1e-6)
    assert X.sum(axis=0) == pytest.approx([1.0, 1.0], abs=1e-6)


def test_max_min_fairness_weights_and_scale_factors():
    """One type of 4 GPUs; a 2-GPU job and a 1-GPU job of weight 2 and 1: the 2-GPU job's normalised
    share is 2 x_0 / 2, the other's x_1 / 1; equal with 2 x_0 + x_1 = 4, x <= 1: x_0 = x_1 = 1 (both fit)."""
    X = max_min_fairness(np.ones((2, 1)), np.array([2.0, 1.0]), np.array([2.0, 1.0]), np.array([4.0]))
    assert X.ravel() == pytest.approx([1.0, 1.0], abs=1e-6)
    # one GPU for two 1-GPU jobs with weights 3 and 1: x_0 / 3 = x_1 / 1, x_0 + x_1 = 1 -> 3/4, 1/4
    X = max_min_fairness(np.ones((2, 1)), np.array([1.0, 1.0]), np.array([3.0, 1.0]), np.array([1.0]))
    assert X.ravel() == pytest.approx([0.75, 0.25], abs=1e-6)


def test_finish_time_fairness_hand_computed_at_arrival():
    """At arrival (t = c = 0) rho_j = iso_j / throughput(j, X); the isolated share is 1/3 of each type,
    iso = 5/3, 5/3, 4/3: the same trade as max-min with 1.5x the coefficients, so the best worst rho is
    1 / (1.5 x 5/6) = 0.8 at the same allocation."""
    X, rho = finish_time_fairness(T3, ONE, np.zeros(3), np.zeros(3), np.array([100.0, 100.0, 40.0]), WORKERS)
    assert rho == pytest.approx(0.8, rel=1e-5)
    assert X[2] == pytest.approx([0.0, 5 / 6], abs=1e-4)
    assert X[:2].sum(axis=0) == pytest.approx([1.0, 1 / 6], abs=1e-4)
    iso = np.array([5 / 3, 5 / 3, 4 / 3])
    assert iso / (T3 * X).sum(axis=1) == pytest.approx([0.8] * 3, rel=1e-4)


def test_finish_time_fairness_hand_computed_after_waiting():
    """All three waited 10 s with no progress (c = 0), r = 100, 100, 40: isolated finish D = 60, 60, 30 s.
    Jobs 0, 1 on half of A each finish in 100 / 2 = 50 s, job 2 on all of B in 40 / 2 = 20 s:
    rho = (10 + 50) / 60 = (10 + 20) / 30 = 1 for all three, and no allocation does better."""
    X, rho = finish_time_fairness(T3, ONE, np.full(3, 10.0), np.zeros(3), np.array([100.0, 100.0, 40.0]), WORKERS)
    assert rho == pytest.approx(1.0, rel=1e-5)
    assert X == pytest.approx(np.array([[0.5, 0.0], [0.5, 0.0], [0.0, 1.0]]), abs=1e-4)


def test_min_total_duration_hand_computed():
    """Jobs 0, 1 (100 iterations each) share A (1/2 each), job 2 (40) takes 20/M of B, the rest of B goes
    half to job 0 and half to job 1: 2 + (1 - 20/M) / 2 = 100/M gives M = 44 s (B is worth 4x less to jobs
    0 and 1 than A, so A goes to them first)."""
    X, M = min_total_duration(T3, ONE, np.array([100.0, 100.0, 40.0]), WORKERS)
    assert M == pytest.approx(44.0, rel=1e-6)
    assert X[2] == pytest.approx([0.0, 20 / 44], abs=1e-6)
    assert np.all((T3 * X).sum(axis=1) * M >= np.array([100.0, 100.0, 40.0]) - 1e-4)


# ---------------------------------------------------------------------------------------- in the simulator
def cluster(a=1, b=1):
    return Cluster((Server(0, a, GB, GB, gpu_type="a"), Server(1, b, GB, GB, gpu_type="b")), 100 * GB)


def job(jid, iters, model, arrival=0.0, gpus=1):
    return Job(jid, arrival, iters, (Stage(gpus, StageProfile(0.5, 0.5, 0, 0)),), CommPattern.RAR, model=model)


@pytest.fixture
def speeds_table(tmp_path):
    p = tmp_path / "t.json"
    rows = {"a": {"('fast-on-a', 1)": {"null": 4.0}, "('same', 1)": {"null": 2.0}},
            "b": {"('fast-on-a', 1)": {"null": 1.0}, "('same', 1)": {"null": 2.0}}}
    p.write_text(json.dumps(rows))
    return ThroughputTable.from_json(p)


def test_max_min_fairness_time_shares_one_gpu_in_rounds():
    """Two 1-GPU jobs of 1,000 iterations of 1 s on one GPU: LAS alternates them round by round (360 s),
    each preempted and resumed with its progress: job 0 runs in [0, 360), [720, 1080), [1440, 1720) and
    finishes at 1,720 s; the GPU idles until the round at 1,800 s (Gavel acts at round boundaries only),
    then job 1 runs its last 280 iterations and finishes at 2,080 s. A restore cost makes it later."""
    c = Cluster((Server(0, 1, GB, GB),), 100 * GB)
    jobs = [job(0, 1000, "x"), job(1, 1000, "x")]
    res = Simulator(c, jobs, make_policy("max_min_fairness")).run()
    fin = {r.job.job_id: r.finish_s for r in res.records}
    assert sorted(fin.values()) == pytest.approx([1720.0, 2080.0])
    assert sorted(r.preemptions for r in res.records) == [2, 2]
    slow = Simulator(c, jobs, make_policy("max_min_fairness"), restore_s=60.0).run()
    assert max(r.finish_s for r in slow.records) > 2080.0 + 60.0


@pytest.mark.parametrize("policy", ["max_min_fairness", "max_min_fairness_perf", "finish_time_fairness_perf",
                                    "fifo_gavel", "fifo_perf", "min_total_duration_perf"])
def test_gavel_policies_finish_every_job(policy, speeds_table):
    c = cluster(2, 2)
    jobs = [job(i, 500 + 100 * i, "fast-on-a" if i % 2 else "same", arrival=100.0 * i, gpus=1 + (i % 3 == 0))
            for i in range(8)]
    res = Simulator(c, jobs, make_policy(policy), speeds=GpuSpeeds(c, speeds_table)).run()
    assert all(np.isfinite(r.finish_s) for r in res.records)
    # jobs start only at round boundaries
    assert all(r.first_start_s % 360.0 == pytest.approx(0.0, abs=1e-9) for r in res.records)


def test_heterogeneity_aware_las_puts_the_jobs_that_gain_on_the_fast_type(speeds_table):
    """Two jobs that run 4x faster on type a and one that runs the same on both, one GPU of each type:
    max_min_fairness_perf keeps the indifferent job on b, so it finishes no later than under the
    agnostic LAS, and the jobs' mean completion time is lower."""
    c = cluster(1, 1)
    jobs = [job(0, 4000, "fast-on-a"), job(1, 4000, "fast-on-a"), job(2, 2000, "same")]
    sp = GpuSpeeds(c, speeds_table)
    perf = Simulator(c, jobs, make_policy("max_min_fairness_perf"), speeds=sp).run()
    agn = Simulator(c, jobs, make_policy("max_min_fairness", seed=1), speeds=sp).run()
    mean = lambda res: np.mean([r.finish_s - r.job.arrival_s for r in res.records])  # noqa: E731
    assert mean(perf) < mean(agn)



def test_gavel_policy_after_a_type_is_lost_uses_the_speeds_on_the_types_left(speeds_table):
    """The one server of type a dies at 400 s: from the next round every job runs on type b at b's
    speed from the table (the policy's throughput matrix loses a's column, not b's), so a job of
    2,000 iterations that runs 4x slower on b still finishes, later than with a alive."""
    from raytestbed.core.events import Fault

    c = cluster(1, 1)
    jobs = [job(0, 2000, "fast-on-a"), job(1, 2000, "same", arrival=10.0)]
    sp = GpuSpeeds(c, speeds_table)
    alive = Simulator(c, jobs, make_policy("max_min_fairness_perf"), speeds=sp).run()
    lost = Simulator(c, jobs, make_policy("max_min_fairness_perf"), speeds=sp,
                     faults=[Fault("kill_server", 0, 400.0)]).run()
    assert all(np.isfinite(r.finish_s) for r in lost.records)
    fin = {r.job.job_id: r.finish_s for r in lost.records}
    assert fin[0] > {r.job.job_id: r.finish_s for r in alive.records}[0]
    assert lost.type_gpu_seconds["a"] <= 400.0 + 1e-9

# ---------------------------------------------------------------------------------------- the gavel workload
TRACE = ("ResNet-18 (batch size 128)\tpython3 main.py --batch_size 128\timage_classification/cifar10\t--num_steps\t1\t"
         "3600\t1\t1\t-1.000000\t0\n"
         "LM (batch size 5)\tpython3 main.py --batch_size 5\tlanguage_modeling\t--steps\t1\t720\t2\t2\t-1\t400\n")


def gavel_trial(tmp_path, policy="max_min_fairness_perf", trace=TRACE, params=None):
    (tmp_path / "jobs.trace").write_text(trace)
    (tmp_path / "table.json").write_text(json.dumps({
        "v100": {"('ResNet-18 (batch size 128)', 1)": {"null": 2.0}, "('LM (batch size 5)', 2)": {"null": 1.0}},
        "k80": {"('ResNet-18 (batch size 128)', 1)": {"null": 0.5}, "('LM (batch size 5)', 2)": {"null": 0.2}}}))
    import yaml

    t = {"name": "g", "seed": 0, "policy": policy,
         "cluster": {"nic_gbps": 10, "intra_gbytes_per_s": 100,
                     "servers": [{"gpus": 2, "gpu_type": "v100"}, {"gpus": 2, "gpu_type": "k80"}]},
         "workload": {"kind": "gavel", "path": "jobs.trace", "throughputs": "table.json"},
         "policy_params": {policy: params or {}}}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(t))
    return tmp_path / "t.yaml"


def test_gavel_trace_runs_at_the_table_speeds(tmp_path):
    """Gavel's ten fields: the ResNet job (3,600 steps, 1 GPU, arrival 0) and the LM job (720 steps, 2 GPUs,
    weight 2, arrival 400 s). With an allocation at every round that sees a change, FIFO-perf puts the ResNet job on a V100 at the first round: 3,600 / 2 = 1,800 s.
    The LM job waits for the round at 720 s, when only the K80s have room for 2 GPUs (0.2 steps/s). The
    ResNet job ends at 1,800 s, itself a round boundary (completions come before the round's tick), and
    fifo_perf, starting afresh, moves the LM job to the V100s: 1,080 s x 0.2 = 216 steps done on the K80s,
    the other 504 at 1 step/s, finished at 2,304 s."""
    import pandas as pd

    from raytestbed.cli import main

    out = tmp_path / "out"
    trial = gavel_trial(tmp_path, "fifo_perf", params={"reset_interval_s": 0})
    assert main(["run", str(trial), "--out", str(out), "--quiet"]) == 0
    jobs = pd.read_csv(out / "jobs.csv").set_index("job_id")
    assert list(jobs["model"]) == ["ResNet-18 (batch size 128)", "LM (batch size 5)"]
    assert list(jobs["gpus"]) == [1, 2] and list(jobs["iterations"]) == [3600, 720]
    assert jobs.loc[0, "finish_s"] == pytest.approx(1800.0)
    assert jobs.loc[1, "arrival_s"] == 400.0
    assert jobs.loc[1, "first_start_s"] == 720.0
    assert jobs.loc[1, "finish_s"] == pytest.approx(1800.0 + 504.0)
    assert jobs.loc[1, "preemptions"] == 1


def test_gavel_allocation_waits_for_the_reset_interval(tmp_path):
    """Gavel's default: a new allocation at most every 1,920 s. The allocation made at 0 s has no LM job,
    so it waits for the first round at or after 1,920 s (2,160 s); the ResNet job is gone by then and the
    LM job takes the V100s: 720 steps at 1 step/s, finished at 2,880 s."""
    import pandas as pd

    from raytestbed.cli import main

    out = tmp_path / "out"
    assert main(["run", str(gavel_trial(tmp_path, "fifo_perf")), "--out", str(out), "--quiet"]) == 0
    jobs = pd.read_csv(out / "jobs.csv").set_index("job_id")
    assert jobs.loc[0, "finish_s"] == pytest.approx(1800.0)
    assert (jobs.loc[1, "first_start_s"], jobs.loc[1, "finish_s"]) == pytest.approx((2160.0, 2880.0))


def test_gavel_trace_bad_lines_are_one_line_errors(tmp_path, capsys):
    from raytestbed.cli import main

    bad = TRACE.replace("\t720\t2\t2\t", "\t720\t3\t2\t")  # LM at scale factor 3: not in the table
    assert main(["run", str(gavel_trial(tmp_path, trace=bad)), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "jobs.trace line 2: job type 'LM (batch size 5)' at scale factor 3 is not in the throughput table" in err
    short = TRACE.split("\n")[0].rsplit("\t", 1)[0] + "\n"
    assert main(["run", str(gavel_trial(tmp_path, trace=short)), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "jobs.trace line 1: 9 tab-separated fields, Gavel's trace format has 10" in capsys.readouterr().err


def test_fifo_gavel_draws_types_as_gavels_fifo_does(speeds_table):
    """Gavel's FIFO (base mode) draws each queued job's type with its own ``random.Random(seed)``:
    ``randrange`` over the types with room, sorted by name; the round's type order is shuffled by a
    separate generator (seeded ``seed + 5``). So with the same seed the k-th job draws what Gavel's k-th
    job draws. Eight 1-GPU jobs of 100 iterations (4/s on type a: 25 s, 1/s on b: 100 s) on 8 + 8 GPUs
    (cluster order b, a): every job has both types to choose from, and its finish time tells its type."""
    import random

    c = Cluster((Server(0, 8, GB, GB, gpu_type="b"), Server(1, 8, GB, GB, gpu_type="a")), 100 * GB)
    jobs = [job(i, 100, "fast-on-a") for i in range(8)]
    res = Simulator(c, jobs, make_policy("fifo_gavel", seed=3), speeds=GpuSpeeds(c, speeds_table)).run()
    got = ["a" if r.finish_s == pytest.approx(25.0) else "b" for r in sorted(res.records, key=lambda r: r.job.job_id)]
    rng = random.Random(3)
    assert got == [["a", "b"][rng.randrange(2)] for _ in range(8)]
