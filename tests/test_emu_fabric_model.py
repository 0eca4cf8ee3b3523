"""The fabric's model without Ray: LocalFabric (virtual time) and TimeScale."""

import asyncio
import math

import pytest

from raytestbed.core.cluster import Cluster, Rack, Server
from raytestbed.emu.fabric import FabricError, LocalFabric, ServerLostError
from raytestbed.emu.timescale import TimeScale, check_links, suggest_factor
from raytestbed.errors import ConfigError, PolicyError

MB = 1e6


def two_servers(nic=100 * MB, intra=1000 * MB, gpus=4):
    return Cluster.homogeneous(2, gpus, nic, intra)


def run(coro):
    return asyncio.run(coro)


def test_single_flow_takes_size_over_rate():
    async def main():
        f = LocalFabric(two_servers())
        return await f.transfer(0, 0, 4, 50 * MB)

    assert run(main()) == pytest.approx(0.5)


def test_two_flows_on_one_nic_each_get_half():
    async def main():
        f = LocalFabric(two_servers())
        a, b = await asyncio.gather(f.transfer(0, 0, 4, 50 * MB), f.transfer(1, 1, 5, 50 * MB))
        return a, b

    assert run(main()) == pytest.approx((1.0, 1.0))


def test_weights_three_to_one_share_75_25():
    async def main():
        f = LocalFabric(two_servers())
        await f.set_weights({0: 3.0, 1: 1.0})
        # equal sizes: job 0 at 75 MB/s finishes 75 MB... job 1 at 25 MB/s until then
        a, b = await asyncio.gather(f.transfer(0, 0, 4, 75 * MB), f.transfer(1, 1, 5, 75 * MB))
        return a, b

    a, b = run(main())
    assert a == pytest.approx(1.0)  # 75 MB at 75 MB/s
    assert b == pytest.approx(1.0 + 50 / 100)  # 25 MB in 1 s, then 50 MB alone at 100 MB/s


def test_intra_server_flow_is_not_limited_by_the_nic():
    async def main():
        f = LocalFabric(two_servers())
        return await asyncio.gather(f.transfer(0, 0, 1, 500 * MB), f.transfer(1, 0, 4, 50 * MB))

    intra, inter = run(main())
    assert intra == pytest.approx(0.5)  # 500 MB at 1000 MB/s, not 100 MB/s
    assert inter == pytest.approx(0.5)


def test_flows_of_one_job_between_two_servers_share_one_connection():
    async def main():
        f = LocalFabric(two_servers())
        # job 0 opens three transfers 0->1 (one connection), job 1 one transfer: max-min per connection
        return await asyncio.gather(*(f.transfer(0, g, 4, 10 * MB, "c") for g in range(3)),
                                    f.transfer(1, 3, 5, 50 * MB))

    *mine, other = run(main())
    assert mine == pytest.approx([0.6] * 3)  # 30 MB at 50 MB/s
    assert other == pytest.approx(0.6 + 20 / 100)  # 30 MB at 50 MB/s, then 20 MB alone


def test_ingress_is_a_bottleneck_too():
    c = Cluster.homogeneous(3, 1, 100 * MB, 1000 * MB)

    async def main():
        f = LocalFabric(c)
        return await asyncio.gather(f.transfer(0, 0, 2, 50 * MB), f.transfer(1, 1, 2, 50 * MB))

    assert run(main()) == pytest.approx((1.0, 1.0))


