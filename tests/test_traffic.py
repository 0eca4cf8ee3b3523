"""Per-iteration traffic (network/traffic.py): same-server hops are one flow per GPU pair."""

from __future__ import annotations

import pytest

from raytestbed.config import ClusterConfig, ServerGroup
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.network.traffic import iteration_traffic

H = 40e6  # parameter bytes of the stage


def _cluster():
    return ClusterConfig(nic_gbps=8.0, intra_gbytes_per_s=2.0,
                         servers=[ServerGroup(count=2, gpus=4)]).build()


def _rar(k: int) -> Job:
    return Job(0, 0.0, 10, (Stage(k, StageProfile(0.1, 0.2, 0.0, H)),), comm=CommPattern.RAR)


def test_ring_inside_one_server_is_one_flow_per_hop():
    cl = _cluster()
    tr = iteration_traffic(_rar(4), Placement(((0, 1, 2, 3),)), cl)
    (cf,) = tr.coflows
    assert len(cf) == 4  # four hops, not one merged flow
    assert all(s == d == 0 for s, d, _ in cf)
    assert all(b == pytest.approx(2 * 3 * H / 4) for *_, b in cf)


def test_cross_server_hops_are_merged_per_server_pair():
    cl = _cluster()
    # ring 0 -> 1 -> 4 -> 5 -> 0: two intra hops, one hop each way between the servers
    tr = iteration_traffic(_rar(4), Placement(((0, 1, 4, 5),)), cl)
    (cf,) = tr.coflows
    hop = 2 * 3 * H / 4
    assert sorted(cf) == sorted([(0, 0, hop), (1, 1, hop), (0, 1, hop), (1, 0, hop)])


def test_flow_mode_ring_inside_a_server_takes_one_hop_time():
    """Simulator, flow timing: a 4-GPU ring in one server needs 2(k-1)h/(k B_intra) per iteration."""
    from raytestbed.schedulers.base import make_policy
    from raytestbed.sim.engine import Simulator

    cl = _cluster()
    job = _rar(4)
    (rec,) = Simulator(cl, [job], make_policy("fifo", "placement", 0), mode="flow").run().records
    assert rec.servers == 1
    jct = rec.finish_s - rec.job.arrival_s
    want = 10 * (0.3 + 2 * 3 * H / 4 / cl.intra_bps)
    assert jct == pytest.approx(want, rel=1e-6)


def test_a_multi_stage_pipeline_has_no_coflow_sequence():
    """The flow simulator runs pipelines of two or more stages replica by replica (tests/test_pipeline_workers.py)."""
    cl = ClusterConfig(nic_gbps=8.0, intra_gbytes_per_s=2.0, servers=[ServerGroup(count=4, gpus=2)]).build()
    job = Job(7, 0.0, 10, (Stage(2, StageProfile(0.1, 0.2, 6e6, H)), Stage(1, StageProfile(0.1, 0.2, 0.0, H))),
              comm=CommPattern.PIPELINE)
    with pytest.raises(ValueError, match="job 7: a pipeline of 2 stages"):
        iteration_traffic(job, Placement(((0, 2), (4,))), cl)
