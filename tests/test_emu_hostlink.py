"""One message per host and event-loop turn between the participants and the clock
(raytestbed/emu/hostlink.py), and same-host messages without Ray (raytestbed/emu/pool.py RunProxy).

Counts messages, never times them: the link itself without Ray, the in-process clock service, and
a 4-GPU server whose workers share one worker-pool host on a real local Ray.
"""

import asyncio

import pytest

from conftest import small_cluster
from raytestbed.core.placement import Placement
from raytestbed.core.profile import default_profiles
from raytestbed.emu.clock_actor import local_service
from raytestbed.emu.fastforward import FastForward
from raytestbed.emu.hostlink import ClockLink
from raytestbed.traces.jobs import build_job

MLP = default_profiles()["mlp-tiny"]


class _Clock:
    """Records the messages a link sends; fails one on request."""

    def __init__(self, fail: bool = False) -> None:
        self.got: list = []
        self.fail = fail

    async def step_many(self, host, items):
        self.got.append((host, [(it[0], it[1]) for it in items]))
        if self.fail:
            raise RuntimeError("clock says no")
        return len(items)


def test_the_steps_of_one_turn_go_as_one_message_and_wake_ups_come_back_together():
    async def main():
        clock = _Clock()
        link = ClockLink(clock, "h0")
        steps = [asyncio.ensure_future(link.step(("r", "w", i), 0.0, (), ())) for i in range(4)]
        await asyncio.sleep(0)  # the four steps queue in one turn
        await link.leave(("r", "w", 9), 0.0)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert clock.got == [("h0", [("step", ("r", "w", i)) for i in range(4)] + [("leave", ("r", "w", 9))])]
        assert (link.messages, link.items) == (1, 5)
        assert link.wake_many([(("r", "w", i), f"wake {i}") for i in (2, 0, 3)]) == 3
        assert [await s for s in steps[:1]] == ["wake 0"]
        assert not steps[1].done()
        link.wake_many([(("r", "w", 1), None)])  # its run was dropped
        assert await steps[1] is None
        assert await steps[2] == "wake 2"

    asyncio.run(main())


def test_a_failed_step_message_raises_in_every_step_it_carried():
    async def main():
        link = ClockLink(_Clock(fail=True), "h0")
        steps = [asyncio.ensure_future(link.step(("r", "w", i), 0.0, (), ())) for i in range(2)]
        for s in steps:
            with pytest.raises(RuntimeError, match="clock says no"):
                await s

    asyncio.run(main())


def test_in_process_four_workers_step_together():
    """A 4-worker ring on one server, in-process (one host): the clock gets each clock step's four
    steps in one message and sends their four wake-ups in one, after the workers' first steps."""
    async def main():
        svc = local_service(small_cluster(servers=1, gpus=4), fast_forward=FastForward(enabled=False))
        job = build_job(3, 0.0, MLP, 4, "rar", 6)
        rid = await svc.start_run(job, Placement(((0, 1, 2, 3),)), 6, "replay")
        info = await svc.wait_run(rid, 60)
        svc._loop_task.cancel()
        return info, await svc.stats()

    info, st = asyncio.run(main())
    assert info["failure"] is None and info["iterations_done"] == 6
    assert st["steps"] > 40
    assert st["step_messages"] <= st["steps"] / 4 + 2  # the first steps may come one by one
    assert st["wake_messages"] <= st["wakes"] / 4 + 2


@pytest.fixture(scope="module")
def emu4():
    pytest.importorskip("ray")
    from raytestbed.emu.cluster import EmuCluster

    e = EmuCluster(small_cluster(servers=1, gpus=4, nic_gbps=1.0, intra_gbs=10.0),
                   fast_forward=FastForward(enabled=False), gpus_per_actor=4, num_cpus=2)
    try:
        yield e
    finally:
        e.shutdown()


def test_on_ray_one_host_sends_one_step_message_per_clock_step_and_delivers_without_ray(emu4):
    import ray

    from raytestbed.emu.executors import start_job

    (host,) = emu4.pool.hosts
    job = build_job(4, 0.0, MLP, 4, "rar", 6)
    run = start_job(emu4, job, Placement(((0, 1, 2, 3),)), iterations=6, mode="replay")
    assert run.wait(120) and run.failure is None and run.iterations_done == 6
    st = emu4.clock_stats()
    hs = ray.get(host.stats.remote())
    # the only calls into the host through Ray: the launcher starting the four workers' loops (every
    # ring chunk between them is a plain call inside the host)
    assert hs["calls_in"] == 4
    assert st["steps"] > 40
    assert hs["clock_messages"] == st["step_messages"] <= st["steps"] / 4 + 4
    assert st["wake_messages"] <= st["wakes"] / 4 + 4
