"""Cluster and topology: servers with GPUs, NICs and optional racks.

GPU ids are global integers: server ``m`` owns the contiguous range
``cluster.gpus_of(m)``. Links are identified by tuples:

* ``("egress", m)`` / ``("ingress", m)``: server m's NIC, outgoing / incoming side
  (bytes/s); a NIC is full duplex, so both directions have their own capacity.
* ``("rack_up", r)`` / ``("rack_down", r)``: rack r's ToR-to-core uplink and the
  core-to-ToR downlink, present only when racks are configured (GADGET's two-tier
  fat-tree).

Traffic between two GPUs of one server does not touch any link: it is limited
per flow by the intra-server bandwidth ``intra_bps`` (point-to-point NVLink/PCIe,
A-SRPT's B_intra), so intra-server flows do not contend with each other.

Every server has one GPU type (``Server.gpu_type``, :data:`DEFAULT_GPU_TYPE` unless the
cluster file names one, e.g. ``v100``); ``Cluster.gpu_speed`` holds optional per-type compute
speed factors relative to the model profiles (how fast a job runs on a type:
:mod:`raytestbed.core.gpu_types`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

import numpy as np

LinkId = tuple[str, int]

#: the GPU type of a server whose cluster file names none (the speed of the model profiles)
DEFAULT_GPU_TYPE = "default"


class NotIdenticalServers(ValueError):
    """Something that assumes identical servers (g GPUs each) met a cluster whose servers differ."""


@dataclass(frozen=True, slots=True)
class Server:
    """One GPU server.

    Attributes:
        server_id: index 0..M-1.
        gpus: number of GPUs g_m.
        nic_egress_bps: outgoing NIC capacity, bytes/s.
        nic_ingress_bps: incoming NIC capacity, bytes/s.
        rack: rack index, or None for a flat (non-blocking switch) cluster.
        memory_gb: host memory, for multi-resource policies (GADGET); informational.
        gpu_type: the type of all its GPUs (e.g. ``v100``; :data:`DEFAULT_GPU_TYPE` if unnamed).
    """

    server_id: int
    gpus: int
    nic_egress_bps: float
    nic_ingress_bps: float
    rack: int | None = None
    memory_gb: float = 0.0
    gpu_type: str = DEFAULT_GPU_TYPE


@dataclass(frozen=True, slots=True)
class Rack:
    """A rack's uplink/downlink to the core tier, bytes/s."""

    rack_id: int
    uplink_bps: float
    downlink_bps: float


