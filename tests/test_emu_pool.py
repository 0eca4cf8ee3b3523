"""The worker pool (raytestbed/emu/pool.py): long-lived host actors run the jobs' workers as objects.

Host semantics without Ray: objects per run key, drop cancels a run's calls, late messages of a
dropped run vanish and never reach a newer run of the same job. On Ray: tests/test_emu_ray.py.
"""

import asyncio

import pytest

from raytestbed.emu.pool import RunHost, RunProxy


# ---------------------------------------------------------------- host semantics (no Ray)
class Box:
    def __init__(self, tag):
        self.tag = tag
        self.got = []

    async def deliver(self, x):
        self.got.append(x)

    async def wait_forever(self):
        await asyncio.Event().wait()

    def get(self):
        return (self.tag, list(self.got))


def test_host_keys_runs_and_drop_cancels_and_late_messages_vanish():
    async def main():
        h = RunHost("t")
        old, new = (7, "a"), (7, "b")
        await h.create(old, 0, Box, "old")
        await h.call(old, 0, "deliver", 1)
        waiter = asyncio.ensure_future(h.call(old, 0, "wait_forever"))
        await asyncio.sleep(0)
        assert await h.drop(old) == 1
        assert await waiter is None  # the run's pending call was cancelled, not the host
        # the job restarts on the same host under a new key; a late message of the old run is dropped
        await h.setup(new, [(0, Box, ("new",), [("deliver", (2,))])])
        assert await h.call(old, 0, "deliver", 99) is None
        assert await h.call(new, 0, "get") == ("new", [2])
        with pytest.raises(LookupError):
            await h.call(old, 0, "get")
        assert await h.runs() == [new]

    asyncio.run(main())


def test_run_proxy_looks_like_an_actor_handle():
    calls = []

    class Handle:
        class call:
            @staticmethod
            def remote(*a):
                calls.append(a)
                return "ref"

    p = RunProxy(Handle(), (3, "k"), 5)
    assert p.deliver.remote("key", "data") == "ref"
    assert calls == [((3, "k"), 5, "deliver", "key", "data")]
    with pytest.raises(AttributeError):
        p._private
