"""A-SRPT (Algorithm 1), its virtual SRPT instance, the WakeUp timer and the five baselines."""

import pytest

from conftest import small_cluster
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.errors import ConfigError, PolicyError
from raytestbed.schedulers.asrpt import VirtualSrpt
from raytestbed.core.events import JobArrived, Tick, WakeUp
from raytestbed.core.policy import Policy
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator

GB = 1e9
BASELINES = ["spjf", "spwf", "wcs-duration", "wcs-workload", "wcs-subtime"]


def plain(jid, arrival, gpus, iters, group="", user="u"):
    """A job with 1 s/iteration and no communication (never comm-heavy)."""
    return Job(jid, arrival, iters, (Stage(gpus, StageProfile(0.5, 0.5, 0.0, 0.0)),), CommPattern.RAR,
               group=group or f"g{jid}", user=user)


def heavy(jid, arrival, gpus, iters, h=1 * GB):
    """A ring-all-reduce job whose alpha^max / alpha~min is far above 1.5."""
    return Job(jid, arrival, iters, (Stage(gpus, StageProfile(0.5, 0.5, 0.0, h)),), CommPattern.RAR,
               group=f"g{jid}", user="u")


def run(policy, jobs, cluster):
    res = Simulator(cluster, jobs, policy).run()
    return {r.job.job_id: r for r in res.records}


# --------------------------------------------------------------- virtual SRPT
def test_virtual_srpt_preempts_and_orders_by_completion():
    v = VirtualSrpt()
    assert v.add(0, 10.0, 0.0) == []
    assert v.add(1, 2.0, 1.0) == []  # preempts job 0 (9 left)
    assert v.add(2, 1.0, 2.0) == []  # job 1 has 1 left: tie broken by arrival -> job 1 first
    assert v.add(3, 10.0, 3.0) == [1]
    assert v.advance(4.0) == [2]
    assert v.next_completion() == pytest.approx(13.0)
    assert v.advance(100.0) == [0, 3]


def test_virtual_srpt_zero_sizes_keep_arrival_order_and_simultaneous_sort_by_size():
    v = VirtualSrpt()
    out = []
    for j, t in enumerate([0.0, 1.0, 1.0, 5.0]):
        out += v.add(j, 0.0, t)
    out += v.advance(5.0)
    assert out == [0, 1, 2, 3]
    w = VirtualSrpt()
    for j, size in enumerate([3.0, 1.0, 2.0]):
        w.add(j, size, 0.0)
    assert w.advance(10.0) == [1, 2, 0]


def _srpt_reference(jobs):
    """Preemptive SRPT on one speed-1 machine, stepped arrival by arrival: [(job id, completion)]."""
    jobs = sorted(jobs)  # (arrival, size, id)
    t, rem, done, k = 0.0, {}, [], 0
    while k < len(jobs) or rem:
        if not rem:
            t = max(t, jobs[k][0])
        while k < len(jobs) and jobs[k][0] <= t:
            rem[jobs[k][2]] = [jobs[k][1], jobs[k][0]]
            k += 1
        j = min(rem, key=lambda i: (rem[i][0], rem[i][1], i))  # least remaining, then arrival, id
        nxt = jobs[k][0] if k < len(jobs) else float("inf")
        if t + rem[j][0] <= nxt:
            t += rem.pop(j)[0]
            done.append((j, t))
        else:
            rem[j][0] -= nxt - t
            t = nxt
    return done


def test_virtual_srpt_matches_a_reference_srpt_on_random_instances():
    import random

    def step_to(v, t, out):  # every completion up to t, each with its time
        while (c := v.next_completion()) is not None and c <= t:
            out += [(j, pytest.approx(c)) for j in v.advance(c)]

    rng = random.Random(7)
    for _ in range(300):
        jobs = [(rng.randint(0, 40) / 2, rng.choice([0.0, 0.5, 1.0, 2.0, 3.0, float(rng.randint(1, 20))]), i)
                for i in range(rng.randint(1, 10))]
        v, got = VirtualSrpt(), []
        for arr, size, jid in sorted(jobs):
            step_to(v, arr, got)
            assert v.add(jid, size, arr) == []
        step_to(v, float("inf"), got)
        assert got == _srpt_reference(jobs)


