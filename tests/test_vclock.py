"""The virtual clock without Ray or asyncio: its fluid fabric, its blocking and ordering rules.

Participants are generators: each ``yield (at, sends, recvs)`` is a step; the value sent back is
its :class:`Wake`. :func:`drive` plays the role of the clock actor's loop (admit when quiet,
else advance).
"""

import math
import random

import pytest

from raytestbed.core.cluster import Cluster, Rack, Server
from raytestbed.emu.vclock import ClockError, Send, VirtualClock
from raytestbed.errors import PolicyError

MB = 1e6


def two_servers(nic=100 * MB, intra=1000 * MB, gpus=4):
    return Cluster.homogeneous(2, gpus, nic, intra)


def drive(clock: VirtualClock, procs: dict, order=None, until=math.inf):
    """Run generator participants on ``clock``; returns {pid: [wakes]}. ``order`` permutes the order in
    which the steps of one round reach the clock (as Ray's arbitrary delivery order would)."""
    wakes = {pid: [] for pid in procs}
    ready: list = []

    def resume(pid, w):
        try:
            at, sends, recvs = procs[pid].send(w)
        except StopIteration:
            clock.leave(pid)
            return
        ready.append((pid, at, sends, recvs))

    for pid in procs:
        clock.register(pid, pid[0] if isinstance(pid, tuple) else "g")
        resume(pid, None)
    woken: list = []
    while True:
        if order is not None:
            order(ready)
        for pid, at, sends, recvs in ready:
            clock.step(pid, at, sends, recvs, lambda w, pid=pid: woken.append((pid, w)))
        ready.clear()
        assert clock.quiet()
        clock.admit()
        if not woken:
            if not math.isfinite(clock.next_time()) or clock.next_time() > until:
                break
            clock.advance()
        for pid, w in woken:
            if w is not None:
                wakes[pid].append(w)
                resume(pid, w)
        woken.clear()
    return wakes


def sender(t, key, job, src, dst, n, coflow=None):
    yield (t, [Send(key, job, src, dst, n, coflow)], [])


def took(wakes, pid, key):
    a, b = wakes[pid][0].spans[key]
    return b - a


# ---------------------------------------------------------------- the fluid fabric on the clock
def test_single_flow_takes_size_over_rate():
    w = drive(VirtualClock(two_servers()), {"a": sender(0.0, "k", 0, 0, 4, 50 * MB)})
    assert took(w, "a", "k") == pytest.approx(0.5) and w["a"][0].t == pytest.approx(0.5)


def test_two_flows_on_one_nic_each_get_half():
    w = drive(VirtualClock(two_servers()), {"a": sender(0, "x", 0, 0, 4, 50 * MB), "b": sender(0, "y", 1, 1, 5, 50 * MB)})
    assert (took(w, "a", "x"), took(w, "b", "y")) == pytest.approx((1.0, 1.0))


def test_weights_three_to_one_share_75_25():
    c = VirtualClock(two_servers())
    c.net.set_weights({0: 3.0, 1: 1.0})
    w = drive(c, {"a": sender(0, "x", 0, 0, 4, 75 * MB), "b": sender(0, "y", 1, 1, 5, 75 * MB)})
    assert took(w, "a", "x") == pytest.approx(1.0)  # 75 MB at 75 MB/s
    assert took(w, "b", "y") == pytest.approx(1.5)  # 25 MB in 1 s, then 50 MB alone at 100 MB/s


def test_intra_server_flow_is_not_limited_by_the_nic():
    w = drive(VirtualClock(two_servers()), {"a": sender(0, "x", 0, 0, 1, 500 * MB), "b": sender(0, "y", 1, 0, 4, 50 * MB)})
    assert took(w, "a", "x") == pytest.approx(0.5) and took(w, "b", "y") == pytest.approx(0.5)


