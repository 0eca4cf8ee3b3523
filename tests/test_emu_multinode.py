"""Attach to a 2-node Ray cluster (ray.cluster_utils.Cluster) and spread emulated servers by resources.

Marked slow (~25 s on the 2-core host): run with `pytest -m slow tests/test_emu_multinode.py`.
"""

import os

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.cluster_utils")

from raytestbed.core.cluster import Cluster  # noqa: E402
from raytestbed.emu.cluster import EmuCluster  # noqa: E402
from raytestbed.emu.raysession import local_cluster  # noqa: E402


@pytest.fixture
def two_nodes():
    assert not ray.is_initialized()
    # A session token in the environment: every node shares it, nothing is written under $HOME.
    with local_cluster(nodes=2, cpus_per_node=1, emu_gpus_per_node=2) as c:
        yield c


@pytest.mark.slow
def test_servers_spread_over_both_nodes_by_resources(two_nodes):
    cluster = Cluster.homogeneous(2, 2, 1.25e9, 300e9)
    with EmuCluster(cluster, address=two_nodes.address) as emu:
        nodes = emu.server_nodes()
        assert len(set(nodes.values())) == 2  # each node has room for one 2-GPU server only
        info = ray.get([emu.server_actor(m).info.remote() for m in range(2)])
        assert {i["server_id"]: i["node_id"] for i in info} == nodes

        @ray.remote
        class Worker:
            def node(self):
                return ray.get_runtime_context().get_node_id()

        ws = [Worker.options(**emu.worker_options(g)).remote() for g in range(4)]
        got = ray.get([w.node.remote() for w in ws])
        assert got == [nodes[cluster.server_of(g)] for g in range(4)]
        # a job whose two workers sit on different nodes runs on the one virtual clock
        from raytestbed.core.placement import Placement
        from raytestbed.core.profile import default_profiles
        from raytestbed.emu.executors import start_job
        from raytestbed.traces.jobs import build_job

        run = start_job(emu, build_job(1, 0.0, default_profiles()["mlp-tiny"], 2, "rar", 5), Placement(((0, 2),)),
                        iterations=5)
        assert run.wait(120) and run.failure is None and run.iterations_done == 5
    assert not ray.is_initialized() or os.environ.get("RAY_ADDRESS") is None