# ----------------------------------------------------------------- A-SRPT
def test_asrpt_perfect_follows_hand_computed_srpt_order():
    """4 jobs on one 4-GPU server, 1 s/iteration; virtual sizes g/G * n: 10, 2, 1, 10.

    Virtual SRPT: J1 preempts J0 at t=1 and ends at 3; J2 (tie with J1's remaining 1 at
    t=2, later arrival) ends at 4; J0 at 13, J3 at 23. Real starts therefore 3, 4, 13, 23.
    """
    c = small_cluster(servers=1, gpus=4)
    jobs = [plain(0, 0.0, 4, 10), plain(1, 1.0, 2, 4), plain(2, 2.0, 1, 4), plain(3, 3.0, 2, 20)]
    pol = make_policy("asrpt-perfect")
    rec = run(pol, jobs, c)
    assert pol.order == [1, 2, 0, 3]
    assert [rec[j].first_start_s for j in range(4)] == pytest.approx([13.0, 3.0, 4.0, 23.0])
    # each left Ã1 when it started (the cluster had room): the whole wait is the gate's
    cols, stats = pol.job_stats()
    assert cols == ("asrpt_released_s", "asrpt_window_s")
    assert [stats[j]["asrpt_released_s"] for j in range(4)] == pytest.approx([13.0, 3.0, 4.0, 23.0])
    assert not any("asrpt_window_s" in stats[j] for j in range(4))
    assert [rec[j].finish_s for j in range(4)] == pytest.approx([23.0, 7.0, 8.0, 43.0])
    assert sum(rec[j].finish_s - jobs[j].arrival_s for j in range(4)) == pytest.approx(75.0)


def test_asrpt_with_unseen_groups_is_fifo():
    """Every group unseen -> predicted 0 -> queued at arrival, strict head-of-line."""
    c = small_cluster(servers=1, gpus=4)
    jobs = [plain(0, 0.0, 4, 10), plain(1, 1.0, 2, 4), plain(2, 2.0, 1, 4), plain(3, 3.0, 2, 20)]
    pol = make_policy("asrpt")
    rec = run(pol, jobs, c)
    assert pol.order == [0, 1, 2, 3]
    assert rec[1].first_start_s == pytest.approx(10.0)


def test_asrpt_uses_learned_predictions_for_order():
    """Group 'long' and 'short' complete once each; later jobs of both are ordered by prediction."""
    c = small_cluster(servers=1, gpus=1)
    jobs = [plain(0, 0.0, 1, 50, group="long"), plain(1, 0.0, 1, 5, group="short"),
            plain(2, 100.0, 1, 50, group="long"), plain(3, 100.0, 1, 5, group="short")]
    pol = make_policy("asrpt", predictor="mean", retrain_every=1)
    run(pol, jobs, c)
    assert pol.order[:2] == [0, 1]  # unseen: arrival order
    assert pol.order[2:] == [3, 2]  # learned: the short one first


def _delay_setup():
    """Two 2-GPU comm-heavy fillers (one per server) and a 4-GPU comm-heavy job J arriving at 60 s."""
    c = small_cluster(servers=2, gpus=4)
    fillers = [heavy(0, 0.0, 2, 100), heavy(1, 0.0, 2, 100)]
    return c, fillers, heavy(2, 60.0, 4, 20)


def test_delay_window_waits_for_a_better_placement():
    c, fillers, j = _delay_setup()
    pol = make_policy("asrpt-perfect", tau=10.0)
    rec = run(pol, fillers + [j], c)
    f0_end = min(rec[0].finish_s, rec[1].finish_s)
    assert pol.delayed == 1
    assert rec[2].first_start_s == pytest.approx(f0_end)  # first moment one server is free
    assert rec[2].servers == 1
    stats = pol.job_stats()[1][2]  # J left Ã1 and entered its window at once, then waited there
    assert stats["asrpt_released_s"] == pytest.approx(stats["asrpt_window_s"])
    assert stats["asrpt_window_s"] < rec[2].first_start_s


