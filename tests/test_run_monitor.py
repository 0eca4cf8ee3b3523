"""When a run counts as steady for fast-forward, and its period (raytestbed/execution/monitor.py: RunMonitor)."""

import pytest

from raytestbed.execution.monitor import RunMonitor


def _monitor(times, profiled=None):
    """A run's monitor after iterations of ``times`` seconds, all compute, charged against ``profiled``
    seconds of profile (default: charged exactly the profile, as in replay)."""
    m = RunMonitor(job_id=0, ranks=1, iterations=100, start_iteration=0, start_s=0.0)
    t = 0.0
    for x in [0.5] + list(times):  # the first iteration (pipeline fill) is never in the windows
        t += x
        m.complete(t, [(0, 0, t, x, 0.0, None, 0, 0.0, x if profiled is None else profiled)])
    return m


def test_a_real_run_is_settled_at_its_mean_after_a_count_of_iterations():
    assert _monitor([0.13] * 7).settled(4, 0.0) is None  # 8 iterations after the fill needed
    assert _monitor([0.13] * 8).settled(4, 0.0) == pytest.approx(0.13)
    assert _monitor([0.0807, 0.0964] * 4).settled(4, 0.0) == pytest.approx((0.0807 + 0.0964) / 2)


def test_a_quiet_and_a_busy_run_settle_at_the_same_iteration():
    """Whether a real run is skipped does not depend on its times (the host's load): a run whose
    charges jitter, burst or are still off the profile settles when a quiet one does; only the rate
    it is skipped at differs (the mean of those iterations)."""
    quiet = [0.130, 0.131, 0.129, 0.130, 0.130, 0.131, 0.129, 0.130]
    busy = [0.134, 0.134, 0.132, 0.299, 0.218, 0.219, 0.129, 0.127]
    off = [0.124] * 8
    for times in (quiet, busy, off):
        assert _monitor(times[:-1]).settled(4, 0.0) is None
        assert _monitor(times, profiled=0.133).settled(4, 0.0) == pytest.approx(sum(times) / 8)


def test_iterations_before_the_last_change_do_not_count():
    m = _monitor([0.13] * 8)
    assert m.settled(4, since_s=0.5 + 0.13 * 0.5) is None
    assert _monitor([0.13] * 10).settled(4, since_s=0.5 + 0.13 * 0.5) == pytest.approx(0.13)


def test_the_period_is_the_shortest_lag_at_which_iteration_times_repeat():
    """Constant times repeat at lag 1, alternating ones at lag 2 (the time of both); times that
    drift (two runs beating against each other on a link) do not repeat at any lag."""
    assert _monitor([0.13] * 9).period(0.0, 1e-6, 8, 8) == (1, pytest.approx(0.13))
    assert _monitor([0.08, 0.1] * 6).period(0.0, 1e-6, 8, 8) == (2, pytest.approx(0.18))
    drift = [1.0 + 0.01 * k * (-1) ** k for k in range(20)]
    assert _monitor(drift).period(0.0, 1e-6, 8, 8) is None
    assert _monitor([0.13] * 9).period(0.0, 1e-6, 8, 8) is not None


def test_the_period_needs_enough_iterations_after_the_last_change_and_never_counts_fill():
    assert _monitor([0.13] * 8).period(0.0, 1e-6, 8, 8) is None  # 8 repeats need 9 iterations after fill
    assert _monitor([0.13] * 12).period(0.5 + 0.13 * 3.5, 1e-6, 8, 8) is None
    assert _monitor([0.13] * 12).period(0.5 + 0.13 * 2.5, 1e-6, 8, 8) == (1, pytest.approx(0.13))
