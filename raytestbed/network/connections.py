"""Which transfers share a connection: the rule both backends' fabrics use.

A connection is one flow of the max-min allocator (:mod:`raytestbed.network.allocator`) whose rate
its member transfers split equally (processor sharing), as one TCP-like connection carries every
message between two hosts. Transfers of one job and coflow between the same two servers share one;
inside a server each GPU pair is its own (``B_intra`` is point-to-point, a per-connection cap);
with NICs reserved per GPU (A-SRPT §III-A's model, the emulator's ``nic_share: reserved``) every GPU
pair across servers is its own too.
"""

from __future__ import annotations

from collections.abc import Hashable

from raytestbed.core.cluster import Cluster


def connection_key(cluster: Cluster, job_id: int, coflow: Hashable | None, src_gpu: int, dst_gpu: int,
                   per_gpu_pair: bool = False) -> tuple:
    """The key of the connection a transfer of ``job_id``'s ``coflow`` from ``src_gpu`` to ``dst_gpu``
    joins: ``("intra", job, coflow, src_gpu, dst_gpu)`` inside a server, ``("inter", job, coflow,
    src server, dst server)`` across servers (``+ (src_gpu, dst_gpu)`` with ``per_gpu_pair``)."""
    s, d = cluster.server_of(src_gpu), cluster.server_of(dst_gpu)
    if s == d:
        return ("intra", job_id, coflow, src_gpu, dst_gpu)
    if per_gpu_pair:
        return ("inter", job_id, coflow, s, d, src_gpu, dst_gpu)
    return ("inter", job_id, coflow, s, d)