def test_delay_window_expires_and_starts_split():
    c, fillers, j = _delay_setup()
    pol = make_policy("asrpt-perfect", tau=1.0)
    rec = run(pol, fillers + [j], c)
    f0_end = min(rec[0].finish_s, rec[1].finish_s)
    est = pol._est
    a_min = est.bounds(j)[0]
    # J is queued when it completes in the virtual instance (fillers are done there by then)
    queued = 60.0 + 4 / 8 * 20 * a_min
    window = 1.0 * 4 / 8 * 20 * a_min
    assert rec[2].first_start_s == pytest.approx(queued + window)
    assert rec[2].first_start_s < f0_end
    assert rec[2].servers == 2


def test_tau_zero_starts_at_once():
    c, fillers, j = _delay_setup()
    pol = make_policy("asrpt-perfect", tau=0.0)
    rec = run(pol, fillers + [j], c)
    a_min = pol._est.bounds(j)[0]
    assert rec[2].first_start_s == pytest.approx(60.0 + 4 / 8 * 20 * a_min)
    assert pol.delayed == 0
    # the run's statistics: J started at once on its split placement for want of a window; the fillers
    # each fit one server (within the COMM_HEAVY bound)
    assert pol.run_stats() == {"asrpt_heavy_within_bound": 2, "asrpt_heavy_no_window": 1, "asrpt_delayed": 0}
    waited = make_policy("asrpt-perfect", tau=10.0)
    run(waited, fillers + [j], c)
    assert waited.run_stats() == {"asrpt_heavy_within_bound": 2, "asrpt_heavy_no_window": 0, "asrpt_delayed": 1}


@pytest.mark.parametrize("mode", ["blocking", "deferred"])
def test_delay_mode_blocking_vs_deferred(mode):
    c, fillers, j = _delay_setup()
    k = plain(3, 75.0, 1, 5)  # arrives while J waits in its window
    pol = make_policy("asrpt-perfect", tau=10.0, delay_mode=mode)
    rec = run(pol, fillers + [j, k], c)
    f0_end = min(rec[0].finish_s, rec[1].finish_s)
    assert rec[2].first_start_s == pytest.approx(f0_end) and rec[2].servers == 1
    if mode == "blocking":
        assert rec[3].first_start_s >= rec[2].first_start_s  # nothing overtakes the waiting job
    else:
        assert rec[3].first_start_s < f0_end  # the queue went on


def test_asrpt_rejects_bad_params():
    with pytest.raises(ConfigError):
        make_policy("asrpt", tau=-1)
    with pytest.raises(ConfigError):
        make_policy("asrpt", delay_mode="sometimes")
    with pytest.raises(ConfigError):
        make_policy("asrpt", predictor="oracle")
    with pytest.raises(ConfigError):
        make_policy("asrpt-perfect", predictor="mean")


def test_asrpt_comm_light_jobs_go_to_least_available_server():
    c = small_cluster(servers=2, gpus=4)
    # job 0 (3 GPUs) on server 0 -> server 0 has 1 free, server 1 has 4: a light 1-GPU job goes to server 0
    jobs = [plain(0, 0.0, 3, 100), plain(1, 1.0, 1, 5)]
    rec = run(make_policy("asrpt"), jobs, c)
    assert rec[1].placement.startswith("s0:0x1")


# ----------------------------------------------------------------- WakeUp
class _Alarm(Policy):
    name = "alarm-test"

    def __init__(self, seed=0, at=(5.0,)):
        super().__init__(seed)
        self.at, self.ticks = list(at), []

    def on_event(self, event, view):
        if isinstance(event, Tick):
            self.ticks.append(event.time)
        if isinstance(event, JobArrived):
            return [WakeUp(t) for t in self.at]
        return []


