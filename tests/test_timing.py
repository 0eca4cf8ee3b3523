"""Analytic per-iteration models: A-SRPT eqs. 4-7 (spec test vectors), SJF-BCO eq. 8, GADGET eq. 1."""

import math

import pytest

from conftest import MB, rar_job, small_cluster
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.core.timing import (
    SjfbcoModel,
    SjfbcoParams,
    asrpt_alpha_max,
    asrpt_alpha_min_tilde,
    asrpt_iteration_time,
    asrpt_stage_times,
    fewest_servers_layout,
    gadget_iteration_time,
    sjfbco_contention_count,
    sjfbco_degradation,
    sjfbco_iteration_time,
)


@pytest.mark.parametrize(
    "counts, alpha_ms, parts_ms",
    [
        ({0: [2, 2]}, 30.360, (30, 0.0267, 0.333)),
        ({0: [2, 0], 1: [0, 2]}, 55.933, (30, 25.6, 0.333)),
        ({0: [1, 1], 1: [1, 1]}, 362.813, (30, 12.813, 320)),
    ],
)
def test_asrpt_spec_vectors(spec_job, spec_bw, counts, alpha_ms, parts_ms):
    g, b_inter, b_intra = spec_bw
    alpha = asrpt_iteration_time(spec_job, counts, g, b_inter, b_intra)
    assert alpha * 1e3 == pytest.approx(alpha_ms, abs=1e-3)
    worst = max(asrpt_stage_times(spec_job, counts, g, b_inter, b_intra), key=lambda t: t.total)
    assert worst.stage == 0  # bottleneck is stage 1 in the spec's 1-based numbering
    assert (worst.comp * 1e3, worst.comm * 1e3, worst.allreduce * 1e3) == pytest.approx(parts_ms, abs=1e-3)


def test_asrpt_alpha_max_spec_vector(spec_job, spec_bw):
    assert asrpt_alpha_max(spec_job, *spec_bw) * 1e3 == pytest.approx(375.6, abs=1e-3)


def test_alpha_max_bounds_random_placements(spec_job, spec_bw):
    import itertools

    amax = asrpt_alpha_max(spec_job, *spec_bw)
    # every split of 2+2 replicas over two servers
    for a, b in itertools.product(range(3), range(3)):
        counts = {m: x for m, x in {0: [a, b], 1: [2 - a, 2 - b]}.items() if sum(x)}
        assert asrpt_iteration_time(spec_job, counts, *spec_bw) <= amax + 1e-12


def test_alpha_min_tilde_is_one_server_time_when_job_fits(spec_job, spec_bw):
    assert fewest_servers_layout(4, 4) == [4]
    assert fewest_servers_layout(10, 4) == [4, 4, 2]
    assert asrpt_alpha_min_tilde(spec_job, *spec_bw) == pytest.approx(
        asrpt_iteration_time(spec_job, {0: [2, 2]}, *spec_bw))


def test_asrpt_single_gpu_and_first_last_stage():
    # single stage, single replica: comm = allreduce = 0
    j = Job(0, 0, 1, (Stage(1, StageProfile(0.1, 0.2, 0, 1e9)),))
    assert asrpt_iteration_time(j, {0: [1]}, 8, 1e9, 1e10) == pytest.approx(0.3)
    # 3 stages of one replica on 3 servers; middle stage has both neighbours off-server
    p = StageProfile(0.01, 0.02, out_bytes=1e6, param_bytes=0)
    last = StageProfile(0.01, 0.02, out_bytes=0, param_bytes=0)
    j3 = Job(1, 0, 1, (Stage(1, p), Stage(1, p), Stage(1, last)))
    times = {t.stage: t for t in asrpt_stage_times(j3, {0: [1, 0, 0], 1: [0, 1, 0], 2: [0, 0, 1]}, 8, 1e9, 1e11)}
    # first stage: only outbound 2*1e6 bytes over B_inter/g; middle: in + out
    assert times[0].comm == pytest.approx(8 * 2e6 / 1e9)
    assert times[1].comm == pytest.approx(8 * 4e6 / 1e9)
    assert times[2].comm == pytest.approx(8 * 2e6 / 1e9)


def test_sjfbco_eq8_hand_computed():
    # m = 100 MB, w = 4, B = b_e / f(1, k) with k = xi1 * p = 0.5 * 4 = 2 -> f = 2 + 1*(2-1) = 3
    job = rar_job(workers=4, fwd=0.05, bwd=0.03, grad_bytes=100 * MB)
    params = SjfbcoParams(xi1=0.5, xi2_s=0.01, degradation_alpha=1.0, reduction_bps=1e10)
    b_e = 1.25e9
    tau = sjfbco_iteration_time(job, num_servers=2, contention=4, b_inter=b_e, b_intra=3e11, params=params)
    ring = (100e6 / 4) * 2 * 3 / (b_e / 3)
    reduce = (100e6 / 4) * 3 / 1e10
    assert tau == pytest.approx(ring + reduce + 0.01 * 2 + 0.05 + 0.03)
    # k < 1 is clamped to 1 (SB-7): p = 1, xi1 = 0.5 -> f = 1
    tau1 = sjfbco_iteration_time(job, 2, 1, b_e, 3e11, params)
    assert tau1 == pytest.approx((100e6 / 4) * 6 / b_e + reduce + 0.02 + 0.08)
    # one server: intra bandwidth, no contention
    tau0 = sjfbco_iteration_time(job, 1, 0, b_e, 3e11, params)
    assert tau0 == pytest.approx((100e6 / 4) * 6 / 3e11 + reduce + 0.01 + 0.08)
    assert sjfbco_degradation(1.0, 5.0) == 1.0


def test_sjfbco_contention_counts_only_split_jobs_on_shared_servers():
    servers_of = {
        1: {0: 2, 1: 2},  # split over 0 and 1
        2: {1: 1, 2: 1},  # split over 1 and 2
        3: {0: 4},        # whole on server 0: not split, causes no contention
        4: {3: 1, 4: 1},  # split elsewhere
    }
    gpus_of = {1: 4, 2: 2, 3: 4, 4: 2}
    assert sjfbco_contention_count(1, servers_of, gpus_of) == 2  # on server 1: jobs 1 and 2
    assert sjfbco_contention_count(3, servers_of, gpus_of) == 0
    assert sjfbco_contention_count(4, servers_of, gpus_of) == 1


def test_sjfbco_model_sees_other_running_jobs():
    c = small_cluster(servers=3, gpus=4)
    a, b = rar_job(1, workers=2), rar_job(2, workers=2)
    pa = Placement(((0, 4),))  # servers 0 and 1
    pb = Placement(((5, 8),))  # servers 1 and 2
    m = SjfbcoModel(SjfbcoParams(xi1=1.0))
    alone = m.iteration_time(a, pa, c, {})
    shared = m.iteration_time(a, pa, c, {2: (b, pb)})
    assert shared > alone


def test_gadget_eq1_hand_computed():
    tau = gadget_iteration_time(grad_bytes=1e8, workers=4, bandwidth_bps=1e9, reduction_bps=1e10,
                                fwd_s=0.1, bwd_s=0.2, overhead_s=0.05)
    assert tau == pytest.approx(1e8 * 3 / 4 * (2 / 1e9 + 1 / 1e10) + 0.35)
    assert gadget_iteration_time(1e8, 1, 1e9, math.inf, 0.1, 0.2) == pytest.approx(0.3)