def test_rack_uplink_is_shared():
    c = Cluster(servers=tuple(Server(i, 1, 100 * MB, 100 * MB, rack=i // 2) for i in range(4)),
                intra_bps=1000 * MB, racks=(Rack(0, 50 * MB, 50 * MB), Rack(1, 50 * MB, 50 * MB)))

    async def main():
        f = LocalFabric(c)
        return await asyncio.gather(f.transfer(0, 0, 2, 25 * MB), f.transfer(1, 1, 3, 25 * MB))

    assert run(main()) == pytest.approx((1.0, 1.0))  # 50 MB/s uplink shared by two flows


def test_set_rates_overrides_max_min_and_rest_gets_residual():
    async def main():
        f = LocalFabric(two_servers())
        await f.set_rates({0: 20 * MB})
        return await asyncio.gather(f.transfer(0, 0, 4, 20 * MB), f.transfer(1, 1, 5, 80 * MB))

    assert run(main()) == pytest.approx((1.0, 1.0))


def test_slow_link_divides_capacity():
    async def main():
        f = LocalFabric(two_servers())
        await f.slow_link(("egress", 0), 4.0)
        return await f.transfer(0, 0, 4, 25 * MB)

    assert run(main()) == pytest.approx(1.0)


def test_rate_change_mid_flight_repaces_the_flow():
    async def main():
        f = LocalFabric(two_servers())
        task = asyncio.ensure_future(f.transfer(0, 0, 4, 100 * MB))
        # a second flow of another job starting 0.5 s later (virtual start time)
        other = asyncio.ensure_future(f.transfer(1, 1, 5, 25 * MB, start_s=0.5))
        return await task, await other

    a, b = run(main())
    # 0..0.5 s alone: 50 MB; then halves: job 1 needs 0.5 s for 25 MB; job 0 sends 25 MB; last 25 MB alone
    assert b == pytest.approx(0.5)
    assert a == pytest.approx(1.25)


def test_coflow_completion_and_bytes_sent():
    async def main():
        f = LocalFabric(two_servers())
        await asyncio.gather(f.transfer(7, 0, 4, 10 * MB, "cf"), f.transfer(7, 4, 0, 30 * MB, "cf"))
        return await f.stats()

    s = run(main())
    assert s["bytes_sent"] == {7: pytest.approx(40 * MB)}
    cf = s["coflows"]["cf"]
    assert cf["start_s"] == 0.0 and cf["end_s"] == pytest.approx(0.3) and cf["bytes"] == pytest.approx(40 * MB)


def test_same_gpu_and_zero_bytes_take_no_time_and_bad_ids_fail():
    async def main():
        f = LocalFabric(two_servers())
        assert await f.transfer(0, 3, 3, 10 * MB) == 0.0
        assert await f.transfer(0, 3, 4, 0) == 0.0
        with pytest.raises(FabricError):
            await f.transfer(0, 0, 99, 10)
        with pytest.raises(PolicyError):
            await f.set_weights({0: 0.0})

    run(main())


def test_lost_server_fails_in_flight_and_later_transfers():
    async def main():
        f = LocalFabric(two_servers())
        t = asyncio.ensure_future(f.transfer(0, 0, 4, 10 * MB))
        await asyncio.sleep(0)
        assert await f.fail_server(1) == [0]
        with pytest.raises(ServerLostError):
            await t
        with pytest.raises(ServerLostError):
            await f.transfer(1, 5, 0, 10)
        assert await f.transfer(2, 0, 1, 10 * MB) == pytest.approx(0.01)  # server 0 still works

    run(main())


def test_time_scale_conversions_and_checks():
    ts = TimeScale(0.01)
    assert ts.tdf == pytest.approx(100)
    assert ts.to_wall(1.0) == pytest.approx(100.0) and ts.to_emu(100.0) == pytest.approx(1.0)
    assert TimeScale.from_tdf(100).factor == pytest.approx(0.01)
    with pytest.raises(ConfigError):
        TimeScale(0)
    with pytest.raises(ConfigError):
        TimeScale(math.inf)
    c = Cluster.homogeneous(2, 4, 1.25e9, 300e9)  # 10 Gbit/s NIC, NVLink
    f = suggest_factor(c)
    assert f == pytest.approx(100e6 / 1.25e9)
    inaccurate, unusable = check_links(c, TimeScale(f))
    assert [m.split(":")[0] for m in unusable] == ["intra-server"] and not inaccurate
    inaccurate, unusable = check_links(c, TimeScale(1.0))
    assert len(unusable) == 5 and not inaccurate


def test_suggest_factor_keeps_small_messages_long_enough():
    c = Cluster.homogeneous(2, 4, 1.25e9, 300e9)
    # 3 MB messages must last >= 0.3 s wall: wall rate <= 10 MB/s
    assert suggest_factor(c, min_message_bytes=3e6) == pytest.approx(10e6 / 1.25e9)
    assert suggest_factor(c, min_message_bytes=1e12) == pytest.approx(100e6 / 1.25e9)
    assert suggest_factor(Cluster.homogeneous(1, 1, 1e3, 1e3)) == 1.0  # never faster than real time


def test_rescaled_time_scale_continues_the_clock():
    ts = TimeScale(2.0, epoch=0.0)
    before = ts.now()
    new = ts.rescaled(0.5)
    assert new.factor == 0.5 and new.now() == pytest.approx(before, rel=1e-6)


def test_paced_backdating_replays_the_control_delay_without_double_counting():
    """Paced mode (wall clock, no Ray): a flow dated back to a common start shares exactly."""
    from raytestbed.emu.fabric import Fabric

    async def main():
        f = Fabric(two_servers(), time_scale=1.0, mode="paced")
        f.max_backdate_wall_s = 5.0  # the test may run on a loaded host
        t0 = f.scale.now()
        # 50 MB alone would take 0.5 s: the second request must arrive before the first ends,
        # which holds on a loaded host too (it is sent 30 ms later)
        a = asyncio.ensure_future(f.transfer(0, 0, 4, 50 * MB, None, t0))
        await asyncio.sleep(0.03)  # the second request reaches the fabric 30 ms late
        b = asyncio.ensure_future(f.transfer(1, 1, 5, 50 * MB, None, t0))
        return await a, await b

    a, b = run(main())
    # as if both had started at t0: 100 MB over 100 MB/s
    assert a == pytest.approx(1.0, rel=1e-6) and b == pytest.approx(1.0, rel=1e-6)


def test_paced_backdating_ends_a_short_flow_in_the_past():
    """A flow that would have ended during the control delay ends then, not when the call arrived,
    and a flow sharing its link gets back exactly what it lent it."""
    from raytestbed.emu.fabric import Fabric

    async def main():
        f = Fabric(two_servers(), time_scale=1.0, mode="paced")  # NIC 100 MB/s
        f.max_backdate_wall_s = 5.0  # the test may run on a loaded host
        t0 = f.scale.now()
        long = asyncio.ensure_future(f.transfer_span(0, 0, 4, 50 * MB, None, t0))
        await asyncio.sleep(0.3)  # the short one's request arrives 0.3 s late
        short = await f.transfer_span(1, 1, 5, 5 * MB, None, t0 + 0.05)
        return await long, short

    (la, lb), (sa, sb) = run(main())
    # short: issued at t0 + 0.05, 5 MB at half the NIC = 0.1 s -> ended at t0 + 0.15, before it arrived
    assert sa == pytest.approx(la + 0.05, abs=1e-6) and sb - sa == pytest.approx(0.1, rel=1e-6)
    # long: 0.1 s at half rate costs it 5 MB of progress -> 0.5 s + 0.05 s
    assert lb - la == pytest.approx(0.55, rel=1e-6)


def test_virtual_mode_settles_before_advancing_and_honours_start_times():
    """Virtual clock with a settle window (the Fabric actor's virtual mode, here in-process)."""
    from raytestbed.emu.fabric import Fabric

    async def main():
        f = Fabric(two_servers(), mode="virtual", settle_s=0.05)
        a = asyncio.ensure_future(f.transfer(0, 0, 4, 10 * MB))
        await asyncio.sleep(0.005)  # arrives within the settle window: shares the NIC from t = 0
        b = asyncio.ensure_future(f.transfer(1, 1, 5, 10 * MB))
        c = asyncio.ensure_future(f.transfer(2, 2, 6, 10 * MB, None, 1.0))  # starts at emulated 1.0 s
        ta, tb, tc = await a, await b, await c
        # a late sender: its start time is already behind the virtual clock
        d = await f.transfer(3, 3, 7, 10 * MB, None, 0.0)
        return ta, tb, tc, d, await f.stats()

    ta, tb, tc, d, stats = run(main())
    assert (ta, tb) == (pytest.approx(0.2), pytest.approx(0.2))
    assert tc == pytest.approx(0.1)  # alone on the NIC after the first two finished at 0.2 s
    assert d == pytest.approx(0.1) and stats["late_transfers"] == 1
    assert stats["now_s"] == pytest.approx(1.2)


# ---------------------------------------------------------------- reserved NIC shares (A-SRPT's model)
def test_reserved_share_gives_a_lone_flow_only_its_gpus_share():
    """nic_share 'reserved': a GPU owns NIC / g; a lone flow does not get the whole NIC as under 'fair'."""
    cl = Cluster.homogeneous(2, 4, 100 * MB, 1000 * MB)

    def took(share):
        async def main():
            f = LocalFabric(cl, nic_share=share)
            return await f.transfer(0, 0, 4, 50 * MB)

        return asyncio.run(main())

    assert took("fair") == pytest.approx(0.5)
    assert took("reserved") == pytest.approx(2.0)  # 50 MB at 100 MB/s / 4 GPUs


def test_reserved_share_two_gpus_each_get_their_share_and_one_gpu_shares_its_own():
    cl = Cluster.homogeneous(2, 4, 100 * MB, 1000 * MB)

    async def main():
        f = LocalFabric(cl, nic_share="reserved")
        # GPUs 0 and 1 (server 0) send to GPUs 4 and 5 (server 1); GPU 2 sends two flows of another job
        return await asyncio.gather(f.transfer(0, 0, 4, 25 * MB), f.transfer(0, 1, 5, 25 * MB),
                                    f.transfer(1, 2, 6, 25 * MB), f.transfer(1, 2, 7, 25 * MB))

    a, b, c, d = asyncio.run(main())
    assert a == pytest.approx(1.0) and b == pytest.approx(1.0)  # 25 MB at 25 MB/s each
    assert c == pytest.approx(2.0) and d == pytest.approx(2.0)  # GPU 2's 25 MB/s shared by its two flows


def test_unknown_nic_share_is_refused():
    with pytest.raises(ValueError, match="nic_share"):
        LocalFabric(Cluster.homogeneous(2, 1, 100 * MB, 1000 * MB), nic_share="greedy")