def test_wakeup_delivers_one_tick_at_the_time():
    c = small_cluster(servers=1, gpus=1)
    pol = _Alarm(at=(5.0, 2.5))
    # the job never starts (the test policy starts nothing); the run ends when the heap is empty
    Simulator(c, [plain(0, 1.0, 1, 1)], pol).run()
    assert pol.ticks == [2.5, 5.0]


def test_wakeup_in_the_past_is_an_error():
    c = small_cluster(servers=1, gpus=1)
    with pytest.raises(PolicyError):
        Simulator(c, [plain(0, 1.0, 1, 1)], _Alarm(at=(0.5,))).run()


# ----------------------------------------------------------------- baselines
@pytest.mark.parametrize("name", BASELINES + ["asrpt", "asrpt-perfect"])
def test_policy_finishes_every_job_of_a_small_trial(name):
    c = small_cluster(servers=2, gpus=4)
    jobs = []
    for j in range(30):
        g = [1, 2, 4, 8, 1, 3][j % 6]
        jobs.append(heavy(j, 7.0 * j, g, 20 + 7 * (j % 5)) if j % 3 == 0 else
                    plain(j, 7.0 * j, g, 20 + 11 * (j % 4), group=f"grp{j % 4}"))
    if name in ("wcs-subtime", "asrpt-perfect"):
        pol = make_policy(name)
    else:  # the random forest on two policies, the cheaper per-group mean on the others (same code path)
        pol = make_policy(name, seed=1, retrain_every=10,
                          predictor="rf" if name in ("asrpt", "wcs-duration") else "mean")
    rec = run(pol, jobs, c)
    assert all(r.finish_s == r.finish_s for r in rec.values())
    assert sorted(pol.order) == list(range(30))


def test_spjf_is_strict_and_wcs_duration_backfills():
    """Perfect predictions; job 1 (8 GPUs) is the shortest but cannot start while job 0 runs."""
    c = small_cluster(servers=2, gpus=4)
    jobs = [plain(0, 0.0, 4, 100), plain(1, 1.0, 8, 5), plain(2, 2.0, 1, 50)]
    spjf = run(make_policy("spjf", predictor="perfect"), jobs, c)
    wcs = run(make_policy("wcs-duration", predictor="perfect"), jobs, c)
    assert spjf[2].first_start_s == pytest.approx(105.0)  # behind job 1, which waits for job 0
    assert wcs[2].first_start_s == pytest.approx(2.0)  # work-conserving: starts at once


def test_baseline_orders():
    c = small_cluster(servers=1, gpus=2)
    # all arrive while job 0 holds the cluster; queue order decides
    jobs = [plain(0, 0.0, 2, 10), plain(1, 1.0, 2, 30), plain(2, 2.0, 1, 40), plain(3, 3.0, 2, 25)]
    orders = {}
    for name in BASELINES:
        pol = make_policy(name, predictor="perfect") if name != "wcs-subtime" else make_policy(name)
        run(pol, jobs, c)
        orders[name] = pol.order
    assert orders["spjf"] == [0, 3, 1, 2]  # durations 25 < 30 < 40
    assert orders["spwf"] == [0, 2, 3, 1]  # workloads 40 < 50 < 60
    assert orders["wcs-subtime"] == [0, 1, 2, 3]
    assert orders["wcs-duration"] == [0, 3, 1, 2]
    assert orders["wcs-workload"] == [0, 2, 3, 1]


# ------------------------------------------------------- measured-alpha calibration
def test_calibration_scales_new_arrivals_by_measured_over_modelled_ratio():
    from raytestbed.schedulers.asrpt import AlphaCalibration

    cal = AlphaCalibration()
    a, b = plain(0, 0.0, 2, 10), plain(1, 0.0, 2, 10)
    a.model, b.model = "m", "other"  # type: ignore[misc]
    assert cal.factor(a) == 1.0  # nothing measured yet
    cal.started(a, 2.0)
    for s in (5.0, 6.0, 7.0):  # ratios 2.5, 3, 3.5 -> median 3
        cal.measured(0, s)
    assert cal.factor(a) == pytest.approx(3.0)
    assert cal.factor(b) == pytest.approx(3.0)  # no job of model "other": all jobs' median
    cal.ended(0)
    assert cal.factor(a) == pytest.approx(3.0)  # finished jobs keep informing the estimate


