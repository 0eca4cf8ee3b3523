"""Fixed wall cost per paced message of the executors (replay mode): what a StageWorker._send costs.

Two GPU hosts of the worker pool (2 servers x 1 GPU, NIC 10 GB/s at time scale 1, so the modelled
flow time of the messages used here is <= 0.1 ms and the wall time measured is the fixed cost).
Measured from inside the hosts, wall milliseconds, median of --reps:

* ``fabric``: one ``fabric.transfer`` round trip (the pacing call);
* ``put``: ``ray.put`` of the payload;
* ``call``: one empty call to the peer host (``RunProxy``, as ``deliver`` goes);
* per variant of ``_send``, ``ring step``: one step of the executors' own ring all-reduce between the two StageWorkers (each
  sends one chunk to the other and takes one: ``_send`` = fabric + put + deliver, receiver waits for
  the flow), i.e. the per-message critical path: (all-reduce call - an empty call) / 2 steps.
  Variants: ``put+ref (old)`` = ``ray.put`` the payload and pass the ref (the code before the
  change), ``StageWorker`` = the executors' current ``_send`` (payload as a direct argument),
  ``after flow`` = an alternative (deliver once the flow completed); interleaved step by step.

    PYTHONPATH=$PWD python scripts/bench_emu_message.py [--reps 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import warnings

import numpy as np
import ray

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.emu.cluster import EmuCluster
from raytestbed.emu.executors.job import JobMonitor
from raytestbed.emu.executors.plan import plan_job
from raytestbed.emu.executors.worker import StageWorker
from raytestbed.emu.pool import RunProxy, new_run_key

SIZES = (1_000, 64_000, 1_000_000)


class PutSend(StageWorker):
    """``_send`` as it was: ``ray.put`` the payload, hand the receiver the ref and the flow's ref."""

    async def _send(self, dst_gpu, key, payload, nbytes, meta=None, coflow=None):
        tr = self.fabric.transfer_span.remote(self.spec.job_id, self.spec.gpu, dst_gpu, int(nbytes), coflow)
        ref = ray.put(payload)
        self.deliveries.append(self.peers[dst_gpu].deliver.remote(key, ref, [tr], meta))
        began, ended = await tr
        self._reached(ended)
        return ended - began


class AfterSend(StageWorker):
    """Alternative tried: deliver after the flow completed, with its duration (no ref for the receiver to
    wait on, but the bytes move after the flow instead of during it)."""

    async def _send(self, dst_gpu, key, payload, nbytes, meta=None, coflow=None):
        began, ended = await self.fabric.transfer_span.remote(self.spec.job_id, self.spec.gpu, dst_gpu,
                                                              int(nbytes), coflow)
        self.deliveries.append(self.peers[dst_gpu].deliver_done.remote(key, payload, ended - began, meta, ended))
        self._reached(ended)
        return ended - began

    async def deliver_done(self, key, data, flow_emu_s, meta=None, ended=0.0):
        await self.inbox.put(key, (data, flow_emu_s, meta, ended))


VARIANTS = {"put+ref (old)": PutSend, "StageWorker": StageWorker, "after flow": AfterSend}


