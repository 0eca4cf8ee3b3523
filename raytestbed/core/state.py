"""Mutable cluster state kept by a backend, and the read-only view policies get.

Both backends (simulator and emulator) keep one :class:`ClusterState` and apply
policy decisions through it, so placement validation and GPU bookkeeping exist
once. Policies only ever see a :class:`ClusterView`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.flows import Flows, FlowTable
from raytestbed.core.gpu_types import GpuSpeeds
from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.errors import PolicyError


@dataclass(slots=True)
class RunningJob:
    """A job holding GPUs.

    Attributes:
        job: the job (for elastic jobs, with its current number of workers).
        placement: its GPUs.
        start_s: when it (last) started, seconds.
        first_start_s: when it first started, seconds.
        iterations_done: iterations completed so far (fractional in analytic mode).
        iteration_time_s: current per-iteration time, seconds (model or measured).
        bytes_sent: bytes this job has put on the network so far.
        coflows_done: coflows of this job completed so far.
    """

    job: Job
    placement: Placement
    start_s: float
    first_start_s: float
    iterations_done: float = 0.0
    iteration_time_s: float = float("nan")
    bytes_sent: float = 0.0
    coflows_done: int = 0


@dataclass(frozen=True, slots=True)
class FlowInfo:
    """One flow of an active coflow, as network policies see it (bytes)."""

    flow_id: tuple
    src: int
    dst: int
    total_bytes: float
    remaining_bytes: float


@dataclass(frozen=True, slots=True)
class CoflowInfo:
    """An active (valid, unfinished) coflow of a job."""

    coflow_id: tuple
    job_id: int
    started_s: float
    flows: tuple[FlowInfo, ...]


@dataclass
class ClusterState:
    """Free GPUs, pending and running jobs of one backend.

    ``free_count`` is a numpy array (GPUs free per server); ``free`` holds the
    free GPU ids per server.
    """

    cluster: Cluster
    now: float = 0.0
    pending: dict[int, Job] = field(default_factory=dict)
    running: dict[int, RunningJob] = field(default_factory=dict)
    finished: dict[int, float] = field(default_factory=dict)  #: job id -> finish time
    lost_servers: set[int] = field(default_factory=set)
    coflows: dict[tuple, CoflowInfo] = field(default_factory=dict)
    #: called before a view hands out ``coflows``: lets a backend bring the remaining bytes up to
    #: date only when a policy reads them (the flow simulator does; None: ``coflows`` is always current)
    coflow_sync: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    #: the backend's own array table of the active flows (the flow simulator's); None: read ``coflows``
    flow_arrays: Callable[[], "Flows"] | None = field(default=None, repr=False, compare=False)
    _flow_table: "FlowTable | None" = field(default=None, repr=False, compare=False)
    #: per-type speeds of jobs (:mod:`raytestbed.core.gpu_types`); None: made from the cluster alone
    speeds: "GpuSpeeds | None" = field(default=None, repr=False, compare=False)
    #: job id -> iterations it has completed by now (the backend's count; None: running jobs'
    #: ``iterations_done``, 0 for the others)
    progress: Callable[[int], float] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        c = self.cluster
        if self.speeds is None:
            self.speeds = GpuSpeeds(c)
        self.free: list[set[int]] = [set(c.gpus_of(m)) for m in range(c.num_servers)]
        self.free_count = np.array([s.gpus for s in c.servers], dtype=np.int64)
        self.total_free = int(self.free_count.sum())

    # -- GPU bookkeeping -----------------------------------------------------
    def allocate(self, job: Job, placement: Placement) -> None:
        """Validate ``placement`` against the free GPUs and take them."""
        placement.validate(job, self.cluster)
        server_of, free = self.cluster.server_of, self.free
        gpus = placement.gpus
        servers = [server_of(g) for g in gpus]
        for g, m in zip(gpus, servers):
            if g not in free[m]:
                raise PolicyError(f"job {job.job_id}: GPU {g} (server {m}) is not free")
        for m in placement.ps_servers:
            if m in self.lost_servers:
                raise PolicyError(f"job {job.job_id}: PS server {m} is lost")
        free_count = self.free_count
        for g, m in zip(gpus, servers):
            free[m].discard(g)
            free_count[m] -= 1
        self.total_free -= len(gpus)

    def release(self, placement: Placement) -> None:
        """Return the GPUs of ``placement`` to the free pool (GPUs of lost servers stay out)."""
        c = self.cluster
        n = 0
        for g in placement.gpus:
            m = c.server_of(g)
            if m in self.lost_servers:
                continue
            self.free[m].add(g)
            self.free_count[m] += 1
            n += 1
        self.total_free += n

    def lose_server(self, server: int) -> None:
        """Remove a server's GPUs from the pool for good."""
        if server in self.lost_servers:
            return
        self.lost_servers.add(server)
        self.total_free -= len(self.free[server])
        self.free[server].clear()
        self.free_count[server] = 0

    def view(self) -> "ClusterView":
        return ClusterView(self)