def test_calibration_is_neutral_in_the_analytic_simulator():
    """There measured time == eq. (7) alpha, so calibrate on/off give the same schedule."""
    c = small_cluster(servers=2, gpus=4)
    jobs = [heavy(0, 0.0, 4, 30), plain(1, 1.0, 2, 8), heavy(2, 2.0, 6, 5), plain(3, 3.0, 1, 40)]
    on, off = make_policy("asrpt-perfect"), make_policy("asrpt-perfect", calibrate=False)
    r_on, r_off = run(on, jobs, c), run(off, jobs, c)
    assert on.order == off.order
    assert [r_on[j].finish_s for j in range(4)] == pytest.approx([r_off[j].finish_s for j in range(4)])
    assert on.calibration.factor(jobs[0]) == pytest.approx(1.0)


def test_calibrated_arrival_gets_a_larger_virtual_size_and_window():
    from raytestbed.schedulers.asrpt import AlphaCalibration

    c = small_cluster(servers=2, gpus=4)
    pol = make_policy("asrpt-perfect")
    run(pol, [plain(0, 0.0, 1, 1)], c)  # initialises the estimator (and records ratio 1 for job 0)
    pol.calibration = AlphaCalibration()  # start the measurements afresh
    first = plain(1, 0.0, 2, 10)
    pol.calibration.started(first, 1.0)
    pol.calibration.measured(1, 4.0)  # the backend runs 4x slower than eq. (7)
    job = heavy(2, 5.0, 6, 10)
    base_min, _ = pol._est.bounds(job)
    pol._arrive(job, 5.0)
    assert pol._info[2].a_min == pytest.approx(4.0 * base_min)
    assert pol._info[2].p_virt == pytest.approx(6 / 8 * 10 * 4.0 * base_min)


def test_asrpt_perfect_runs_an_emulated_trial_to_the_end():
    """On the emulator's virtual clock, iteration reports and A-SRPT's wake-ups for virtual-instance
    completions interleave; every decision must stay valid (the 3 x 75-job testbed study once hit a
    wake-up in the past) and every job finish."""
    from conftest import rar_job, run_emulated_in_process

    c = small_cluster(1, 2)
    jobs = [rar_job(0, 0.0, workers=1, iterations=1000), rar_job(1, 0.0, workers=1, iterations=10),
            rar_job(2, 0.01, workers=2, iterations=20)]
    res, _, _ = run_emulated_in_process(c, jobs, [make_policy("asrpt-perfect", "placement", 0, tau=0.0)])
    assert all(r.finish_s == r.finish_s for r in res["records"].values())