@dataclass(frozen=True)
class Cluster:
    """An immutable cluster description shared by policies and backends.

    Attributes:
        servers: the servers, indexed by ``server_id``.
        intra_bps: GPU-to-GPU bandwidth inside a server (B_intra), bytes/s.
        racks: rack uplinks, empty for a flat cluster.
        name: label used in reports.
        gpu_speed: per-type compute speed factors ``((type, factor), ...)``: a job's profiled
            compute time divided by the factor is its time on that type (types not listed: 1).
    """

    servers: tuple[Server, ...]
    intra_bps: float
    racks: tuple[Rack, ...] = ()
    name: str = "cluster"
    gpu_speed: tuple[tuple[str, float], ...] = ()
    _gpu_offset: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _gpu_server: np.ndarray = field(init=False, repr=False, compare=False)
    _server_of: tuple[int, ...] = field(init=False, repr=False, compare=False)  #: GPU id -> server id
    _g: int | None = field(init=False, repr=False, compare=False)  #: cached gpus_per_server (None: servers differ)
    _nic: float = field(init=False, repr=False, compare=False)  #: cached nic_bps

    def __post_init__(self) -> None:
        if not self.servers:
            raise ValueError("a cluster needs at least one server")
        for i, s in enumerate(self.servers):
            if s.server_id != i:
                raise ValueError(f"server ids must be 0..M-1 in order; got {s.server_id} at {i}")
            if s.gpus < 0:
                raise ValueError(f"server {i}: gpus must be >= 0")
            if not (s.nic_egress_bps > 0 and s.nic_ingress_bps > 0):
                raise ValueError(f"server {i}: NIC bandwidth must be > 0")
        if not self.intra_bps > 0:
            raise ValueError("intra-server bandwidth must be > 0")
        rack_ids = {r.rack_id for r in self.racks}
        for s in self.servers:
            if s.rack is not None and s.rack not in rack_ids:
                raise ValueError(f"server {s.server_id}: unknown rack {s.rack}")
        offsets = np.concatenate([[0], np.cumsum([s.gpus for s in self.servers])]).astype(int)
        object.__setattr__(self, "_gpu_offset", tuple(int(x) for x in offsets))
        object.__setattr__(
            self, "_gpu_server", np.repeat(np.arange(len(self.servers)), [s.gpus for s in self.servers])
        )
        self._gpu_server.setflags(write=False)
        object.__setattr__(self, "_server_of", tuple(int(m) for m in self._gpu_server))
        for t, f in self.gpu_speed:
            if not (f > 0 and f < float("inf")):
                raise ValueError(f"gpu_speed of type {t!r} must be a positive number, got {f!r}")
        counts = {s.gpus for s in self.servers}
        object.__setattr__(self, "_g", counts.pop() if len(counts) == 1 else None)
        object.__setattr__(self, "_nic", min(min(s.nic_egress_bps, s.nic_ingress_bps) for s in self.servers))

    # -- sizes -------------------------------------------------------------
    @property
    def num_servers(self) -> int:
        return len(self.servers)

    @property
    def total_gpus(self) -> int:
        return self._gpu_offset[-1]

    @property
    def gpus_per_server(self) -> int:
        """g, the GPUs of every server; raises if servers differ (A-SRPT assumes identical servers)."""
        if self._g is None:
            counts = sorted({s.gpus for s in self.servers})
            raise NotIdenticalServers(f"cluster {self.name!r} has servers of {', '.join(map(str, counts))} GPUs "
                                      f"(g, the GPUs of every server, is undefined)")
        return self._g

    @property
    def identical_servers(self) -> bool:
        """True when every server has the same GPU count (A-SRPT's g is defined)."""
        return self._g is not None

    def gpus_of_server(self) -> dict[int, int]:
        """Server id -> its GPU count g_m."""
        return {s.server_id: s.gpus for s in self.servers}

    @property
    def nic_bps(self) -> float:
        """B_inter: the NIC bandwidth (min over servers and directions), bytes/s."""
        return self._nic

    # -- GPU types -------------------------------------------------------------
    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The GPU types of the servers, in order of first appearance."""
        return tuple(dict.fromkeys(s.gpu_type for s in self.servers))

    @property
    def heterogeneous(self) -> bool:
        """True when servers differ in GPU count or GPU type."""
        return self._g is None or len(self.gpu_types) > 1

    def gpu_type_of(self, gpu: int) -> str:
        """The type of global GPU ``gpu``."""
        return self.servers[self.server_of(gpu)].gpu_type

    def gpus_by_type(self) -> dict[str, int]:
        """GPU type -> GPUs of that type in the cluster."""
        out: dict[str, int] = {}
        for s in self.servers:
            out[s.gpu_type] = out.get(s.gpu_type, 0) + s.gpus
        return out

    def speed_factor(self, gpu_type: str) -> float:
        """The compute speed factor of ``gpu_type`` relative to the model profiles (1 if not given)."""
        return dict(self.gpu_speed).get(gpu_type, 1.0)

    # -- GPUs ----------------------------------------------------------------
    def gpus_of(self, server: int) -> range:
        """Global GPU ids of ``server``."""
        return range(self._gpu_offset[server], self._gpu_offset[server + 1])

    def server_of(self, gpu: int) -> int:
        """The server that holds global GPU ``gpu``."""
        return self._server_of[gpu]

    @property
    def gpu_server(self) -> np.ndarray:
        """Read-only array: global GPU id -> server id."""
        return self._gpu_server

    # -- links -------------------------------------------------------------
    def link_capacities(self) -> dict[Hashable, float]:
        """Every link of the topology and its capacity in bytes/s."""
        caps: dict[Hashable, float] = {}
        for s in self.servers:
            caps[("egress", s.server_id)] = s.nic_egress_bps
            caps[("ingress", s.server_id)] = s.nic_ingress_bps
        for r in self.racks:
            caps[("rack_up", r.rack_id)] = r.uplink_bps
            caps[("rack_down", r.rack_id)] = r.downlink_bps
        return caps

    def path(self, src: int, dst: int) -> tuple[LinkId, ...]:
        """Links crossed by traffic from server ``src`` to server ``dst``.

        Empty for ``src == dst`` (intra-server traffic, capped by ``intra_bps``).
        """
        if src == dst:
            return ()
        a, b = self.servers[src], self.servers[dst]
        if a.rack is None or b.rack is None or a.rack == b.rack:
            return (("egress", src), ("ingress", dst))
        return (("egress", src), ("rack_up", a.rack), ("rack_down", b.rack), ("ingress", dst))

    # -- construction helpers ------------------------------------------------
    @classmethod
    def homogeneous(
        cls,
        servers: int,
        gpus_per_server: int,
        nic_bps: float,
        intra_bps: float,
        name: str = "cluster",
    ) -> "Cluster":
        """M identical servers with g GPUs and a symmetric NIC (the A-SRPT cluster)."""
        return cls(
            servers=tuple(Server(i, gpus_per_server, nic_bps, nic_bps) for i in range(servers)),
            intra_bps=intra_bps,
            name=name,
        )
