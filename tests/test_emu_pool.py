"""The worker pool (raytestbed/emu/pool.py): long-lived host actors run the jobs' workers as objects.

* host semantics without Ray: objects per run key, drop cancels a run's calls, late messages of a
  dropped run vanish and never reach a newer run of the same job;
* on Ray (one 2-server x 2-GPU EmuCluster for the module): a job preempted and restarted on the
  same GPUs finishes all its iterations in the same host processes; the same job without the pool
  (per-job actors) still runs; killing a server fails the job on it only, and its hosts are not used
  again.
"""

import asyncio
import sys
import time
from pathlib import Path

import pytest

from raytestbed.core.placement import Placement
from raytestbed.core.profile import default_profiles
from raytestbed.emu.pool import RunHost, RunProxy
from raytestbed.traces.jobs import build_job

sys.path.insert(0, str(Path(__file__).parent))
from conftest import small_cluster  # noqa: E402

MLP = default_profiles()["mlp-tiny"]


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


# ---------------------------------------------------------------- on Ray
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def emu():
    """2 servers x 2 GPUs, 0.5 Gbit/s NICs, 0.05 GB/s inside a server (paced accurately), real time, with the pool."""
    from raytestbed.emu.cluster import EmuCluster

    e = EmuCluster(small_cluster(servers=2, gpus=2, nic_gbps=0.5, intra_gbs=0.05), time_scale=1.0)
    try:
        yield e
    finally:
        e.shutdown()


def _pids(emu):
    return ray.get([h.pid.remote() for h in emu.pool.hosts])


def _wait_records(run, n, timeout=60):
    t0 = time.time()
    while len(run.records()) < n and not run.done() and time.time() - t0 < timeout:
        time.sleep(0.05)


def test_preempt_and_restart_on_the_same_gpus_finishes_every_iteration(emu):
    from raytestbed.emu.executors import start_job

    assert emu.pool is not None and emu.pool.processes == 5  # 4 GPU hosts + the monitor host
    pids = _pids(emu)
    total = 40
    job = build_job(1, 0.0, MLP, 2, "pipeline", total)
    place = Placement(((0,), (2,)))  # two stages on two servers
    run = start_job(emu, job, place, iterations=total, mode="replay")
    assert run.pool is emu.pool and run.run_key is not None
    _wait_records(run, 3)
    done = run.stop()
    assert run.failure is None and 3 <= done < total
    assert [r["iteration"] for r in run.records()] == list(range(done))
    # restart right away on the same GPUs: a new run key, the same host processes
    run2 = start_job(emu, job, place, iterations=total - done, mode="replay", start_iteration=done)
    assert run2.run_key != run.run_key
    assert run2.wait(120) and run2.failure is None and run2.iterations_done == total - done
    assert [r["iteration"] for r in run2.records()] == list(range(done, total))
    assert _pids(emu) == pids  # no actor was killed or created
    # both runs' objects are gone from the hosts (drops are asynchronous: wait for them)
    t0 = time.time()
    while time.time() - t0 < 10:
        left = ray.get([h.runs.remote() for h in emu.pool.hosts] + [emu.pool.monitor.runs.remote()])
        if not any(left):
            break
        time.sleep(0.1)
    assert not any(left)


def test_per_job_actors_still_work_without_the_pool(emu):
    from raytestbed.emu.executors import start_job

    job = build_job(2, 0.0, MLP, 2, "rar", 3)
    run = start_job(emu, job, Placement(((1, 3),)), iterations=3, mode="replay", worker_pool=False)
    assert run.pool is None and run.wait(120) and run.failure is None and run.iterations_done == 3
    assert all(isinstance(w, ray.actor.ActorHandle) for w in run.workers)


def test_kill_server_fails_only_the_job_on_it(emu):
    """Last in the module: server 1 stays dead."""
    from raytestbed.emu.executors import start_job
    from raytestbed.emu.fabric import ServerLostError

    on1 = start_job(emu, build_job(3, 0.0, MLP, 1, "rar", 100_000), Placement(((2,),)), iterations=100_000)
    on0 = start_job(emu, build_job(4, 0.0, MLP, 2, "rar", 30), Placement(((0, 1),)), iterations=30)
    _wait_records(on1, 1)
    host2 = emu.pool.host(2)
    emu.kill_server(1)
    assert on1.wait(60) and on1.failure is not None
    assert on0.wait(120) and on0.failure is None and on0.iterations_done == 30
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(host2.ping.remote(), timeout=30)  # the server's hosts died with it
    with pytest.raises(ServerLostError):
        emu.pool.host(2)  # ... and are not used again
    again = start_job(emu, build_job(5, 0.0, MLP, 1, "rar", 2), Placement(((3,),)), iterations=2)
    assert again.wait(60) and again.failure is not None and "lost" in again.failure
    # the other server's hosts keep working
    ok = start_job(emu, build_job(6, 0.0, MLP, 2, "rar", 2), Placement(((0, 1),)), iterations=2)
    assert ok.wait(60) and ok.failure is None and ok.iterations_done == 2


def test_trial_switch_worker_pool_false_reaches_the_emu_cluster(monkeypatch):
    """``emu: {worker_pool: false}`` in a trial starts the EmuCluster without the pool (default: with)."""
    import raytestbed.emu.cluster as cluster_mod
    from raytestbed.config import EmuConfig
    from raytestbed.emu.backend import run_emulated
    from raytestbed.schedulers.base import make_policy

    seen = {}

    class Stop(Exception):
        pass

    def fake(cluster, **kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(cluster_mod, "EmuCluster", fake)
    assert EmuConfig().worker_pool is True
    for flag in (False, True):
        with pytest.raises(Stop):
            run_emulated(small_cluster(), [], make_policy("fifo"), None, EmuConfig(time_scale=1.0, worker_pool=flag))
        assert seen["worker_pool"] is flag
