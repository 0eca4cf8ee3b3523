"""Stage-replica workers and parameter servers as async Ray actors.

One :class:`StageWorker` per stage replica of a job (a data-parallel worker is
a replica of the only stage). Per mini-batch i it does, PipeDream 1F1B order
(S - s forwards in flight on stage s, then one backward, one forward, ...):

forward F(i)
    take the activation slices of i from every upstream replica, holding the
    emulated GPU for each inbound flow's duration (A-SRPT eq. 5 charges a stage
    for its inbound as well as its outbound traffic); compute (``real``: run the
    layers; ``replay``: hold the GPU for the profiled p^f); send one activation
    slice to every downstream replica, one after the other (replica r starts
    with neighbour r, so simultaneous slices go to different receivers), each
    paced by the fabric.
backward B(i)
    take the gradient slices from every downstream replica (holding the GPU for
    their flows); compute (p^b); send gradient slices upstream; ring all-reduce
    among the stage's replicas (2(k-1) steps of h/k bytes, reduce-scatter then
    all-gather, A-SRPT eq. 6 / SJF-BCO eq. 8); SGD step. PS jobs push h/#PS
    bytes to every PS and pull the summed gradient back instead (Parrot).

Every transfer asks the fabric first (``fabric.transfer_span``: returns after
the paced flow completed, with its start and end on the fabric's emulated clock)
and hands the real numpy buffer to the receiver at the same time (a direct call
argument: inlined below 100 KB, through Ray's object store above).

Logical clock. Each worker keeps ``t``, the emulated time (fabric clock, seconds)
at which its last step *logically* ended: a flow at its end time in the fabric's
fluid model, a held GPU ``d`` seconds after it was taken, a received slice when
its flow ended. A transfer is issued with ``start_s = t``: the fabric back-dates
the flow by the control-plane delay since then (Ray calls and wake-ups, ~5-20 ms
wall per message on this host; at most ``Fabric.max_backdate_wall_s``), and a GPU
hold sleeps until ``t + d`` rather than for ``d`` from now. So the host's message
latency is not charged to the emulated cluster, whose links have microsecond
latency (docs/emulator.md, "Logical clock"); bandwidth sharing and compute are
unchanged. Per-iteration compute/comm times are reported from this clock, in
emulated seconds. Given a bare time-scale factor instead of a
:class:`~raytestbed.emu.timescale.TimeScale` (no epoch shared with the fabric), a
worker falls back to the wall clock: nothing is back-dated.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict

import numpy as np

from raytestbed.emu.executors.plan import PsSpec, WorkerSpec
from raytestbed.emu.timescale import TimeScale


def fabric_call(fabric, method: str, *args):
    """Call ``fabric.method(*args)`` on a Ray actor handle or an in-process fabric; returns an awaitable
    that may be awaited more than once (an ObjectRef, or a task for an in-process fabric)."""
    m = getattr(fabric, method)
    return m.remote(*args) if hasattr(m, "remote") else asyncio.ensure_future(m(*args))


def _rotated(n: int, start: int) -> list[int]:
    """0..n-1 starting at ``start mod n``: replica r of a stage sends to neighbour r first, so the
    replicas' simultaneous slices go to different receivers (no receiver gets two at once)."""
    return [(start + t) % n for t in range(n)]


class _Inbox:
    """Keyed mailbox; waiters give up when ``abort(key)`` becomes true."""

    def __init__(self) -> None:
        self.items: dict = {}
        self.cond = asyncio.Condition()

    async def put(self, key, value) -> None:
        async with self.cond:
            self.items[key] = value
            self.cond.notify_all()

    async def take(self, key, abort=lambda k: False):
        async with self.cond:
            await self.cond.wait_for(lambda: key in self.items or abort(key))
            return self.items.pop(key, None)

    async def poke(self) -> None:
        async with self.cond:
            self.cond.notify_all()


