"""Test-only stand-in for the emulator's EmuCluster/Fabric (used until raytestbed.emu.cluster exists).

Not part of the package: a Ray actor fabric that paces each transfer alone at the
NIC (different servers) or intra-server bandwidth, without sharing between flows.
"""

from __future__ import annotations

import asyncio
import time

import ray


class StubTimeScale:
    def __init__(self, factor: float = 1.0) -> None:
        self.factor = factor
        self.epoch = time.time()

    def to_wall(self, emu_s: float) -> float:
        return emu_s / self.factor

    def to_emu(self, wall_s: float) -> float:
        return wall_s * self.factor

    def now(self) -> float:
        return (time.time() - self.epoch) * self.factor


@ray.remote(num_cpus=0)
class StubFabric:
    def __init__(self, cluster, factor: float) -> None:
        self.cluster = cluster
        self.factor = factor
        self.sent: dict[int, int] = {}
        self.coflows: dict[str, dict] = {}

    async def transfer(self, job_id, src_gpu, dst_gpu, nbytes, coflow_id=None) -> float:
        c = self.cluster
        if src_gpu == dst_gpu:
            dur = 0.0
        elif c.server_of(src_gpu) == c.server_of(dst_gpu):
            dur = nbytes / c.intra_bps
        else:
            dur = nbytes / c.nic_bps
        t0 = time.time()
        await asyncio.sleep(dur / self.factor)
        self.sent[job_id] = self.sent.get(job_id, 0) + nbytes
        if coflow_id is not None:
            cf = self.coflows.setdefault(coflow_id, {"start_s": t0, "end_s": 0.0, "bytes": 0})
            cf["end_s"] = time.time()
            cf["bytes"] += nbytes
        return dur

    def stats(self) -> dict:
        return {"bytes_sent": dict(self.sent), "coflows": dict(self.coflows)}


class StubEmu:
    def __init__(self, cluster, time_scale: float = 1.0) -> None:
        self.cluster = cluster
        self.time_scale = StubTimeScale(time_scale)
        self.fabric = StubFabric.remote(cluster, time_scale)
        self._dead: set[int] = set()

    def worker_options(self, gpu_id: int) -> dict:
        return {}

    def alive_servers(self) -> set[int]:
        return set(range(self.cluster.num_servers)) - self._dead

    def kill_server(self, m: int) -> None:
        self._dead.add(m)

    def shutdown(self) -> None:
        ray.kill(self.fabric)
