"""EmuCluster: an emulated GPU cluster on Ray — placement groups, ServerActors, worker pool, one clock actor.

For every emulated server ``m`` a placement group (strategy ``STRICT_PACK``,
so the whole server lands on one Ray node) holds its GPUs as the custom
resource ``emu_gpu``: one bundle per *GPU group* of ``gpus_per_actor`` GPUs
(default 1 GPU per bundle).  Ray places the groups on nodes by their free
``emu_gpu`` resources, so on a multi-node cluster the emulated servers
spread over the real nodes.  A :class:`~raytestbed.emu.server.ServerActor`
sits in bundle 0; the jobs' GPU workers run inside the worker pool's long-lived
host actors (:mod:`.pool`), one per GPU group, in the group's bundle (or, with
``workers="clock"``, inside the clock actor's own process).

The **clock actor** (:mod:`.clock_actor`, running :mod:`.clock_service`) holds the virtual clock, the fluid
fabric and the runs; in a trial also the scheduler. Killing a server removes
its placement group, which kills its host actors (its workers and PS tasks),
and tells the clock, which fails the runs on it.

Units: bandwidths in the core ``Cluster`` are bytes/s; every time is emulated
seconds on the virtual clock (docs/emulator.md).
"""

from __future__ import annotations

import math

from raytestbed.core.cluster import Cluster
from raytestbed.emu import raysession
from raytestbed.emu.clock_actor import clock_actor_class
from raytestbed.emu.clock_service import DEFAULT_REPLAY_PAYLOAD
from raytestbed.emu.fastforward import FastForward
from raytestbed.emu.fluid import NIC_SHARES
from raytestbed.emu.pool import WorkerPool
from raytestbed.emu.raysession import RaySession
from raytestbed.emu.server import ServerActor
from raytestbed.errors import ConfigError, ServerLostError

# Ray is imported inside the methods that use it: this module (and ``emulator_missing``'s check) imports
# without it, and Ray alone imports in 3.8 s (python -X importtime, 2-core host at load 20).

RESOURCE = "emu_gpu"
WORKER_LAYOUTS = ("pool", "clock")  #: where runs' participants live: the worker pool's hosts, or the clock actor


def open_ray(cluster: Cluster, **opts) -> RaySession:
    """Ray for emulating ``cluster``: :meth:`RaySession.open` with ``opts`` (``address``, ``auth``, ``host``,
    ``start_timeout_s``, ``ray_opts``), a local Ray offering one ``emu_gpu`` resource per emulated GPU
    (an :class:`EmuCluster`, or a comparison's runs sharing one Ray)."""
    return RaySession.open(resources={RESOURCE: float(cluster.total_gpus)}, **opts)