class StageWorker:
    """One stage replica (see the module docstring). Created by :func:`start_job`."""

    def __init__(self, spec: WorkerSpec, fabric, monitor, scale: TimeScale | float) -> None:
        self.spec = spec
        self.fabric = fabric
        self.monitor = monitor
        # the fabric's clock (shared epoch), or only a factor: then the worker's own wall clock
        self.logical = isinstance(scale, TimeScale)
        self.scale = scale if self.logical else TimeScale(float(scale))
        self.factor = self.scale.factor  # emulated seconds per wall second
        self.t = self.scale.now()  # logical clock, emulated s (module docstring)
        self.peers: dict[int, object] = {}  # gpu -> worker handle
        self.ps: list = []
        self.inbox = _Inbox()
        self.limit = spec.iterations
        self.next_f = 0
        self.hold = False
        self.stage = None
        self.acc: dict[int, dict] = defaultdict(lambda: {"comp": 0.0, "comm": 0.0, "cpu": 0.0})
        self.meta: dict[int, dict] = {}
        self.deliveries: list = []  # deliver() calls in flight (checked once per mini-batch)
        if spec.mode == "real":
            from raytestbed.emu.executors.compute import RealStage

            self.stage = RealStage(spec)

    # ------------------------------------------------------------- control
    def connect(self, peers: dict, ps: list | None = None) -> bool:
        """Handles of the job's other workers (keyed by GPU) and of its PS actors."""
        self.peers = dict(peers)
        self.ps = list(ps or [])
        return True

    def param_bytes(self) -> int:
        return self.stage.param_bytes if self.stage is not None else int(self.spec.profile.param_bytes)

    async def freeze(self) -> int:
        """Stop starting forwards until :meth:`set_limit`; returns mini-batches started."""
        self.hold = True
        return self.next_f

    async def set_limit(self, limit: int) -> None:
        self.limit = min(self.limit, int(limit))
        self.hold = False
        await self.inbox.poke()

    async def deliver(self, key, data, flow: list, meta=None) -> None:
        """Called by the sending peer with the buffer and ``[ref]`` of its fabric transfer;
        the slice is usable once that paced flow completed. Inbox item: (data, flow seconds,
        meta, flow end on the fabric clock)."""
        began, ended = await flow[0]
        await self.inbox.put(key, (data, ended - began, meta, ended))

    # ------------------------------------------------------------- helpers
    def _emu(self, wall_s: float) -> float:
        return wall_s * self.factor

    def _reached(self, fabric_end_s: float) -> None:
        """A flow this worker waited for ended at ``fabric_end_s`` (fabric clock): move ``t`` there."""
        self.t = max(self.t, fabric_end_s if self.logical else self.scale.now())

    async def _hold_gpu(self, emu_s: float) -> None:
        """Hold the emulated GPU for ``emu_s`` emulated seconds after ``t`` (sleep until ``t + emu_s``)."""
        if emu_s > 0:
            self.t += emu_s
            wait = self.scale.to_wall(self.t - self.scale.now())
            if wait > 0:
                await asyncio.sleep(wait)

    async def _send(self, dst_gpu: int, key, payload: np.ndarray, nbytes: int, meta=None, coflow=None) -> float:
        """Paced transfer of ``payload`` to the worker on ``dst_gpu``, issued at ``t``; returns the
        emulated flow time and moves ``t`` to the flow's end."""
        start = self.t if self.logical else None
        tr = fabric_call(self.fabric, "transfer_span", self.spec.job_id, self.spec.gpu, dst_gpu, int(nbytes),
                         coflow, start)
        # the receiver gets the buffer now and waits for the flow's completion itself (one message
        # hop less on the critical path); we hold our GPU until the flow completed. The buffer is a
        # direct argument: Ray inlines it in the call below 100 KB (no object-store put and fetch:
        # ~4 ms less per message, docs/benchmarks.md "Worker pool") and stores larger ones itself.
        self.deliveries.append(self.peers[dst_gpu].deliver.remote(key, payload, [tr], meta))
        began, ended = await tr
        self._reached(ended)
        return ended - began

    def _abort(self, key) -> bool:
        return key[1] >= self.limit

    async def _take(self, key):
        return await self.inbox.take(key, self._abort)

    # ------------------------------------------------------------- the loop
    async def run(self, start_s: float | None = None) -> int:
        """Run the 1F1B schedule until ``limit`` mini-batches are done; returns how many.

        ``start_s``: the job's start on the fabric clock (the same for every worker of the run);
        the logical clock starts there (default: now)."""
        W = self.spec.in_flight
        j = 0
        now = self.scale.now()
        self.t = min(float(start_s), now) if (start_s is not None and self.logical) else now
        while True:
            if self.hold and self.next_f < j + W:
                async with self.inbox.cond:
                    await self.inbox.cond.wait_for(lambda: not self.hold)
                continue
            if self.next_f < self.limit and self.next_f < j + W:
                i = self.next_f
                self.next_f += 1
                if not await self._forward(i):
                    self.next_f = i
                continue
            if j < min(self.next_f, self.limit):
                await self._backward(j)
                j += 1
                continue
            break
        await self.monitor.records.remote()  # the monitor is a sync actor: our records are in before this
        return j

    async def _forward(self, i: int) -> bool:
        sp = self.spec
        a = self.acc[i]
        x, idx = None, None
        if sp.stage > 0:
            pieces = []
            for q in range(sp.replicas[sp.stage - 1]):
                got = await self._take(("act", i, q))
                if got is None:
                    return False
                pieces.append(got)
            self._reached(max(p[3] for p in pieces))
            t0 = self.t
            await self._hold_gpu(sum(p[1] for p in pieces))
            a["comm"] += self.t - t0
            if sp.mode == "real":
                x = np.concatenate([p[0] for p in pieces])
                idx = np.concatenate([p[2]["idx"] for p in pieces])
            self.meta[i] = {"sizes": [len(p[2]["idx"]) if p[2] else 0 for p in pieces]}
        elif sp.mode == "real":
            idx = self.stage.first_shard()
        # compute
        t0, w0, c0 = self.t, time.perf_counter(), time.thread_time()
        if sp.mode == "real":
            out, loss = self.stage.forward(i, x, idx)
            self.t += self._emu(time.perf_counter() - w0)
            a["cpu"] += time.thread_time() - c0
            if loss is not None:
                a["loss"], a["n"] = loss, len(idx)
        else:
            await self._hold_gpu(sp.profile.fwd_s)
            out = None
        a["comp"] += self.t - t0
        # send activations downstream
        if sp.next_gpus:
            t0 = self.t
            k_next = len(sp.next_gpus)
            if sp.mode == "real":
                parts = np.array_split(out, k_next)
                idxs = np.array_split(idx, k_next)
                self.meta.setdefault(i, {})["out_sizes"] = [len(p) for p in parts]
                for t in _rotated(k_next, sp.replica):
                    g = sp.next_gpus[t]
                    await self._send(g, ("act", i, sp.replica), parts[t], parts[t].nbytes, {"idx": idxs[t]})
            else:
                buf = np.zeros(sp.act_out_bytes, dtype=np.uint8)
                for t in _rotated(k_next, sp.replica):
                    await self._send(sp.next_gpus[t], ("act", i, sp.replica), buf, buf.nbytes, None)
            a["comm"] += self.t - t0
        return True

    async def _backward(self, j: int) -> None:
        sp = self.spec
        a = self.acc[j]
        grad = None
        if sp.next_gpus:
            pieces = []
            for t in range(len(sp.next_gpus)):
                pieces.append(await self._take(("grad", j, t)))
            self._reached(max(p[3] for p in pieces))
            t0 = self.t
            await self._hold_gpu(sum(p[1] for p in pieces))
            a["comm"] += self.t - t0
            if sp.mode == "real":
                grad = np.concatenate([p[0] for p in pieces])
        t0, w0, c0 = self.t, time.perf_counter(), time.thread_time()
        if sp.mode == "real":
            gin = self.stage.backward(j, grad)
            self.t += self._emu(time.perf_counter() - w0)
            a["cpu"] += time.thread_time() - c0
        else:
            await self._hold_gpu(sp.profile.bwd_s)
            gin = None
        a["comp"] += self.t - t0
        if sp.prev_gpus:
            t0 = self.t
            if sp.mode == "real":
                sizes = self.meta[j]["sizes"]
                parts = np.split(gin, np.cumsum(sizes)[:-1])
                for q in _rotated(len(sp.prev_gpus), sp.replica):
                    await self._send(sp.prev_gpus[q], ("grad", j, sp.replica), parts[q], parts[q].nbytes)
            else:
                buf = np.zeros(sp.act_in_bytes, dtype=np.uint8)
                for q in _rotated(len(sp.prev_gpus), sp.replica):
                    await self._send(sp.prev_gpus[q], ("grad", j, sp.replica), buf, buf.nbytes)
            a["comm"] += self.t - t0
        self.meta.pop(j, None)
        # gradient synchronisation
        t0 = self.t
        flat = self.stage.flat_grad(j) if sp.mode == "real" else None
        if sp.ps_gpus:
            total = await self._ps_sync(j, flat)
        elif len(sp.ring) > 1:
            total = await self._ring_allreduce(j, flat)
        else:
            total = flat
        if sp.mode == "real":
            self.stage.apply(total)
        a["comm"] += self.t - t0
        if self.deliveries:  # surface a dead receiver; normally all long done
            pending, self.deliveries = self.deliveries, []
            await asyncio.gather(*pending)
        acc = self.acc.pop(j)
        end_wall = self.scale.epoch + self.scale.to_wall(self.t)  # the logical end as a wall time
        self.monitor.record.remote(j, sp.rank, end_wall, acc["comp"], acc["comm"], acc.get("loss"),
                                   acc.get("n", 0), acc["cpu"])

    # ------------------------------------------------------------- all-reduce
    async def allreduce(self, j: int, flat: np.ndarray) -> np.ndarray:
        """Ring all-reduce (sum) of ``flat`` with the other replicas of this stage (for tests and tools)."""
        return await self._ring_allreduce(j, np.asarray(flat, dtype=np.float32))

    async def _ring_allreduce(self, j: int, flat: np.ndarray | None) -> np.ndarray | None:
        """Sum ``flat`` over the stage's replicas: reduce-scatter + all-gather, 2(k-1) steps.

        Step t sends one of k chunks to the ring successor and receives one from
        the predecessor, both at once. In replay mode the chunks are buffers of
        h/k bytes (nothing to add).
        """
        sp = self.spec
        k, pos = len(sp.ring), sp.ring_pos
        nxt = sp.ring[(pos + 1) % k]
        if flat is not None:
            chunks = [c.copy() for c in np.array_split(flat, k)]
        else:
            h = int(sp.profile.param_bytes)
            chunks = [np.zeros(len(c), dtype=np.uint8) for c in np.array_split(np.empty(h, dtype=np.uint8), k)]
        coflow = f"job{sp.job_id}:it{sp.start_iteration + j}:ar{sp.stage}"
        for step in range(2 * (k - 1)):
            if step < k - 1:
                send_i, recv_i = (pos - step) % k, (pos - step - 1) % k
            else:
                t = step - (k - 1)
                send_i, recv_i = (pos + 1 - t) % k, (pos - t) % k
            send = self._send(nxt, ("ar", j, step), chunks[send_i], chunks[send_i].nbytes, coflow=coflow)
            got, _ = await asyncio.gather(self._take(("ar", j, step)), send)
            self._reached(got[3])
            data = got[0]
            if flat is not None:
                if step < k - 1:
                    chunks[recv_i] = chunks[recv_i] + data
                else:
                    chunks[recv_i] = np.array(data)
        return np.concatenate(chunks) if flat is not None else None

    async def _ps_sync(self, j: int, flat: np.ndarray | None) -> np.ndarray | None:
        """Push gradient shards to every PS (one coflow), pull the summed shards back (another)."""
        sp = self.spec
        n = len(sp.ps_gpus)
        it = sp.start_iteration + j
        if flat is not None:
            shards = np.array_split(flat, n)
        else:
            h = int(sp.profile.param_bytes)
            shards = [np.zeros(len(c), dtype=np.uint8) for c in np.array_split(np.empty(h, dtype=np.uint8), n)]

        start = self.t if self.logical else None

        async def push(p: int) -> None:
            tr = fabric_call(self.fabric, "transfer_span", sp.job_id, sp.gpu, sp.ps_gpus[p], int(shards[p].nbytes),
                             f"job{sp.job_id}:it{it}:push", start)
            _, ended = await tr
            self._reached(ended)
            await self.ps[p].push.remote(j, sp.rank, shards[p], ended if self.logical else None)

        await asyncio.gather(*(push(p) for p in range(n)))
        pulled = await asyncio.gather(*(self.ps[p].pull.remote(j, sp.gpu, f"job{sp.job_id}:it{it}:pull")
                                        for p in range(n)))
        self._reached(max(end for _, end in pulled))
        return np.concatenate([out for out, _ in pulled]) if flat is not None else None


