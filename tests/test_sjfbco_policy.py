"""SJF-BCO and its baselines as policies in the simulator, and the ``sjfbco`` workload."""

from pathlib import Path

import numpy as np
import pytest

from raytestbed.config import load_trial
from raytestbed.core.cluster import Cluster, Server
from raytestbed.core.timing import SjfbcoModel, SjfbcoParams
from raytestbed.errors import ConfigError
from raytestbed.schedulers.base import available_policies, make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.registry import load_workload
from raytestbed.traces.datadir import find_data_dir
from raytestbed.traces.sjfbco_workload import PAPER_MIX, SjfbcoWorkloadParams, sjfbco_jobs

ROOT = Path(__file__).resolve().parents[1]
MODEL = dict(xi1=1.0, xi2_s=1e-4, degradation_alpha=1.0)


def mixed_cluster() -> Cluster:
    bw = 1.25e9
    return Cluster(tuple(Server(i, g, bw, bw) for i, g in enumerate([4, 8, 4, 16, 8])), 3e11)


def small_jobs(seed=0, arrivals="batch"):
    p = SjfbcoWorkloadParams(mix={1: 10, 2: 4, 4: 4, 8: 3, 16: 1}, durations="uniform", arrivals="batch",
                             comm_fraction=0.2)
    jobs = sjfbco_jobs(p, seed, 1.25e9, None)
    if arrivals == "spread":
        for j in jobs:
            j.arrival_s = float(j.job_id * 7.0)
    return jobs


def run(policy_name, jobs, cluster, mode="analytic", **params):
    pol = make_policy(policy_name, "placement", seed=1, horizon_s=1200, **MODEL, **params)
    sim = Simulator(cluster, jobs, pol, mode=mode, model=SjfbcoModel(SjfbcoParams(**MODEL)),
                    iterations_per_coflow=200)
    return pol, sim.run()


def test_policies_registered():
    pols = available_policies()
    for name in ("sjf-bco", "ff", "ls", "rand"):
        assert name in pols and pols[name].role == "placement"


@pytest.mark.parametrize("name", ["sjf-bco", "ff", "ls", "rand"])
def test_plan_executed_by_simulator_matches_estimate(name):
    cluster = mixed_cluster()
    jobs = small_jobs()
    pol, res = run(name, jobs, cluster)
    plan = pol.last_plan
    assert pol.replans == 1 and plan.feasible
    by_id = {r.job.job_id: r for r in res.records}
    for jid in plan.order:
        rec = by_id[jid]
        assert rec.first_start_s == pytest.approx(plan.starts[jid], abs=1e-6)
        assert rec.finish_s == pytest.approx(plan.finishes[jid], rel=1e-9, abs=1e-6)
        assert rec.servers == len({cluster.server_of(g) for g in plan.gpus[jid]})
    assert max(r.finish_s for r in res.records) == pytest.approx(plan.makespan)


def test_fixed_kappa_and_lambda_are_used():
    cluster = mixed_cluster()
    jobs = small_jobs(1)
    pol, res = run("sjf-bco", jobs, cluster, kappa=1, lam=4.0)
    assert pol.last_plan.kappa == 1
    assert all(np.isfinite(r.finish_s) for r in res.records)


def test_online_replans_on_arrivals_and_never_starts_early():
    cluster = mixed_cluster()
    jobs = small_jobs(2, arrivals="spread")
    pol, res = run("sjf-bco", jobs, cluster, replan_interval_s=1.0)
    assert pol.replans > 1
    for r in res.records:
        assert np.isfinite(r.finish_s)
        assert r.first_start_s >= r.job.arrival_s


def test_flow_mode_runs_the_same_plan_with_emergent_contention():
    cluster = mixed_cluster()
    jobs = small_jobs(3)
    pol, res = run("sjf-bco", jobs, cluster, mode="flow")
    plan = pol.last_plan
    assert all(np.isfinite(r.finish_s) for r in res.records)
    # the dispatch order is the plan's order (gang, no overtaking)
    starts = [next(r.first_start_s for r in res.records if r.job.job_id == j) for j in plan.order]
    assert starts == sorted(starts)


def test_bad_policy_params_are_policy_errors():
    from raytestbed.errors import PolicyError

    for bad in ({"horizon_s": 0}, {"lam": 0.5}, {"kappa": 0}, {"bisection": "x"}):
        with pytest.raises(PolicyError):
            make_policy("sjf-bco", "placement", **bad)


def test_workload_uniform_recipe_ranges():
    p = SjfbcoWorkloadParams(durations="uniform")
    jobs = sjfbco_jobs(p, 5, 1.25e9, None)
    assert len(jobs) == 160
    sizes = {}
    for j in jobs:
        sizes[j.gpus] = sizes.get(j.gpus, 0) + 1
        tau = j.stages[0].profile.compute_s
        assert 0.01 <= tau <= 0.05 and 1000 <= j.iterations <= 6000
        assert 50 <= tau * j.iterations <= 300
        assert j.arrival_s == 0.0 and j.num_stages == 1
        if j.gpus > 1:  # alone on two servers, the ring exchange is comm_fraction of the compute
            m = j.stages[0].profile.param_bytes
            assert 2 * (j.gpus - 1) / j.gpus * m / 1.25e9 == pytest.approx(0.025 * tau)
    assert sizes == PAPER_MIX
    again = sjfbco_jobs(p, 5, 1.25e9, None)
    assert [(j.gpus, j.iterations) for j in again] == [(j.gpus, j.iterations) for j in jobs]


def test_workload_bad_params_are_one_line_errors(tmp_path):
    cluster = mixed_cluster()
    with pytest.raises(ConfigError, match="mix"):
        load_workload("sjfbco", {"mix": {0: 3}}, cluster, 0, tmp_path)
    with pytest.raises(ConfigError, match="rho_range"):
        load_workload("sjfbco", {"rho_range": [300, 50], "durations": "uniform"}, cluster, 0, tmp_path)
    with pytest.raises(ConfigError, match="Philly"):
        load_workload("sjfbco", {"data_dir": str(tmp_path / "none")}, cluster, 0, tmp_path)


PHILLY_DATA = find_data_dir(rel="philly-jobs-rfold/philly_trace.csv")  # the data folder holding it, or None
needs_data = pytest.mark.skipif(PHILLY_DATA is None,
                                reason="Philly data not available (raytestbed data fetch philly-jobs-rfold)")


@needs_data
def test_workload_philly_durations_and_arrivals():
    p = SjfbcoWorkloadParams(arrivals="philly")
    jobs = sjfbco_jobs(p, 0, 1.25e9, PHILLY_DATA)
    assert len(jobs) == 160
    rho = np.array([j.stages[0].profile.compute_s * j.iterations for j in jobs])
    assert rho.min() >= 50 - 1 and rho.max() <= 300 + 1
    assert np.std(rho) > 10  # spread, not a constant
    arr = sorted(j.arrival_s for j in jobs)
    assert arr[0] == 0.0 and arr[-1] > 0


@needs_data
def test_paper_trial_file_loads():
    loaded = load_trial(ROOT / "workloads" / "trials" / "sjfbco_paper.yaml")
    cluster = loaded.cluster_config.build()
    assert cluster.num_servers == 20
    wl = loaded.trial.workload.model_dump()
    jobs = load_workload(wl.pop("kind"), wl, cluster, 0, loaded.base_dir)
    assert sorted({j.gpus for j in jobs}) == [1, 2, 4, 8, 16, 32]
