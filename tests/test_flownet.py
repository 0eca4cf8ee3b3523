"""The flow simulator's flow arrays (sim/flownet.py): flows that reach their threshold while at rate 0; the
table policies read."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from raytestbed.config import ClusterConfig, ServerGroup
from raytestbed.sim.flownet import FlowNet

GB = 1e9


def _net() -> FlowNet:
    cl = ClusterConfig(name="t", nic_gbps=8, intra_gbytes_per_s=100, servers=[ServerGroup(count=3, gpus=1)]).build()
    return FlowNet(cl, [SimpleNamespace(job_id=0, arrival_s=0.0), SimpleNamespace(job_id=1, arrival_s=1.0)])


def test_a_flow_added_below_its_threshold_ends_at_the_next_step_even_at_rate_0():
    net = _net()
    net.add_coflow(0, (0, 0, 0), np.array([0, 1]), np.array([1, 2]), np.array([1e-7, GB]), 0.0)
    net.set_policy_rates({(0, 0, 0, 0): 0.0, (0, 0, 0, 1): 0.5 * GB})
    net.reallocate()
    assert net.next_completion() == 2.0  # the big flow alone moves
    assert net.complete() == []
    assert len(net) == 1  # the tiny flow ended although it never moved


def test_a_flow_that_reached_its_threshold_before_its_rate_went_to_0_still_ends():
    net = _net()
    net.add_coflow(0, (0, 0, 0), np.array([0]), np.array([1]), np.array([GB]), 0.0)
    net.add_coflow(1, (1, 0, 0), np.array([0]), np.array([2]), np.array([4 * GB]), 0.0)
    net.reallocate()
    assert net.complete() == []
    t = net.next_completion()  # job 0's flow: 1 GB at half of the 1 GB/s egress port
    assert abs(t - 2.0) < 1e-12
    net.advance(t)
    net.set_policy_rates({(0, 0, 0, 0): 0.0, (1, 0, 0, 0): GB})  # decided before the completion step
    net.reallocate()
    assert net.complete() == [0]  # job 0's coflow has no flow left
    assert len(net) == 1
    assert abs(dict(net.take_sent())[0] - GB) < 1e-3


def test_the_table_a_policy_reads_follows_the_bytes_and_the_rows():
    """Between row changes the table keeps its row layout and shows the bytes left and sent now; a new
    coflow's rows show at once (the parts that bytes do not move are kept per set of rows)."""
    net = _net()
    net.add_coflow(0, (0, 0, 0), np.array([0, 1]), np.array([1, 2]), np.array([GB, 2 * GB]), 0.0)
    net.reallocate()
    first = net.table({0: 0.0})
    assert first.remaining.tolist() == [GB, 2 * GB] and first.job_sent.tolist() == [0.0]
    net.advance(0.5)  # each flow at 1 GB/s for 0.5 s
    later = net.table({0: 123.0})
    assert later.remaining.tolist() == [0.5 * GB, 1.5 * GB] and later.job_sent.tolist() == [123.0]
    assert first.remaining.tolist() == [GB, 2 * GB]  # a table read before keeps its bytes
    assert list(later.flow_ids) == list(first.flow_ids) and later.inc_link.tolist() == first.inc_link.tolist()
    net.add_coflow(1, (1, 0, 0), np.array([2]), np.array([0]), np.array([4 * GB]), 0.5)
    both = net.table({0: 123.0, 1: 0.0})
    assert both.coflow_ids == [(0, 0, 0), (1, 0, 0)] and both.remaining.tolist() == [0.5 * GB, 1.5 * GB, 4 * GB]
    assert both.cf.tolist() == [0, 0, 1] and len(both.inc_flow) > len(later.inc_flow)