class ParamServer:
    """A parameter-server task of a PS job: sums the workers' gradient shards of each iteration."""

    def __init__(self, spec: PsSpec, fabric) -> None:
        self.spec = spec
        self.fabric = fabric
        self.sums: dict[int, np.ndarray] = {}
        self.count: dict[int, int] = defaultdict(int)
        self.pulled: dict[int, int] = defaultdict(int)
        self.ready_s: dict[int, float | None] = {}  # iteration -> when its last push ended (fabric clock)
        self.cond = asyncio.Condition()

    async def push(self, j: int, rank: int, data, flow_end_s: float | None) -> None:
        """A worker's shard of iteration ``j``; ``flow_end_s``: its push flow's end on the fabric
        clock (None: the worker keeps no logical clock, then nothing is back-dated)."""
        async with self.cond:
            if self.spec.mode == "real":
                self.sums[j] = np.array(data) if j not in self.sums else self.sums[j] + data
            self.count[j] += 1
            prev = self.ready_s.get(j, -math.inf)
            self.ready_s[j] = None if prev is None or flow_end_s is None else max(prev, flow_end_s)
            self.cond.notify_all()

    async def pull(self, j: int, dst_gpu: int, coflow: str) -> tuple:
        """The summed shard of iteration ``j`` for the worker on ``dst_gpu``, once every worker pushed;
        returns (shard, the pull flow's end on the fabric clock). The pull is issued at the logical
        time the last push ended (worker.py module docstring, "Logical clock")."""
        w = len(self.spec.worker_gpus)
        async with self.cond:
            await self.cond.wait_for(lambda: self.count[j] >= w)
        if self.spec.mode == "real":
            out = self.sums[j]
        else:
            out = np.zeros(self.spec.shard_bytes, dtype=np.uint8)
        _, ended = await fabric_call(self.fabric, "transfer_span", self.spec.job_id, self.spec.gpu, dst_gpu,
                                     int(out.nbytes), coflow, self.ready_s.get(j))
        self.pulled[j] += 1
        if self.pulled[j] >= w:
            self.sums.pop(j, None)
            self.count.pop(j, None)
            self.pulled.pop(j, None)
            self.ready_s.pop(j, None)
        return out, ended