class ClusterView:
    """What a policy may read about the cluster; it cannot change anything.

    Attributes are live: a view reflects the state at the time of the call.
    """

    __slots__ = ("_s",)

    def __init__(self, state: ClusterState) -> None:
        self._s = state

    @property
    def now(self) -> float:
        """Current time, seconds (emulated seconds in the emulator)."""
        return self._s.now

    @property
    def cluster(self) -> Cluster:
        return self._s.cluster

    @property
    def speeds(self) -> "GpuSpeeds":
        """Per-type speeds of jobs: ``speeds.throughput(job, gpu_type)`` (iterations/s alone on ``job.gpus``
        GPUs of that type), ``speeds.gpu_types``, ``speeds.factor(gpu_type)``
        (:mod:`raytestbed.core.gpu_types`). GPU types per server: ``cluster.servers[m].gpu_type``."""
        return self._s.speeds

    @property
    def free_count(self) -> np.ndarray:
        """GPUs free per server (a read-only copy-free view)."""
        v = self._s.free_count.view()
        v.setflags(write=False)
        return v

    @property
    def total_free(self) -> int:
        """Free GPUs summed over all servers."""
        return self._s.total_free

    def free_gpus(self, server: int) -> list[int]:
        """Free GPU ids of ``server``, ascending."""
        return sorted(self._s.free[server])

    @property
    def pending(self) -> Mapping[int, Job]:
        """Jobs that have arrived and hold no GPUs (new or preempted), by id."""
        return MappingProxyType(self._s.pending)

    @property
    def running(self) -> Mapping[int, RunningJob]:
        """Jobs holding GPUs, by id. Do not modify the records."""
        return MappingProxyType(self._s.running)

    @property
    def finished(self) -> Mapping[int, float]:
        """Finished job id -> finish time."""
        return MappingProxyType(self._s.finished)

    @property
    def lost_servers(self) -> frozenset[int]:
        return frozenset(self._s.lost_servers)

    def iterations_done(self, job_id: int) -> float:
        """Iterations job ``job_id`` has completed by now, as the backend counts them (running,
        preempted or finished; a preempted job resumes from here). A policy that budgets work
        reads progress here rather than from what it allocated."""
        s = self._s
        if s.progress is not None:
            return s.progress(job_id)
        rj = s.running.get(job_id)
        return rj.iterations_done if rj is not None else 0.0

    @property
    def coflows(self) -> Mapping[tuple, CoflowInfo]:
        """Active coflows (flow-level timing only), by coflow id."""
        sync = self._s.coflow_sync
        if sync is not None:
            sync()
        return MappingProxyType(self._s.coflows)

    def flows(self) -> "Flows":
        """Every flow of every active coflow as arrays (:mod:`raytestbed.core.flows`): the array
        interface for network policies. Read-only; a fresh table after every change."""
        s = self._s
        if s.flow_arrays is not None:
            return s.flow_arrays()
        if s._flow_table is None:
            s._flow_table = FlowTable()
        return s._flow_table.read(self)


class FreePool:
    """A policy's scratch copy of the free GPUs, for planning several starts in one call.

    Decisions are applied by the backend after ``on_event`` returns, so a policy
    that starts several jobs at once takes their GPUs from a pool first::

        pool = FreePool(view)
        gpus = pool.take(server, 2)

    Copy-on-write per server: creating a pool costs O(#servers).
    """

    def __init__(self, view: ClusterView) -> None:
        self._view = view
        self.free_count = view.free_count.copy()
        self.total_free = int(view.total_free)
        self._lists: dict[int, list[int]] = {}

    def free_gpus(self, server: int) -> list[int]:
        """Free GPU ids of ``server`` in this pool, ascending."""
        if server not in self._lists:
            self._lists[server] = self._view.free_gpus(server)
        return list(self._lists[server])

    def take(self, server: int, count: int) -> list[int]:
        """Remove and return the ``count`` lowest free GPUs of ``server``."""
        gpus = self.free_gpus(server)
        if count > len(gpus):
            raise ValueError(f"server {server} has {len(gpus)} free GPUs in the pool, asked {count}")
        self._lists[server] = gpus[count:]
        self.free_count[server] -= count
        self.total_free -= count
        return gpus[:count]
