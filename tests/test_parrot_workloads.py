"""Parrot's workloads (ms60, ms60_poisson, fb_coflow) and random distinct placement."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from raytestbed.config import ClusterConfig, ServerGroup
from raytestbed.errors import ConfigError
from raytestbed.network.traffic import iteration_traffic
from raytestbed.core.events import JobArrived, StartJob
from raytestbed.schedulers.base import make_policy
from raytestbed.core.state import ClusterState
from raytestbed.sim.engine import Simulator
from raytestbed.traces.datadir import find_data_dir
from raytestbed.traces.parrot_workloads import FB_FILE, MS60_FILE
from raytestbed.traces.registry import load_workload

DATA = find_data_dir([Path(__file__).parent])
needs_data = pytest.mark.skipif(DATA is None or not DATA.joinpath(*MS60_FILE).is_file(), reason="shared data absent")


def cluster(servers=128, gbps=10.0):
    return ClusterConfig(nic_gbps=gbps, intra_gbytes_per_s=300, servers=[ServerGroup(count=servers, gpus=8)]).build()


@needs_data
def test_ms60_jobs_and_random_flows():
    cl = cluster()
    jobs = load_workload("ms60", {"iteration_scale": 0.01}, cl, 3, Path("."))
    assert len(jobs) == 60
    assert sorted({j.gpus for j in jobs}) == [2, 4, 8, 16]  # trace GPUs x 2
    assert all(j.num_ps == j.gpus for j in jobs)
    lmax = max(j.traffic.max_flow_bytes for j in jobs)
    assert lmax == pytest.approx(1000e6)
    # placement: every worker and PS on its own server, flows U(0, L] fresh per coflow
    fifo = make_policy("fifo", "placement", 3, spread="random")
    st = ClusterState(cl)
    job = max(jobs, key=lambda j: j.gpus)
    st.pending[job.job_id] = job
    (start,) = fifo.on_event(JobArrived(0.0, job), st.view())
    assert isinstance(start, StartJob)
    servers = [cl.server_of(g) for g in start.placement.gpus] + list(start.placement.ps_servers)
    assert len(set(servers)) == len(servers) == 32
    tr = iteration_traffic(job, start.placement, cl)
    push0, push1 = tr.coflow(0, 0), tr.coflow(1, 0)
    assert len(push0) == 16 * 16
    sizes = np.array([b for _, _, b in push0])
    assert 0 < sizes.min() and sizes.max() <= job.traffic.max_flow_bytes
    assert sizes.std() > 0.2 * job.traffic.max_flow_bytes  # roughly uniform
    assert [b for *_, b in push1] != list(sizes)  # fresh per coflow
    assert tr.coflow(0, 0) == push0  # but deterministic


@needs_data
def test_ms60_variants():
    cl = cluster()
    pj = load_workload("ms60_poisson", {"jobs": 100, "mean_gap_s": 0.5}, cl, 1, Path("."))
    gaps = np.diff([j.arrival_s for j in pj])
    assert len(pj) == 100 and 0.3 < gaps.mean() < 0.7
    dj = load_workload("ms60", {"ps_max": 4}, cl, 1, Path("."))
    assert {j.num_ps for j in dj} <= {1, 2, 3, 4} and len({j.num_ps for j in dj}) > 1
    with pytest.raises(ConfigError, match="iteration_scale"):
        load_workload("ms60", {"iteration_scale": 0}, cl, 1, Path("."))


@needs_data
def test_ms60_small_run_lower_bound_and_parrot_pair():
    cl = cluster()
    jobs = load_workload("ms60", {"iteration_scale": 0.002, "limit": 8, "arrival_scale": 0.002}, cl, 1, Path("."))
    totals = {}
    for name in ("parrot", "aalo"):
        res = Simulator(cl, jobs, make_policy("fifo", "placement", 1, spread="random"),
                        make_policy(name, "network"), mode="flow").run()
        jct = [r.finish_s - r.job.arrival_s for r in res.records]
        lb = [r.lower_bound_s for r in res.records]
        assert all(j >= b * (1 - 1e-9) for j, b in zip(jct, lb))  # no job beats its lower bound
        totals[name] = sum(jct)
    assert all(np.isfinite(list(totals.values())))


@needs_data
def test_fb_coflow_jobs():
    fb = DATA.joinpath(*FB_FILE)
    if not fb.is_file():
        pytest.skip("FB data absent")
    jobs = load_workload("fb_coflow", {"limit": 5}, cluster(150), 1, Path("."))
    assert [j.job_id for j in jobs] == [1, 2, 3, 4, 5]
    # coflow 2: arrival 10833 ms, 2 mappers, reducer 140 gets 48 MB -> 24 MB from each mapper
    j2 = jobs[1]
    assert j2.arrival_s == pytest.approx(10.833)
    (cf,) = j2.traffic.coflows
    assert sum(b for _, _, b in cf) == pytest.approx(48e6)
    with pytest.raises(ConfigError, match="150 ports"):
        load_workload("fb_coflow", {"limit": 5}, cluster(128), 1, Path("."))
