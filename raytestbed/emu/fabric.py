"""The throttled fabric: every transfer between emulated GPUs is paced by the one rate allocator.

Executors move the real bytes themselves (direct actor call or object ref
to the receiving worker) and ``await fabric.transfer(job, src_gpu, dst_gpu,
nbytes, coflow_id)``: the call returns when the modelled transfer of
``nbytes`` bytes is complete, with the emulated seconds it took.  Rates come
from :class:`~raytestbed.network.allocator.RateAllocator` (weighted max-min,
progressive filling) over the links of ``Cluster.path`` (source NIC egress,
destination NIC ingress, rack up/down links where configured); intra-server
transfers are capped per GPU pair at ``intra_bps``; see :mod:`.fluid`.

Two clocks (docs/emulator.md):

* ``mode="paced"`` — the model runs on the wall clock through
  :class:`~raytestbed.emu.timescale.TimeScale`: a flow of S bytes at rate r
  (emulated bytes/s) lasts S / r emulated seconds = S / (r * factor) wall
  seconds; completions are delivered by asyncio timers at the modelled time.
* ``mode="virtual"`` — the same model on a virtual clock: nothing sleeps.  A
  transfer starts at ``start_s`` (the caller's emulated clock) or at the
  fabric's virtual now; the fabric advances its clock to the next completion
  once no new transfer has arrived for ``settle_s`` wall seconds, so flows
  issued together share links as they would in the cluster.  A transfer
  whose ``start_s`` lies behind the virtual clock starts at the clock and is
  counted in ``stats()["late_transfers"]``.

:class:`Fabric` is a plain class with async methods; ``EmuCluster`` runs it
as an async Ray actor (``fabric_actor_class()``).  :class:`LocalFabric` is
the same class in-process in virtual time without settling delay, for
executor unit tests.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import defaultdict
from collections.abc import Hashable

from raytestbed.core.cluster import Cluster
from raytestbed.emu.fluid import FluidNet, Transfer
from raytestbed.emu.timescale import TimeScale

__all__ = ["Fabric", "LocalFabric", "FabricError", "ServerLostError", "fabric_actor_class"]


#: Longest control-plane delay (wall seconds) the emulator credits back: to a transfer issued with
#: ``start_s`` (:meth:`Fabric.transfer_span`) and to a job started after its decision
#: (:class:`raytestbed.emu.executors.job.JobRun`). A stale time older than this is clamped.
MAX_BACKDATE_WALL_S = 0.25


class FabricError(RuntimeError):
    """A transfer the fabric cannot carry (bad GPU id, negative size)."""


class ServerLostError(FabricError):
    """A transfer touched an emulated server that was lost (killed or died)."""


class Fabric:
    """Paced (or virtual-time) transfers between emulated GPUs; see the module docstring.

    Args:
        cluster: the emulated cluster (bandwidths in emulated bytes/s).
        time_scale: a :class:`TimeScale` or its factor (emulated s per wall s); paced mode only.
        mode: ``"paced"`` or ``"virtual"``.
        settle_s: virtual mode: wall seconds without new transfers before the clock advances.
        nic_share: ``"fair"`` (max-min over each NIC) or ``"reserved"`` (every GPU owns NIC / g;
            :mod:`raytestbed.emu.fluid`).
    """

    def __init__(self, cluster: Cluster, time_scale: TimeScale | float = 1.0, mode: str = "paced",
                 settle_s: float = 0.005, nic_share: str = "fair") -> None:
        if mode not in ("paced", "virtual"):
            raise ValueError(f"fabric mode must be 'paced' or 'virtual', got {mode!r}")
        self.cluster = cluster
        self.scale = time_scale if isinstance(time_scale, TimeScale) else TimeScale(time_scale)
        self.mode = mode
        self.settle_s = float(settle_s)
        #: longest control-plane delay (wall s) credited to a transfer issued with ``start_s``
        self.max_backdate_wall_s = MAX_BACKDATE_WALL_S
        self.net = FluidNet(cluster, nic_share)
        self._ids = itertools.count()
        self._lost: set[int] = set()
        self._bytes_sent: dict[int, float] = defaultdict(float)
        self._coflows: dict[Hashable, dict] = {}
        self._transfers_done = 0
        self._late = 0
        self._timer: asyncio.TimerHandle | None = None
        # virtual mode
        self._pending: list[tuple[float, int, Transfer]] = []
        self._arrivals = 0
        self._runner: asyncio.Task | None = None
        if mode == "paced":
            self.net.t = self.scale.now()

    # ------------------------------------------------------------ transfers
    async def transfer(self, job_id: int, src_gpu: int, dst_gpu: int, nbytes: int,
                       coflow_id: Hashable | None = None, start_s: float | None = None) -> float:
        """Carry ``nbytes`` bytes from ``src_gpu`` to ``dst_gpu``; return the emulated seconds taken.

        The same as :meth:`transfer_span`, which also tells when the flow ended.
        """
        began, ended = await self.transfer_span(job_id, src_gpu, dst_gpu, nbytes, coflow_id, start_s)
        return ended - began

    async def transfer_span(self, job_id: int, src_gpu: int, dst_gpu: int, nbytes: int,
                            coflow_id: Hashable | None = None,
                            start_s: float | None = None) -> tuple[float, float]:
        """Carry ``nbytes`` bytes from ``src_gpu`` to ``dst_gpu``; return ``(start_s, finish_s)``.

        Both in emulated seconds on the fabric's clock: when the flow started (after any
        back-dating, see below) and when its last byte arrived in the fluid model.

        ``start_s``: the emulated time (``TimeScale.now()``) at which the sender issued the
        transfer.  Virtual mode: the flow starts then (or is counted late).  Paced mode: the
        control-plane delay since then (<= ``max_backdate_wall_s`` wall) is credited, as if the
        fabric had seen the flow at once (a flow that would have ended by now ends in the past).
        Same GPU or ``nbytes == 0``: done at once (0 s).  A transfer touching a lost server
        raises :class:`ServerLostError` (also when the server is lost while it is in flight).
        """
        n = self.cluster.total_gpus
        for g in (src_gpu, dst_gpu):
            if not (isinstance(g, int) and 0 <= g < n):
                raise FabricError(f"transfer of job {job_id}: GPU id {g!r} is not in 0..{n - 1}")
        if not (nbytes >= 0 and math.isfinite(nbytes)):
            raise FabricError(f"transfer of job {job_id}: nbytes must be >= 0, got {nbytes!r}")
        s, d = self.cluster.server_of(src_gpu), self.cluster.server_of(dst_gpu)
        lost = {s, d} & self._lost
        if lost:
            raise ServerLostError(f"transfer of job {job_id}: server {min(lost)} was lost")
        if src_gpu == dst_gpu or nbytes == 0:
            t = self._now() if start_s is None else min(float(start_s), self._now())
            return t, t
        loop = asyncio.get_running_loop()
        now = self._now()
        x = Transfer(next(self._ids), job_id, coflow_id, src_gpu, dst_gpu, s, d, float(nbytes), now,
                     token=loop.create_future())
        if self.mode == "paced":
            self._finish(self.net.advance(now))
            lag = 0.0 if start_s is None else min(now - float(start_s), self.scale.to_emu(self.max_backdate_wall_s))
            before = {y: self.net.rate_of(y) for y in self.net.transfers()} if lag > 0 else {}
            self._begin(x)
            if lag > 0:
                self._backdate(x, lag, before)
            self._reschedule()
        else:
            if start_s is not None and start_s > self.net.t:
                x.start_s = float(start_s)
                heapq.heappush(self._pending, (x.start_s, x.tid, x))
            else:
                if start_s is not None and start_s < self.net.t - 1e-12:
                    self._late += 1
                self._begin(x)
            self._arrivals += 1
            if self._runner is None or self._runner.done():
                self._runner = loop.create_task(self._run_virtual())
        return await x.token

    def _backdate(self, x: Transfer, lag: float, before: dict) -> None:
        """Paced mode: the sender issued ``x`` ``lag`` emulated s ago (control-plane delay).

        Re-plays the last ``lag`` seconds as if ``x`` had been present: ``x`` is credited the
        bytes it would have sent at its rate, and every other live transfer gets back what it
        sent beyond its new (shared) rate while ``x`` was there — so capacity is not counted
        twice.  A transfer short enough to have ended inside the window ends there, in the past
        (``finish_s = start_s + nbytes / rate``), so a fast link's message costs what the model
        says, not the host's delay.  Exact when no other transfer ended in that interval; the
        lag is bounded by ``max_backdate_wall_s`` so a stale ``start_s`` cannot skip much.
        """
        r = self.net.rate_of(x)
        x.start_s -= lag
        span = lag if r <= 0 else min(lag, x.nbytes / r)  # how long x was present in the window
        x.remaining = max(x.remaining - r * span, 1e-9 * x.nbytes)
        window_end = self.net.t - lag + span
        for y, r_old in before.items():
            dt = min(span, window_end - y.start_s)
            if dt > 0:
                y.remaining = min(y.nbytes, y.remaining + (r_old - self.net.rate_of(y)) * dt)
        if span < lag:  # x ended inside the window
            x.remaining = 0.0
            x.finish_s = window_end
            self.net.remove(x)
            self._finish([x])

    def _now(self) -> float:
        return self.scale.now() if self.mode == "paced" else self.net.t

    def _begin(self, x: Transfer) -> None:
        self.net.add(x)
        cf = self._coflow(x)
        if cf is not None:
            if cf["active"] == 0 and cf["end_s"] is not None:
                cf["end_s"] = None  # the coflow grew after it had drained
            cf["active"] += 1
            cf["flows"] += 1

    def _coflow(self, x: Transfer) -> dict | None:
        if x.coflow_id is None:
            return None
        cf = self._coflows.get(x.coflow_id)
        if cf is None:
            cf = {"job_id": x.job_id, "start_s": x.start_s, "end_s": None, "bytes": 0.0,
                  "flows": 0, "active": 0}
            self._coflows[x.coflow_id] = cf
        return cf

    def _finish(self, done: list[Transfer]) -> None:
        for x in done:
            self._bytes_sent[x.job_id] += x.nbytes
            self._transfers_done += 1
            cf = self._coflow(x)
            if cf is not None:
                cf["bytes"] += x.nbytes
                cf["active"] -= 1
                if cf["active"] == 0:
                    cf["end_s"] = x.finish_s
            if not x.token.done():
                x.token.set_result((x.start_s, x.finish_s))

    # ------------------------------------------------------------ paced clock
    def _reschedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        t = self.net.next_finish()
        if math.isfinite(t):
            delay = max(0.0, self.scale.to_wall(t - self.scale.now()))
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._finish(self.net.advance(self.scale.now()))
        self._reschedule()

    def _changed(self) -> None:
        """Rates changed (weights, overrides, capacities): re-plan the next completion."""
        if self.mode == "paced":
            self._reschedule()
        else:
            self._arrivals += 1

    def _catch_up(self) -> None:
        if self.mode == "paced":
            self._finish(self.net.advance(self.scale.now()))

    # ------------------------------------------------------------ virtual clock
    async def _settle(self) -> None:
        while True:
            seen = self._arrivals
            if self.settle_s > 0:
                await asyncio.sleep(self.settle_s)
            else:
                for _ in range(3):
                    await asyncio.sleep(0)
            if seen == self._arrivals:
                return

    async def _run_virtual(self) -> None:
        while len(self.net) or self._pending:
            await self._settle()
            t_next = self.net.next_finish()
            if self._pending:
                t_next = min(t_next, self._pending[0][0])
            if not math.isfinite(t_next):
                return  # every remaining flow is stalled at rate 0: wait for a policy change
            self._finish(self.net.advance(t_next))
            while self._pending and self._pending[0][0] <= self.net.t:
                self._begin(heapq.heappop(self._pending)[2])

    # ------------------------------------------------------------ controls
    async def set_weights(self, weights: dict[int, float]) -> None:
        """Per-job weights of the weighted max-min allocation (decision SetFlowWeights)."""
        self._catch_up()
        self.net.set_weights(dict(weights))
        self._changed()
        self._kick()

    async def set_rates(self, rates: dict) -> None:
        """Explicit per-connection rates in emulated bytes/s (decision SetFlowRates); see FluidNet.set_rates."""
        self._catch_up()
        self.net.set_rates(dict(rates))
        self._changed()
        self._kick()

    async def slow_link(self, link: Hashable, factor: float) -> None:
        """Divide the capacity of ``link`` (e.g. ``("egress", 3)``, or ``("intra", m)``) by ``factor``."""
        self._catch_up()
        if isinstance(link, tuple) and link and link[0] == "intra":
            self.net.set_intra_factor(int(link[1]), factor)
        else:
            self.net.set_link_factor(link, factor)
        self._changed()
        self._kick()

    async def set_time_scale(self, time_scale: TimeScale | float) -> None:
        """Change the time scale (paced mode); the emulated clock continues where it was."""
        self._catch_up()
        self.scale = time_scale if isinstance(time_scale, TimeScale) else self.scale.rescaled(time_scale)
        if self.mode == "paced":
            self.net.t = self.scale.now()  # re-base the model clock (bytes left are kept)
        self._changed()

    async def fail_server(self, server: int) -> list[int]:
        """Mark ``server`` lost: its in-flight transfers raise ServerLostError; returns their jobs."""
        self._catch_up()
        self._lost.add(int(server))
        hit = [x for x in self.net.transfers() if server in (x.src_server, x.dst_server)]
        hit += [p[2] for p in self._pending if server in (p[2].src_server, p[2].dst_server)]
        self._pending = [p for p in self._pending if server not in (p[2].src_server, p[2].dst_server)]
        heapq.heapify(self._pending)
        for x in hit:
            self.net.remove(x)
            cf = self._coflow(x)
            if cf is not None and x.conn:
                cf["active"] -= 1
            if not x.token.done():
                x.token.set_exception(ServerLostError(f"transfer of job {x.job_id}: server {server} was lost"))
        self._changed()
        self._kick()
        return sorted({x.job_id for x in hit})

    def _kick(self) -> None:
        if self.mode == "virtual" and (len(self.net) or self._pending):
            if self._runner is None or self._runner.done():
                self._runner = asyncio.get_running_loop().create_task(self._run_virtual())

    # ------------------------------------------------------------ queries
    async def now(self) -> float:
        """The fabric's emulated time (seconds)."""
        return self._now()

    async def stats(self) -> dict:
        """``{"bytes_sent": {job: bytes}, "coflows": {id: {"start_s","end_s","bytes",...}}, ...}``.

        ``bytes_sent`` counts completed transfers; a coflow's ``end_s`` is None while it has
        transfers in flight.  Times are emulated seconds.
        """
        self._catch_up()
        return {
            "bytes_sent": dict(self._bytes_sent),
            "coflows": {k: dict(v) for k, v in self._coflows.items()},
            "transfers_done": self._transfers_done,
            "in_flight": len(self.net) + len(self._pending),
            "late_transfers": self._late,
            "rate_overcommitted": self.net.overcommitted,
            "lost_servers": sorted(self._lost),
            "now_s": self._now(),
        }

    async def flows(self) -> list[dict]:
        """Connections in flight: key, job, servers, transfers, bytes left, rate (emulated bytes/s)."""
        self._catch_up()
        rates = self.net.conn_rates()
        out = []
        for c in self.net.conns.values():
            xs = list(c.members.values())
            out.append({"key": c.key, "job_id": c.job_id, "coflow_id": c.key[2],
                        "src_server": xs[0].src_server, "dst_server": xs[0].dst_server,
                        "transfers": len(xs), "bytes_left": sum(x.remaining for x in xs),
                        "rate_bps": rates[c.key]})
        return out

    async def ping(self) -> bool:
        return True

    async def pid(self) -> int:
        """Host process id (for memory/CPU accounting)."""
        import os

        return os.getpid()


class LocalFabric(Fabric):
    """The fabric in-process without Ray and without delay (virtual time, no settling), for unit tests."""

    def __init__(self, cluster: Cluster, time_scale: TimeScale | float = 1.0, nic_share: str = "fair") -> None:
        super().__init__(cluster, time_scale, mode="virtual", settle_s=0.0, nic_share=nic_share)


def fabric_actor_class():
    """``Fabric`` as an async Ray actor class (imports Ray on first use)."""
    import ray

    return ray.remote(num_cpus=0)(Fabric)