class Probe:
    """Times the pieces of a send from inside a host (wall ms)."""

    def __init__(self, fabric, peer) -> None:
        self.fabric = fabric
        self.peer = peer

    async def noop(self) -> None:
        return None

    async def measure(self, nbytes: int, reps: int) -> dict:
        buf = np.zeros(nbytes, dtype=np.uint8)
        out = {"fabric": [], "put": [], "call": []}
        for _ in range(reps):
            t0 = time.perf_counter()
            await self.fabric.transfer.remote(999, 0, 1, nbytes, None)
            t1 = time.perf_counter()
            ray.put(buf)
            t2 = time.perf_counter()
            await self.peer.noop.remote()
            t3 = time.perf_counter()
            out["fabric"].append(t1 - t0)
            out["put"].append(t2 - t1)
            out["call"].append(t3 - t2)
        return {k: 1e3 * statistics.median(v) for k, v in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    args = ap.parse_args(argv)
    print(f"host: {os.cpu_count()} cores, load average at start {os.getloadavg()}")
    cluster = Cluster.homogeneous(2, 1, 10e9, 10e9, name="bench-msg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emu = EmuCluster(cluster, time_scale=1.0)
    try:
        pool = emu.pool
        h0, h1 = pool.host(0), pool.host(1)
        key = new_run_key(0)
        ray.get([h0.create.remote(key, "probe", Probe, emu.fabric, RunProxy(h1, key, "probe")),
                 h1.create.remote(key, "probe", Probe, emu.fabric, RunProxy(h0, key, "probe"))])
        p0 = RunProxy(h0, key, "probe")
        print(f"\nwall ms per message, median of {args.reps}; ring step = one exchange of the executors' ring")
        print(f"{'bytes':>9} {'fabric':>8} {'put':>8} {'call':>8} " + " ".join(f"{v:>14}" for v in VARIANTS)
              + f" {'old/new':>8} {'model':>8}")
        for nbytes in SIZES:
            parts = ray.get(p0.measure.remote(nbytes, args.reps))
            res = {v: [] for v in VARIANTS}
            runs = {}
            for v, cls in VARIANTS.items():
                runs[v] = _ring(pool, emu, cluster, cls, nbytes, args.reps, (h0, h1))
            for j in range(args.reps):  # interleaved: every variant sees the same load
                for v in VARIANTS:
                    res[v].append(_step(runs[v], j, nbytes, [RunProxy(h, key, "probe") for h in (h0, h1)]))
            for v in VARIANTS:
                for h in (h0, h1, pool.monitor):
                    h.drop.remote(runs[v][0])
            model = 1e3 * nbytes / 10e9
            print(f"{nbytes:>9} {parts['fabric']:8.2f} {parts['put']:8.2f} {parts['call']:8.2f} "
                  + " ".join(f"{1e3 * statistics.median(res[v]):14.2f}" for v in VARIANTS)
                  + f" {statistics.median(res['put+ref (old)']) / statistics.median(res['StageWorker']):8.2f}"
                  + f" {model:8.3f}")
        print(f"load average at end {os.getloadavg()}")
    finally:
        emu.shutdown()
    return 0


def _ring(pool, emu, cluster, cls, nbytes, reps, hosts):
    job = Job(1, 0.0, 1, (Stage(2, StageProfile(0.0, 0.0, 0.0, 2.0 * nbytes)),), CommPattern.RAR, model="x")
    plan = plan_job(job, Placement(((0, 1),)), cluster, iterations=reps)
    rk = new_run_key(1)
    mon = RunProxy(pool.monitor, rk, "monitor")
    ray.get(pool.monitor.create.remote(rk, "monitor", JobMonitor, 1, 2, None, 1.0, 0))
    ws = [RunProxy(h, rk, s.gpu) for s, h in zip(plan.workers, hosts)]
    peers = {s.gpu: w for s, w in zip(plan.workers, ws)}
    ray.get([h.setup.remote(rk, [(s.gpu, cls, (s, emu.fabric, mon, 1.0), [("connect", (peers, []))])])
             for s, h in zip(plan.workers, hosts)])
    return rk, ws


def _step(run, j, nbytes, probes) -> float:
    """Wall s of one ring step: (all-reduce of 2 chunks of nbytes - an empty call to both) / 2 steps."""
    flat = np.zeros(2 * nbytes // 4, dtype=np.float32)
    t0 = time.perf_counter()
    ray.get([p.noop.remote() for p in probes])
    t1 = time.perf_counter()
    ray.get([w.allreduce.remote(j, flat) for w in run[1]])
    return ((time.perf_counter() - t1) - (t1 - t0)) / 2



if __name__ == "__main__":
    sys.exit(main())
