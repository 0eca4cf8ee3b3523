"""One host process's link to the clock: its participants' steps go as one message per event-loop turn.

Every participant (a :class:`~raytestbed.emu.executors.worker.StageWorker` or
:class:`~raytestbed.emu.executors.worker.ParamServer`) blocks on the virtual clock once per block of
its program. Sent one by one, that is one call to the clock and one reply per participant and
block. A :class:`ClockLink` stands for the clock inside one host process (a worker-pool host, a
server's host, or the single in-process "host" of :class:`~raytestbed.emu.clock_actor.LocalLauncher`):

* :meth:`ClockLink.step` and :meth:`ClockLink.leave` queue the call; everything queued in the same
  turn of the host's event loop goes to the clock as ONE call,
  :meth:`ClockService.step_many(host key, items) <raytestbed.emu.clock_service.ClockService.step_many>`;
* the clock collects the wake-ups it hands out (one clock advance wakes many participants) per
  host and sends each host ONE call, :meth:`ClockLink.wake_many` (through the host actor's
  ``wake_many`` under Ray), which resolves the waiting steps.

The clock applies steps in participant-id order at its next quiet moment whatever the order they
arrive in (:mod:`raytestbed.emu.vclock`), so batching changes the number of messages, never the
timeline. A participant of a dropped run gets ``None`` as its wake-up, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence


def remote_call(handle, method: str, *args):
    """``handle.method(*args)`` on a Ray actor handle (``.remote``) or an in-process object; returns
    an awaitable (an ObjectRef, or a task for an in-process coroutine)."""
    m = getattr(handle, method)
    if hasattr(m, "remote"):
        return m.remote(*args)
    res = m(*args)
    if asyncio.iscoroutine(res):
        return asyncio.ensure_future(res)
    fut = asyncio.get_running_loop().create_future()
    fut.set_result(res)
    return fut


class ClockLink:
    """The clock as the participants of one host process see it (module docstring).

    Args:
        clock: the clock actor's handle, or the in-process :class:`~raytestbed.emu.clock_service.ClockService`.
        key: this host's name at the clock (the clock's launcher maps it back to the host).
    """

    def __init__(self, clock, key: Hashable) -> None:
        self.clock = clock
        self.key = key
        self._queue: list[tuple] = []
        self._waiting: dict[Hashable, asyncio.Future] = {}
        self._flush_due = False
        self.messages = 0  #: calls sent to the clock (``step_many``)
        self.items = 0  #: steps and leaves they carried

    async def step(self, pid, at: float, sends: Sequence, recvs: Sequence, records: Sequence[tuple] = ()):
        """Block participant ``pid`` on the clock (:meth:`ClockService.step`); returns its wake-up
        (``None``: its run was dropped)."""
        fut = asyncio.get_running_loop().create_future()
        self._waiting[pid] = fut
        self._queue.append(("step", pid, at, sends, recvs, records))
        self._flush_soon()
        return await fut

    async def leave(self, pid, at: float, records: Sequence[tuple] = ()) -> None:
        """Participant ``pid`` ended (its last records with it); sent with this turn's steps."""
        self._queue.append(("leave", pid, at, records))
        self._flush_soon()

    def wake_many(self, wakes: Sequence[tuple]) -> int:
        """The clock's wake-ups ``[(pid, Wake or None), ...]``: each resumes its waiting step."""
        for pid, w in wakes:
            fut = self._waiting.pop(pid, None)
            if fut is not None and not fut.done():
                fut.set_result(w)
        return len(wakes)

    def forget(self, run_key) -> None:
        """Run ``run_key`` was dropped here: stop waiting for its participants' wake-ups."""
        for pid in [p for p in self._waiting if isinstance(p, tuple) and p and p[0] == run_key]:
            fut = self._waiting.pop(pid)
            if not fut.done():
                fut.cancel()

    def _flush_soon(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        items, self._queue = self._queue, []
        if not items:
            return
        self.messages += 1
        self.items += len(items)
        pids = [it[1] for it in items if it[0] == "step"]
        asyncio.ensure_future(self._sent(remote_call(self.clock, "step_many", self.key, items), pids))

    async def _sent(self, reply, pids: list) -> None:
        """A step message failed (a protocol error, the clock gone): its steps raise it."""
        try:
            await reply
        except BaseException as e:  # noqa: BLE001 - handed to the participants that wait on it
            for pid in pids:
                fut = self._waiting.pop(pid, None)
                if fut is not None and not fut.done():
                    fut.set_exception(e)
