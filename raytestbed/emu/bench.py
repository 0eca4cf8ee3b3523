"""Fabric benchmark: achieved vs configured bandwidth, weighted shares, per-message cost, start-up.

Real Ray actors move real numpy buffers while the Fabric paces each flow.
A *flow* is measured end to end on the wall clock as an executor sees it:
from the sender's start (all senders start at one common instant) until
both the receiver holds the bytes and the fabric released the flow; its
emulated duration is that wall time x the time-scale factor.

* per-flow ratio = (S / duration) / (B / n)          (n flows sharing link B)
* aggregate ratio = (n S / makespan) / B
* model ratio: the same with the fabric's own modelled duration (checks the
  pacing arithmetic; the end-to-end ratio is the honest one).

The time scale of each row is chosen as a trial would choose it
(:func:`~raytestbed.emu.timescale.suggest_factor` with the row's message
size): wall rate <= 100 MB/s and every message >= 0.3 s of wall time.

Run ``python scripts/bench_fabric.py`` or ``raytestbed bench fabric``
(``--quick`` for a short smoke run).  Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.emu.timescale import suggest_factor

MB = 1e6
NIC = 1.25e9  # 10 Gbit/s
INTRA = 300e9  # NVLink class


class _Endpoint:
    """A GPU worker stand-in: holds a preallocated payload, sends through the fabric, receives."""

    def __init__(self, max_bytes: int) -> None:
        self.buf = np.ones(max(1, int(max_bytes)), dtype=np.uint8)

    def recv(self, arr) -> int:
        return int(arr.nbytes)

    async def send(self, fabric, peer, job: int, src: int, dst: int, nbytes: int, coflow, start_at: float,
                   scale):
        await asyncio.sleep(max(0.0, start_at - time.time()))
        t0 = time.time()
        # control first (dated to the send instant), then the data
        fab = fabric.transfer.remote(job, src, dst, nbytes, coflow, scale.now())
        data = peer.recv.remote(self.buf[:nbytes])
        emu_s = await fab
        got = await data
        t1 = time.time()
        assert got == nbytes
        return t0, t1, emu_s

    async def rpc(self, fabric, n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await fabric.transfer.remote(0, 0, 0, 1)
            out.append(time.perf_counter() - t0)
        return out


def _cpu_s(pids) -> float:
    """User + system CPU seconds consumed so far by ``pids`` (from /proc/PID/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def _pss_mib(pids) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


class Bench:
    """One emulated cluster (4 servers x 8 GPUs, 10 Gbit/s NICs, 300 GB/s intra) and endpoint actors."""

    def __init__(self, max_bytes: int, object_store_bytes: int) -> None:
        import ray

        from raytestbed.emu.cluster import EmuCluster

        self.ray = ray
        self.max_bytes = int(max_bytes)
        self.cluster = Cluster.homogeneous(4, 8, NIC, INTRA, name="bench4x8")
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.emu = EmuCluster(self.cluster, time_scale=suggest_factor(self.cluster),
                                  object_store_memory=object_store_bytes, worker_pool=False)  # no jobs here
        ep = ray.remote(num_cpus=0)(_Endpoint)
        # server 0: GPUs 0-7 send, server 1: GPUs 8-15 receive; GPUs 16, 24 for the ring
        self.gpus = list(range(16)) + [16, 24]
        # only the senders of the same-NIC rows (server 0) need the largest payload
        self.ep = {g: ep.options(**self.emu.worker_options(g), max_concurrency=64).remote(
            max_bytes if g < 8 else min(max_bytes, 64 * MB)) for g in self.gpus}
        ray.get([a.recv.remote(np.zeros(1, np.uint8)) for a in self.ep.values()])
        # warm the object store pages once (first touch of shm runs at ~1 GB/s)
        ray.get([self.ep[8 + i].recv.remote(np.ones(min(max_bytes, 256 << 20), np.uint8)) for i in range(2)])

    def set_factor(self, factor: float) -> None:
        self.emu.set_time_scale(factor)

    def flows(self, pairs, sizes, jobs, coflow=None):
        """Start flows (src, dst) together; return [(t0, t1, model emu s)]."""
        ray = self.ray
        start = time.time() + 0.3
        refs = [self.ep[s].send.remote(self.emu.fabric, self.ep[d], j, s, d, int(n), coflow, start,
                                       self.emu.time_scale)
                for (s, d), n, j in zip(pairs, sizes, jobs)]
        return ray.get(refs)

    def close(self) -> None:
        self.emu.shutdown()


def _factor_for(size: float, bps: float) -> float:
    c = Cluster.homogeneous(1, 1, bps, bps)
    return suggest_factor(c, min_message_bytes=size, include_intra=True)


def same_nic(b: Bench, sizes_mb, counts, reps, out) -> None:
    out("\n## Achieved / configured, n flows on one NIC (10 Gbit/s), equal weights\n")
    out("| flow size | n | factor (emu s / wall s) | wall rate of link | per-flow ratio median [min, max] | "
        "aggregate ratio | model ratio |")
    out("|---|---|---|---|---|---|---|")
    for smb in sizes_mb:
        size = smb * MB
        f = _factor_for(size, NIC)
        b.set_factor(f)
        for n in counts:
            per, agg, model = [], [], []
            for _ in range(reps):
                res = b.flows([(i, 8 + i) for i in range(n)], [size] * n, list(range(n)))
                t0 = min(r[0] for r in res)
                for r in res:
                    per.append((size / ((r[1] - r[0]) * f)) / (NIC / n))
                    model.append((size / r[2]) / (NIC / n))
                agg.append((n * size / ((max(r[1] for r in res) - t0) * f)) / NIC)
            out(f"| {smb:g} MB | {n} | {f:.3g} | {NIC * f / MB:.3g} MB/s | {statistics.median(per):.3f} "
                f"[{min(per):.3f}, {max(per):.3f}] | {statistics.median(agg):.3f} | {statistics.median(model):.3f} |")


def weighted(b: Bench, size_mb, reps, out) -> None:
    out("\n## Weighted sharing on one NIC (sizes proportional to weights: all finish together)\n")
    out("| weights | expected shares | measured shares (median) | max relative error |")
    out("|---|---|---|---|")
    x = size_mb * MB
    f = _factor_for(x / 8, NIC)
    b.set_factor(f)
    for ws in ([3, 1], [1, 2, 3, 4], [1, 1, 1, 5]):
        n = len(ws)
        jobs = [100 + i for i in range(n)]
        b.ray.get(b.emu.fabric.set_weights.remote(dict(zip(jobs, map(float, ws)))))
        expect = [w / sum(ws) for w in ws]
        shares = [[] for _ in ws]
        for _ in range(reps):
            res = b.flows([(i, 8 + i) for i in range(n)], [x * e for e in expect], jobs)
            for i, r in enumerate(res):
                shares[i].append((x * expect[i] / ((r[1] - r[0]) * f)) / NIC)
        med = [statistics.median(s) for s in shares]
        err = max(abs(m / e - 1) for m, e in zip(med, expect))
        out(f"| {':'.join(map(str, ws))} | {', '.join(f'{e:.3f}' for e in expect)} | "
            f"{', '.join(f'{m:.3f}' for m in med)} | {100 * err:.1f}% |")


def links(b: Bench, size_mb, reps, out) -> None:
    out("\n## Different links, intra vs inter\n")
    out("| scenario | flows | configured per flow | per-flow ratio median [min, max] |")
    out("|---|---|---|---|")
    size = size_mb * MB
    # four links busy at once: keep the host-wide wall throughput (not just each link) <= 100 MB/s
    f = _factor_for(size, 4 * NIC)
    b.set_factor(f)
    ring = [(0, 8), (9, 16), (16, 24), (24, 1)]  # server 0->1->2->3->0: each NIC side used once
    per = []
    for _ in range(reps):
        for r in b.flows(ring, [size] * 4, [0, 1, 2, 3]):
            per.append((size / ((r[1] - r[0]) * f)) / NIC)
    out(f"| 4 flows on 4 different NICs (ring) | 4 x {size_mb:g} MB | {NIC / MB:g} MB/s | "
        f"{statistics.median(per):.3f} [{min(per):.3f}, {max(per):.3f}] |")
    # one intra-server flow (NVLink) next to one inter-server flow from the same server
    big = min(64 * MB, b.max_bytes)
    f2 = _factor_for(big, INTRA)
    b.set_factor(f2)
    small = 1 * MB
    pi, pe = [], []
    for _ in range(reps):
        ri, re_ = b.flows([(0, 1), (2, 10)], [big, small], [0, 1])
        pi.append((big / ((ri[1] - ri[0]) * f2)) / INTRA)
        pe.append((small / ((re_[1] - re_[0]) * f2)) / NIC)
    out(f"| intra-server flow (same server as an inter flow) | {big / MB:g} MB | {INTRA / MB:g} MB/s | "
        f"{statistics.median(pi):.3f} [{min(pi):.3f}, {max(pi):.3f}] |")
    out(f"| inter-server flow next to it | 1 MB | {NIC / MB:g} MB/s | "
        f"{statistics.median(pe):.3f} [{min(pe):.3f}, {max(pe):.3f}] |")


def overhead(b: Bench, out) -> None:
    out("\n## Per-message overhead\n")
    rtt = b.ray.get(b.ep[0].rpc.remote(b.emu.fabric, 200))[20:]
    out(f"* fabric.transfer call from an actor (no pacing, same GPU): median {1e3 * statistics.median(rtt):.2f} ms, "
        f"p90 {1e3 * sorted(rtt)[int(0.9 * len(rtt))]:.2f} ms")
    # a 1 KB message paced at a very fast link: the end-to-end floor
    b.set_factor(1.0)
    floor = []
    for _ in range(20):
        r = b.flows([(0, 8)], [1000], [0])[0]
        floor.append(r[1] - r[0])
    out(f"* 1 KB message end to end (fabric + actor call, link ~instant): median {1e3 * statistics.median(floor):.1f} ms "
        f"wall — the fixed cost a paced message should last >= ~30x of")
    wall_bps = 100 * MB
    b.set_factor(wall_bps / NIC)
    for smb in (1, 4):
        per = []
        for _ in range(5):
            r = b.flows([(0, 8)], [smb * MB], [0])[0]
            per.append((smb * MB / ((r[1] - r[0]) * wall_bps / NIC)) / NIC)
        out(f"* {smb} MB at 100 MB/s wall (no per-size time scale): ratio {statistics.median(per):.3f}")


def startup(shapes, out) -> None:
    """Start EmuClusters of the given (servers, gpus) shapes in fresh Ray instances."""
    import ray

    from raytestbed.emu.cluster import EmuCluster

    out("\n## Start-up of an emulated cluster (fresh local Ray, one ServerActor per server)\n")
    out("| servers x GPUs | start-up wall s (ray.init + placement groups + actors) | CPU s used by it "
        "(all Ray processes + driver) | PSS of Ray + actors | load avg |")
    out("|---|---|---|---|---|")
    import warnings

    for m, g in shapes:
        c = Cluster.homogeneous(m, g, NIC, INTRA)
        cpu0 = sum(os.times()[:2])
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                emu = EmuCluster(c, time_scale=suggest_factor(c), ready_timeout_s=300, worker_pool=False)
        except Exception as e:  # report and go on with the next shape
            out(f"| {m} x {g} = {m * g} GPUs | failed after {time.perf_counter() - t0:.0f} s: {e} | | | "
                f"{os.getloadavg()[0]:.0f} |")
            continue
        dt = time.perf_counter() - t0
        pids = [i["pid"] for i in ray.get([a.info.remote() for a in emu.servers])]
        pids.append(ray.get(emu.fabric.pid.remote()))
        node = ray._private.worker._global_node
        for procs in node.all_processes.values():
            pids += [p.process.pid for p in procs]
        cpu = _cpu_s(set(pids)) + sum(os.times()[:2]) - cpu0
        pids.append(os.getpid())
        out(f"| {m} x {g} = {m * g} GPUs | {dt:.1f} | {cpu:.1f} | {_pss_mib(set(pids)) / 1024:.2f} GiB | "
            f"{os.getloadavg()[0]:.0f} |")
        emu.shutdown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench_fabric", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 repetition (smoke run)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--skip-startup", action="store_true")
    ap.add_argument("--startup-only", action="store_true", help="only the start-up rows")
    ap.add_argument("--shapes", default="16x8,32x8,64x8", help="start-up shapes, servers x GPUs")
    args = ap.parse_args(argv)
    out = print
    if args.quick:
        sizes, counts, reps, big = [1, 16], [1, 2], 1, 16
    else:
        sizes, counts, reps, big = [1, 4, 16, 64, 256], [1, 2, 4, 8], args.reps, 64
    out(f"# bench_fabric ({'quick' if args.quick else 'full'}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} cores, load avg {os.getloadavg()[0]:.1f}")
    t0 = time.perf_counter()
    shapes = [tuple(int(v) for v in sh.split("x")) for sh in args.shapes.split(",")]
    if args.startup_only:
        startup(shapes, out)
        return 0
    b = Bench(max_bytes=int(max(sizes) * MB), object_store_bytes=int(max(3 << 30, 10 * max(sizes) * MB)))
    try:
        out(f"\nbench cluster: 4 servers x 8 GPUs, NIC 10 Gbit/s, intra 300 GB/s; start-up {time.perf_counter() - t0:.1f} s")
        same_nic(b, sizes, counts, reps, out)
        weighted(b, big, reps + 1, out)
        links(b, 16, reps + 1, out)
        overhead(b, out)
    finally:
        b.close()
    if not args.skip_startup:
        startup([(4, 8)] if args.quick else shapes, out)
    out(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
