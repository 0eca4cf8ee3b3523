"""The ServerActor: one emulated server, living on the Ray node that holds its GPUs.

It is placed in bundle 0 of its server's placement group (so it sits on the node whose
``emu_gpu`` resources hold the server's GPUs) and needs no CPU. :meth:`ServerActor.watch` is a
call that never returns while the server lives, so the driver notices the actor's death
(``EmuCluster.poll_failures``). It is a :class:`~raytestbed.emu.pool.RunHost`: it hosts the
parameter-server tasks of runs that have a PS on this server, which die with it; the GPU workers
live in the worker pool's hosts in the same placement group, and die with it too.
"""

from __future__ import annotations

import asyncio
import os

from raytestbed.emu.pool import RunHost


class ServerActor(RunHost):
    """Emulated server ``server_id`` with ``gpus`` GPUs (global ids ``first_gpu..``)."""

    def __init__(self, server_id: int, first_gpu: int, gpus: int) -> None:
        self.server_id = server_id
        self.first_gpu = first_gpu
        self.gpus = gpus
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