class EmuCluster:
    """An emulated cluster on Ray (see module docstring).

    Args:
        cluster: the core cluster description.
        address: Ray cluster to attach to (else ``RAY_ADDRESS``, else a local Ray on 127.0.0.1).
        gpus_per_actor: GPUs per placement-group bundle / host process (None = 1).
        auth: Ray token authentication, ``"session"`` | ``"disabled"`` | ``"inherit"`` (raysession.py).
        host: bind address of a local Ray (default 127.0.0.1).
        ready_timeout_s: wall seconds to wait for placement groups and actors (default: the larger of
            60 + 2 per server and the start-up timeout).
        start_timeout_s: wall seconds each stage of Ray's start-up may take (None:
            ``$RAYTESTBED_RAY_START_TIMEOUT_S``, else 180; :func:`raytestbed.emu.raysession.start_timeout_s`).
        nic_share: how the fabric shares a NIC: ``"fair"`` (weighted max-min) or ``"reserved"`` (every
            GPU owns NIC / g, A-SRPT's model; :mod:`raytestbed.emu.fluid`).
        fast_forward: a :class:`~raytestbed.emu.fastforward.FastForward` (default: on).
        pace: at most this many emulated seconds per wall second (a live demo); None: unpaced.
        replay_payload_bytes: replay: the largest buffer that really moves per transfer (None: the
            profiled size; default 1 MiB); emulated times do not depend on it.
        workers: where runs' workers and PS tasks live: ``"pool"`` (the worker pool's host actors, one
            per GPU group; their steps reach the clock actor through Ray) or ``"clock"`` (plain objects
            in the clock actor's process, as in-process tests run them: no pool is started and no message
            crosses processes; replay compute). Emulated times do not depend on it.
        **ray_opts: passed to ``ray.init`` (``num_cpus``, ``object_store_memory``, ...).
    """

    def __init__(self, cluster: Cluster, *, address: str | None = None, gpus_per_actor: int | None = None,
                 auth: str | None = None, host: str = "127.0.0.1", ready_timeout_s: float | None = None,
                 nic_share: str = "fair", fast_forward: FastForward | None = None, pace: float | None = None,
                 replay_payload_bytes: int | None = DEFAULT_REPLAY_PAYLOAD, start_timeout_s: float | None = None,
                 workers: str = "pool", **ray_opts) -> None:
        import ray
        from ray.util.placement_group import placement_group

        if nic_share not in NIC_SHARES:
            raise ConfigError(f"emulator: nic_share must be one of {', '.join(NIC_SHARES)}, got {nic_share!r}")
        self.nic_share = nic_share
        if gpus_per_actor is not None and not (isinstance(gpus_per_actor, int) and gpus_per_actor >= 1):
            raise ConfigError(f"emulator: gpus_per_actor must be an integer >= 1, got {gpus_per_actor!r}")
        if workers not in WORKER_LAYOUTS:
            raise ConfigError(f"emulator: workers must be one of {', '.join(WORKER_LAYOUTS)}, got {workers!r}")
        self.workers = workers
        if pace is not None and not (math.isfinite(pace) and pace > 0):
            raise ConfigError(f"emulator: pace must be a number > 0 (emulated s per wall s), got {pace!r}")
        self.cluster = cluster
        self.pace = pace
        self.gpus_per_actor = gpus_per_actor or 1
        start_timeout_s = raysession.start_timeout_s(start_timeout_s)
        if ready_timeout_s is None:
            ready_timeout_s = max(60.0 + 2.0 * cluster.num_servers, start_timeout_s)

        self._session = open_ray(cluster, address=address, auth=auth, host=host, start_timeout_s=start_timeout_s,
                                 **ray_opts)
        self._pgs: list = []
        self.servers: list = []
        self._watch: dict = {}
        self._alive: set[int] = set(range(cluster.num_servers))
        self._lost_reported: set[int] = set()
        self.pool = None
        self.clock = None
        try:
            have = ray.cluster_resources().get(RESOURCE, 0.0)
            if have + 1e-9 < cluster.total_gpus:
                raise ConfigError(
                    f"emulator: the Ray cluster offers {have:g} '{RESOURCE}' resources but the emulated cluster "
                    f"'{cluster.name}' needs {cluster.total_gpus}; start each node with "
                    f"ray start --resources '{{\"{RESOURCE}\": N}}'")
            # GPU groups and placement groups, one per server.
            self.gpu_groups: list[tuple[int, ...]] = []
            self._gpu_bundle: dict[int, tuple[int, int]] = {}  # gpu -> (server, bundle index)
            for s in cluster.servers:
                gpus = list(cluster.gpus_of(s.server_id))
                groups = [tuple(gpus[i:i + self.gpus_per_actor]) for i in range(0, len(gpus), self.gpus_per_actor)]
                for b, grp in enumerate(groups):
                    self.gpu_groups.append(grp)
                    for g in grp:
                        self._gpu_bundle[g] = (s.server_id, b)
                bundles = [{RESOURCE: float(len(grp))} for grp in groups] or [{"CPU": 0.001}]
                self._pgs.append(placement_group(bundles, strategy="STRICT_PACK"))
            pending = {pg.ready(): m for m, pg in enumerate(self._pgs)}
            ready, not_ready = ray.wait(list(pending), num_returns=len(pending), timeout=ready_timeout_s)
            if not_ready:
                missing = sorted(pending[r] for r in not_ready)
                raise ConfigError(
                    f"emulator: servers {missing[:8]} could not be placed within {ready_timeout_s:g} s; each server "
                    f"needs all its GPUs ('{RESOURCE}') on one Ray node")
            server_cls = ray.remote(num_cpus=0)(ServerActor)
            for s in cluster.servers:
                first = cluster.gpus_of(s.server_id).start
                a = server_cls.options(scheduling_strategy=self._strategy(s.server_id, 0),
                                       max_concurrency=10_000).remote(s.server_id, first, s.gpus)
                self.servers.append(a)
            pings = [a.ping.remote() for a in self.servers]
            _, late = ray.wait(pings, num_returns=len(pings), timeout=ready_timeout_s)
            if late:
                raise ConfigError(
                    f"emulator: {len(late)} of {len(pings)} server actors did not start within "
                    f"{ready_timeout_s:g} s (host overloaded?); raise ready_timeout_s or emulate fewer servers")
            ray.get(pings)
            self._watch = {a.watch.remote(): m for m, a in enumerate(self.servers)}
            if workers == "pool":
                self.pool = WorkerPool(self, ready_timeout_s)
                gpu_hosts = {g: self.pool.host(g) for g in range(cluster.total_gpus)}
                server_hosts = dict(enumerate(self.servers))
            else:  # the runs' participants live in the clock actor's process
                gpu_hosts = server_hosts = None
            self.clock = clock_actor_class().options(max_concurrency=100_000).remote(
                cluster, gpu_hosts, server_hosts, nic_share, fast_forward, pace,
                replay_payload_bytes=replay_payload_bytes)
            ray.get(self.clock.ping.remote(), timeout=ready_timeout_s)
        except BaseException:
            self.shutdown()
            raise

    # ------------------------------------------------------------ set-up helpers
    def _strategy(self, server: int, bundle: int):
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        return PlacementGroupSchedulingStrategy(self._pgs[server], placement_group_bundle_index=bundle)

    # ------------------------------------------------------------ contract
    def worker_options(self, gpu_id: int) -> dict:
        """``ActorClass.options(**kw)`` arguments placing an actor of emulated GPU ``gpu_id`` (tests,
        tools): it takes 1 ``emu_gpu`` from the bundle of ``gpu_id``'s GPU group, on the node that
        hosts its server, and no CPU; it dies when its server is killed.
        """
        return {**self.bundle_options(gpu_id), "resources": {RESOURCE: 1.0}}

    def bundle_options(self, gpu_id: int) -> dict:
        """Like :meth:`worker_options` but without taking the ``emu_gpu`` resource: an actor in
        ``gpu_id``'s bundle (the worker pool's hosts); raises ServerLostError for a lost server."""
        if not (isinstance(gpu_id, int) and 0 <= gpu_id < self.cluster.total_gpus):
            raise ValueError(f"emulator: GPU id {gpu_id!r} is not in 0..{self.cluster.total_gpus - 1}")
        server, bundle = self._gpu_bundle[gpu_id]
        if server not in self._alive:
            raise ServerLostError(f"emulator: server {server} of GPU {gpu_id} was lost")
        return {"num_cpus": 0, "scheduling_strategy": self._strategy(server, bundle)}

    def group_of(self, gpu_id: int) -> tuple[int, ...]:
        """The GPUs that share ``gpu_id``'s bundle (one host process may serve them all)."""
        server, bundle = self._gpu_bundle[gpu_id]
        return tuple(g for g in self.cluster.gpus_of(server) if self._gpu_bundle[g] == (server, bundle))

    def server_actor(self, m: int):
        """The ServerActor handle of server ``m``."""
        return self.servers[m]

    def server_nodes(self) -> dict[int, str]:
        """Ray node id hosting each emulated server (from its placement group)."""
        from ray.util.placement_group import placement_group_table

        out = {}
        for m, pg in enumerate(self._pgs):
            if m not in self._alive:
                continue
            nodes = placement_group_table(pg).get("bundles_to_node_id", {})
            if nodes:
                out[m] = nodes[0]
        return out

    def kill_server(self, m: int) -> None:
        """Fault injection: server ``m`` dies with its hosts and workers; its runs fail (the clock is told)."""
        import ray
        from ray.util.placement_group import remove_placement_group

        if not (isinstance(m, int) and 0 <= m < self.cluster.num_servers):
            raise ValueError(f"emulator: server {m!r} is not in 0..{self.cluster.num_servers - 1}")
        if m not in self._alive:
            return
        self._alive.discard(m)
        ray.get(self.clock.lose_server.remote(m))
        ray.kill(self.servers[m], no_restart=True)
        remove_placement_group(self._pgs[m])

    def slow_link(self, m: int, factor: float, *, direction: str = "both") -> None:
        """Fault injection: server ``m``'s NIC (``egress``/``ingress``/``both``, or ``intra``) runs ``factor``x slower."""
        import ray

        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
            raise ValueError(f"slow_link: factor must be a finite number > 0, got {factor!r}")
        sides = {"both": ("egress", "ingress"), "egress": ("egress",), "ingress": ("ingress",),
                 "intra": ("intra",)}.get(direction)
        if sides is None:
            raise ValueError(f"slow_link: direction must be both, egress, ingress or intra, got {direction!r}")
        ray.get([self.clock.slow_link.remote((side, m), float(factor)) for side in sides])

    def alive_servers(self) -> set[int]:
        """Servers not killed and not found dead by :meth:`poll_failures`."""
        return set(self._alive)

    def poll_failures(self, timeout_s: float = 0.0) -> list[int]:
        """Servers whose actor died since the last call (killed or crashed); the clock fails their runs."""
        import ray

        lost: list[int] = []
        if self._watch:
            done, _ = ray.wait(list(self._watch), num_returns=len(self._watch), timeout=timeout_s)
            for ref in done:
                m = self._watch.pop(ref)
                if m in self._alive:  # died by itself
                    self._alive.discard(m)
                    ray.get(self.clock.lose_server.remote(m))
        for m in range(self.cluster.num_servers):
            if m not in self._alive and m not in self._lost_reported:
                self._lost_reported.add(m)
                lost.append(m)
        return lost

    def clock_stats(self) -> dict:
        """``ray.get(clock.stats.remote())``: emulated now, bytes per job, clock rounds, skipped iterations."""
        import ray

        return ray.get(self.clock.stats.remote())

    # ------------------------------------------------------------ life cycle
    def shutdown(self) -> None:
        """Kill the actors and placement groups; shut Ray down if this cluster started it."""
        import ray

        if getattr(self, "_session", None) is None:
            return
        try:
            if ray.is_initialized():
                from ray.util.placement_group import remove_placement_group

                if getattr(self, "pool", None) is not None:
                    self.pool.shutdown()
                for a in getattr(self, "servers", []):
                    ray.kill(a, no_restart=True)
                if getattr(self, "clock", None) is not None:
                    ray.kill(self.clock, no_restart=True)
                for m, pg in enumerate(self._pgs):
                    try:
                        remove_placement_group(pg)
                    except Exception:  # already removed by kill_server
                        pass
        finally:
            self._session.close()
            self._session = None

    def __enter__(self) -> "EmuCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