def test_line12_compares_eq7_alpha_with_uncalibrated_alpha_min():
    """Alg. 1 L12 on a hand-made split: a calibration factor f = 3 must not let a placement at
    ~3x alpha~min pass the 1.5 test (alpha f / (alpha~min f) = alpha / alpha~min)."""
    from dataclasses import replace

    from raytestbed.schedulers.asrpt import AlphaCalibration

    c = small_cluster(servers=2, gpus=4)
    # a 4-GPU ring: on one server alpha ~ 1 s; split 3 + 1: 1 + 2 (3/4) h / (B/4) = 1 + 6h/B = 3 s
    h = c.nic_bps / 3
    jobs = [replace(plain(0, 0.0, 3, 5), predicted_iterations=0),  # queued at once: A on 3 GPUs of s0,
            replace(plain(1, 0.0, 3, 100), predicted_iterations=0),  # B on s0's last GPU + 2 of s1
            Job(2, 10.0, 10, (Stage(4, StageProfile(0.5, 0.5, 0.0, h)),), CommPattern.RAR,
                group="g2", user="u", predicted_iterations=10)]
    for f in (1.0, 3.0):
        pol = make_policy("asrpt", predictor="given", tau=1.0)
        cal = AlphaCalibration()
        for k in range(32):  # 32 finished jobs that ran f times slower than eq. (7)
            j = plain(1000 + k, 0.0, 1, 1)
            cal.started(j, 1.0)
            cal.measured(j.job_id, f)
            cal.ended(j.job_id)
        pol.calibration = cal
        recs = run(pol, jobs, c)
        a_min = pol._est.bounds(jobs[2])[0]
        assert pol._est.alpha(jobs[2], [3, 1]) / a_min == pytest.approx(3.0, rel=0.01)
        # when job 2 reaches the queue head (its virtual completion, 10 + p), the free GPUs are 3 on s0
        # and 1 of s1's 2: alpha / alpha~min ~ 3 > 1.5, so it waits out its window tau p (B runs to ~100 s)
        p = 4 / 8 * 10 * a_min * f
        assert pol.delayed == 1, f
        assert recs[2].first_start_s == pytest.approx(10.0 + 2 * p), f
        assert recs[2].servers == 2


def test_calibration_factor_equals_the_median_over_its_pools():
    """The sorted pools give the same factor as taking the medians afresh (random starts,
    measurements, ends; several models; windows that overflow)."""
    import random as _random
    from collections import deque
    from statistics import median

    from raytestbed.schedulers.asrpt import AlphaCalibration

    rng = _random.Random(7)
    cal = AlphaCalibration(window=4)
    live, model_of, done, done_all = {}, {}, {}, deque(maxlen=4)

    def reference(model):
        same = [median(r) for j, r in live.items() if r and model_of[j] == model] + list(done.get(model, ()))
        if not same:
            same = [median(r) for r in live.values() if r] + list(done_all)
        return median(same) if same else 1.0

    for step in range(3000):
        op = rng.random()
        if op < 0.3 or not live:
            jid = step
            j = plain(jid, 0.0, 1, 1)
            j.model = rng.choice("abc")  # type: ignore[misc]
            cal.started(j, 2.0)
            live[jid], model_of[jid] = deque(maxlen=16), j.model
        elif op < 0.75:
            jid = rng.choice(list(live))
            s = rng.choice([2.0, 3.0, 4.0, rng.uniform(1, 9)])
            cal.measured(jid, s)
            live[jid].append(s / 2.0)
        else:
            jid = rng.choice(list(live))
            cal.ended(jid)
            r = live.pop(jid)
            if r:
                done.setdefault(model_of[jid], deque(maxlen=4)).append(median(r))
                done_all.append(median(r))
        for m in "abcd":
            q = plain(0, 0.0, 1, 1)
            q.model = m  # type: ignore[misc]
            assert cal.factor(q) == reference(m)


@pytest.mark.parametrize("name", BASELINES)
def test_baselines_server_choice_readings(name):
    """``servers: most`` (default) consolidates every job onto the servers with the most free GPUs;
    ``servers: asrpt`` is A-SRPT's L12 / L22 choice: a comm-light job packs onto the fullest server."""
    c = small_cluster(servers=2, gpus=4)
    jobs = [plain(0, 0.0, 3, 100), plain(1, 1.0, 1, 5)]  # after job 0: server 0 has 1 free GPU, server 1 has 4
    assert run(make_policy(name), jobs, c)[1].placement == "s0:1x1"  # stage 0 on server 1, 1 GPU
    assert run(make_policy(name, servers="asrpt"), jobs, c)[1].placement == "s0:0x1"
    # a comm-heavy job (alpha^max / alpha~min >= 1.5) still takes the servers with the most free GPUs
    hv = [plain(0, 0.0, 3, 100), heavy(1, 1.0, 2, 5)]
    assert run(make_policy(name, servers="asrpt"), hv, c)[1].placement == "s0:1x2"
    with pytest.raises(ConfigError, match="servers: 'best' is not one of most, asrpt"):
        make_policy(name, servers="best")