def test_transfers_of_one_job_between_two_servers_share_one_connection():
    def three():
        yield (0, [Send(("m", g), 0, g, 4, 10 * MB, "c") for g in range(3)], [])

    w = drive(VirtualClock(two_servers()), {"a": three(), "b": sender(0, "y", 1, 3, 5, 50 * MB)})
    assert [took(w, "a", ("m", g)) for g in range(3)] == pytest.approx([0.6] * 3)  # 30 MB at 50 MB/s
    assert took(w, "b", "y") == pytest.approx(0.8)  # 30 MB at 50 MB/s, then 20 MB alone


def test_ingress_and_rack_uplinks_are_bottlenecks_too():
    c3 = Cluster.homogeneous(3, 1, 100 * MB, 1000 * MB)
    w = drive(VirtualClock(c3), {"a": sender(0, "x", 0, 0, 2, 50 * MB), "b": sender(0, "y", 1, 1, 2, 50 * MB)})
    assert (took(w, "a", "x"), took(w, "b", "y")) == pytest.approx((1.0, 1.0))
    racks = Cluster(servers=tuple(Server(i, 1, 100 * MB, 100 * MB, rack=i // 2) for i in range(4)),
                    intra_bps=1000 * MB, racks=(Rack(0, 50 * MB, 50 * MB), Rack(1, 50 * MB, 50 * MB)))
    w = drive(VirtualClock(racks), {"a": sender(0, "x", 0, 0, 2, 25 * MB), "b": sender(0, "y", 1, 1, 3, 25 * MB)})
    assert (took(w, "a", "x"), took(w, "b", "y")) == pytest.approx((1.0, 1.0))


def test_set_rates_slow_link_and_bad_weights():
    c = VirtualClock(two_servers())
    c.net.set_rates({0: 20 * MB})
    w = drive(c, {"a": sender(0, "x", 0, 0, 4, 20 * MB), "b": sender(0, "y", 1, 1, 5, 80 * MB)})
    assert (took(w, "a", "x"), took(w, "b", "y")) == pytest.approx((1.0, 1.0))
    c = VirtualClock(two_servers())
    c.net.set_link_factor(("egress", 0), 4.0)
    assert took(drive(c, {"a": sender(0, "x", 0, 0, 4, 25 * MB)}), "a", "x") == pytest.approx(1.0)
    with pytest.raises(PolicyError):
        c.net.set_weights({0: 0.0})


def test_a_step_in_the_future_starts_its_transfer_then_and_repaces_the_others():
    w = drive(VirtualClock(two_servers()), {"a": sender(0.0, "x", 0, 0, 4, 100 * MB),
                                            "b": sender(0.5, "y", 1, 1, 5, 25 * MB)})
    assert w["b"][0].spans["y"] == pytest.approx((0.5, 1.0))  # shares the NIC from 0.5 s
    assert took(w, "a", "x") == pytest.approx(1.25)  # 50 MB alone, 25 MB at half, 25 MB alone


def test_same_gpu_and_zero_bytes_take_no_time_and_a_timer_wakes_at_its_time():
    def p():
        w = yield (0.0, [Send("s", 0, 3, 3, 10 * MB), Send("z", 0, 3, 4, 0)], [])
        assert w.t == 0.0 and w.spans == {"s": (0.0, 0.0), "z": (0.0, 0.0)}
        w = yield (2.5, [], [])  # a compute charge of 2.5 s
        assert w.t == 2.5

    drive(VirtualClock(two_servers()), {"a": p()})


def test_coflow_events_and_bytes_sent():
    seen = []
    c = VirtualClock(two_servers(), on_coflow=lambda *a: seen.append(a))
    drive(c, {"a": sender(0, "x", 7, 0, 4, 10 * MB, "cf"), "b": sender(0, "y", 7, 4, 0, 30 * MB, "cf")})
    assert c.bytes_sent == {7: pytest.approx(40 * MB)}
    # the clock reports the second transfer's start too; the scheduler drops it (same instant as the start)
    assert seen == [("started", 0.0, 7, "cf", 0.0), ("grew", 0.0, 7, "cf", 0.0),
                    ("finished", pytest.approx(0.3), 7, "cf", pytest.approx(40 * MB))]


# ---------------------------------------------------------------- blocking and ordering rules
def test_time_does_not_pass_while_a_participant_is_runnable():
    c = VirtualClock(two_servers())
    c.register("a", "g")
    c.register("b", "g")
    c.step("a", 0.0, [Send("x", 0, 0, 4, 50 * MB)], [], lambda w: None)
    assert not c.quiet() and c.runnable == {"b"}  # b has not blocked: the loop must wait
    c.step("b", 0.0, [], ["x"], lambda w: None)
    assert c.quiet()


def test_a_receiver_that_asks_before_the_sender_sends_wakes_when_the_flow_arrives():
    def recv():
        w = yield (0.0, [], ["x"])
        assert w.t == pytest.approx(2.0) and w.spans["x"] == pytest.approx((1.5, 2.0))

    def late_sender():
        w = yield (1.5, [], [])  # computes 1.5 s first
        yield (w.t, [Send("x", 0, 0, 4, 50 * MB)], [])

    w = drive(VirtualClock(two_servers()), {"r": recv(), "s": late_sender()})
    assert w["r"][0].t == pytest.approx(2.0)


def test_a_receiver_that_asks_after_the_flow_arrived_gets_it_at_once():
    def recv():
        w = yield (3.0, [], [])
        w = yield (w.t, [], ["x"])
        assert w.t == 3.0 and w.spans["x"] == pytest.approx((0.0, 0.5))

    drive(VirtualClock(two_servers()), {"r": recv(), "s": sender(0.0, "x", 0, 0, 4, 50 * MB)})


def _round_robin_ring(n_iters=3):
    """Four participants exchanging chunks in a ring over two servers, with compute in between."""
    procs = {}
    for r in range(4):
        def worker(r=r):
            t = 0.0
            for i in range(n_iters):
                w = yield (t + 0.01 * (r + 1), [Send((i, r), r, r * 2 % 8, (r * 2 + 2) % 8, (r + 1) * 10 * MB)],
                           [(i, (r - 1) % 4)])
                t = w.t
        procs[("job", r)] = worker()
    return procs


def test_results_do_not_depend_on_the_order_steps_reach_the_clock():
    base = drive(VirtualClock(two_servers()), _round_robin_ring())
    for seed in range(5):
        rng = random.Random(seed)
        got = drive(VirtualClock(two_servers()), _round_robin_ring(), order=rng.shuffle)
        assert {p: [(x.t, x.spans) for x in ws] for p, ws in got.items()} == \
            {p: [(x.t, x.spans) for x in ws] for p, ws in base.items()}


def test_completions_come_before_scheduled_items_at_the_same_time():
    seen = []
    c = VirtualClock(two_servers(), on_item=lambda t, it: seen.append(("item", t, it[1])))
    c.schedule(0.5, 2, ("arrival", 1))
    c.schedule(0.5, 1, ("fault", 2))
    c.register("a", "g")
    c.step("a", 0.0, [Send("x", 0, 0, 4, 50 * MB)], [], lambda w: seen.append(("wake", w.t)))
    c.admit()
    while math.isfinite(c.next_time()):
        c.advance()
    assert seen == [("wake", 0.5), ("item", 0.5, 2), ("item", 0.5, 1)]


def test_drop_cancels_a_groups_waits_and_frees_its_links():
    c = VirtualClock(two_servers())
    got = {}
    for pid, grp in (("a", 1), ("b", 2)):
        c.register(pid, grp)
    c.step("a", 0.0, [Send("x", 0, 0, 4, 100 * MB)], [], lambda w: got.setdefault("a", w))
    c.step("b", 0.0, [Send("y", 1, 1, 5, 100 * MB)], [], lambda w: got.setdefault("b", w))
    c.admit()
    c.schedule(0.5, 2, ("drop",))
    c.on_item = lambda t, it: c.drop(1)
    while math.isfinite(c.next_time()):
        c.advance()
    assert got["a"] is None  # dropped: the participant's step returns nothing
    assert got["b"].spans["y"] == pytest.approx((0.0, 1.25))  # 25 MB at half, then 75 MB alone


def test_protocol_errors_are_refused():
    c = VirtualClock(two_servers())
    c.register("a", "g")
    with pytest.raises(ClockError):
        c.register("a", "g")
    c.step("a", 0.0, [], [], lambda w: None)
    with pytest.raises(ClockError):
        c.step("a", 0.0, [], [], lambda w: None)  # already blocked
    seen = []
    c.step("nobody", 0.0, [], [], seen.append)
    assert seen == [None]


def test_a_step_behind_the_clock_is_counted_late():
    def p():
        w = yield (1.0, [], [])
        yield (w.t - 0.5, [], [])

    c = VirtualClock(two_servers())
    drive(c, {"a": p()})
    assert c.late_steps == 1


def test_pause_and_shift_move_one_groups_future_and_credit_skips():
    """Fast-forward primitives: a paused transfer keeps its bytes and resumes later; the group's
    steps move; the other group's transfer gets the link alone meanwhile."""
    c = VirtualClock(two_servers())
    got = {}
    for pid in ("a", "b"):
        c.register(pid, pid)
    c.step("a", 0.0, [Send("x", 0, 0, 4, 100 * MB)], [], lambda w: got.setdefault("a", w))
    c.step("b", 0.0, [Send("y", 1, 1, 5, 100 * MB)], [], lambda w: got.setdefault("b", w))
    c.admit()
    c.schedule(0.5, 0, ("pause",))
    events = []

    def on_item(t, it):
        events.append((t, it[0]))
        if it[0] == "pause":  # a's group skips 1 s from t = 0.5 s (25 MB sent, 75 MB left)
            paused = c.pause({"a"})
            c.set_skip("a", 3)
            c.schedule(t + 1.0, 0, ("resume-a", paused))
        elif it[0] == "resume-a":
            c.unpause(it[1], 1.0)

    c.on_item = on_item
    while math.isfinite(c.next_time()):
        c.advance()
    assert got["b"].spans["y"] == pytest.approx((0.0, 1.25))  # 25 MB shared, then 75 MB alone
    assert got["a"].t == pytest.approx(2.25) and got["a"].skip == 3  # 75 MB alone from t = 1.5 s
    assert got["a"].spans["x"][0] == pytest.approx(1.0)  # its start moved by the skipped second


# ---------------------------------------------------------------- reserved NIC shares (A-SRPT's model)
def test_reserved_share_gives_a_lone_flow_only_its_gpus_share():
    cl = Cluster.homogeneous(2, 4, 100 * MB, 1000 * MB)
    assert took(drive(VirtualClock(cl, "fair"), {"a": sender(0, "x", 0, 0, 4, 50 * MB)}), "a", "x") == pytest.approx(0.5)
    assert took(drive(VirtualClock(cl, "reserved"), {"a": sender(0, "x", 0, 0, 4, 50 * MB)}), "a", "x") == \
        pytest.approx(2.0)  # 50 MB at 100 MB/s / 4 GPUs


def test_reserved_share_two_gpus_each_get_their_share_and_one_gpu_shares_its_own():
    cl = Cluster.homogeneous(2, 4, 100 * MB, 1000 * MB)

    def p():
        yield (0, [Send("a", 0, 0, 4, 25 * MB), Send("b", 0, 1, 5, 25 * MB), Send("c", 1, 2, 6, 25 * MB),
                   Send("d", 1, 2, 7, 25 * MB)], [])

    w = drive(VirtualClock(cl, "reserved"), {"p": p()})
    assert [took(w, "p", k) for k in "abcd"] == pytest.approx([1.0, 1.0, 2.0, 2.0])


def test_unknown_nic_share_is_refused():
    with pytest.raises(ValueError, match="nic_share"):
        VirtualClock(Cluster.homogeneous(2, 1, 100 * MB, 1000 * MB), "greedy")
