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


def test_a_pipeline_stage_takes_its_inbound_at_once_and_sends_one_after_the_other():
    """Eq. 5 as the emulator's stage workers have it: the coflows are the inbound transfers of
    stages 0, 3, ..., of stages 1, 4, ..., of stages 2, 5, ..., then the rings."""
    cl = ClusterConfig(nic_gbps=8.0, intra_gbytes_per_s=2.0, servers=[ServerGroup(count=4, gpus=2)]).build()
    a0, a1 = 6e6, 4e6  # activation bytes out of stages 0 and 1
    job = Job(0, 0.0, 10, (Stage(2, StageProfile(0.1, 0.2, a0, H)), Stage(1, StageProfile(0.1, 0.2, a1, H)),
                           Stage(1, StageProfile(0.1, 0.2, 0.0, H))), comm=CommPattern.PIPELINE)
    # stage 0 on servers 0 and 1 (one replica each), stage 1 on server 2, stage 2 on server 3
    tr = iteration_traffic(job, Placement(((0, 2), (4,), (6,))), cl)
    assert tr.coflows == (((2, 0, a0 / 2), (2, 1, a0 / 2)),  # into stage 0: gradients
                          ((0, 2, a0 / 2), (1, 2, a0 / 2), (3, 2, a1)),  # into stage 1: activations, gradients
                          ((2, 3, a1),),  # into stage 2: activations
                          ((0, 1, H), (1, 0, H)))  # the ring of stage 0: 2(k-1)h/k per hop, k = 2
    chain = Job(0, 0.0, 10, tuple(Stage(1, StageProfile(0.1, 0.2, a1, 0.0)) for _ in range(4)),
                comm=CommPattern.PIPELINE)
    # one replica per stage on servers 0..3: stages 0 and 3 take their inbound at once
    assert iteration_traffic(chain, Placement(((0,), (2,), (4,), (6,))), cl).coflows == (
        ((1, 0, a1), (2, 3, a1)), ((0, 1, a1), (2, 1, a1)), ((1, 2, a1), (3, 2, a1)))


@pytest.mark.parametrize("stages", [2, 3, 4, 5, 7])
def test_every_stage_has_its_inbound_and_each_send_in_different_coflows(stages):
    """Per stage (one per server here, so a server is a stage): all its inbound flows in one coflow,
    its activations out and its gradients out each in another one."""
    cl = ClusterConfig(nic_gbps=8.0, intra_gbytes_per_s=2.0, servers=[ServerGroup(count=stages, gpus=1)]).build()
    job = Job(0, 0.0, 10, tuple(Stage(1, StageProfile(0.1, 0.2, 1e6, 0.0)) for _ in range(stages)),
              comm=CommPattern.PIPELINE)
    cfs = iteration_traffic(job, Placement(tuple((s,) for s in range(stages))), cl).coflows
    where = {(a, b): i for i, cf in enumerate(cfs) for a, b, _ in cf}
    assert len(where) == 2 * (stages - 1)  # every transfer once
    for s in range(stages):
        inbound = {where[(n, s)] for n in (s - 1, s + 1) if 0 <= n < stages}
        outbound = [where[(s, n)] for n in (s + 1, s - 1) if 0 <= n < stages]
        assert len(inbound) == 1
        assert len(set(outbound)) == len(outbound) and inbound.isdisjoint(outbound)
