"""The ServerActor: one emulated server, living on the Ray node that holds its GPUs.

It is placed in bundle 0 of its server's placement group (so it sits on
the node whose ``emu_gpu`` resources hold the server's GPUs) and needs no
CPU.  It hosts its emulated GPUs' light-weight state: a GPU can be *held*
for a modelled compute time (replay mode, emulated seconds), and
:meth:`ServerActor.watch` is a call that never returns while the server
lives, so the driver notices the actor's death (``EmuCluster.poll_failures``).
Torch-running GPU workers are separate actors placed with
``EmuCluster.worker_options`` in the same placement group, or objects in the
worker pool's host actors there (:mod:`raytestbed.emu.pool`); they die with it.
The ServerActor is itself a :class:`~raytestbed.emu.pool.RunHost`: with the worker
pool it hosts the parameter-server tasks of runs that have a PS on this server.
"""

from __future__ import annotations

import asyncio
import os
import time

from raytestbed.emu.pool import RunHost
from raytestbed.emu.timescale import TimeScale


class ServerActor(RunHost):
    """Emulated server ``server_id`` with ``gpus`` GPUs (global ids ``first_gpu..``)."""

    def __init__(self, server_id: int, first_gpu: int, gpus: int, time_scale: TimeScale) -> None:
        self.server_id = server_id
        self.first_gpu = first_gpu
        self.gpus = gpus
        self.scale = time_scale
        self.busy_s = [0.0] * gpus  # emulated seconds each GPU was held
        self._forever = asyncio.Event()
        self.label = f"server {server_id}"
        self._host_init()

    async def info(self) -> dict:
        """Where this server runs: Ray node id, host pid, GPU range."""
        import ray

        return {"server_id": self.server_id, "gpus": list(range(self.first_gpu, self.first_gpu + self.gpus)),
                "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    async def ping(self) -> int:
        return self.server_id

    async def watch(self) -> None:
        """Never returns while the server lives; its ref fails when the actor dies."""
        await self._forever.wait()

    async def hold(self, gpu: int, emu_s: float) -> float:
        """Hold emulated GPU ``gpu`` for ``emu_s`` emulated seconds (replay compute); returns wall s held."""
        local = gpu - self.first_gpu
        if not 0 <= local < self.gpus:
            raise ValueError(f"server {self.server_id}: GPU {gpu} is not on this server")
        t0 = time.perf_counter()
        await asyncio.sleep(self.scale.to_wall(max(0.0, emu_s)))
        self.busy_s[local] += emu_s
        return time.perf_counter() - t0

    async def set_time_scale(self, time_scale: TimeScale) -> None:
        self.scale = time_scale

    async def gpu_busy(self) -> list[float]:
        """Emulated seconds each GPU of this server was held."""
        return list(self.busy_s)
