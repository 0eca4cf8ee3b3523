"""Pass timers (thread CPU time, CUDA events) and the profiler's measurement record."""

import platform
import subprocess
import sys
import time

import pytest

from raytestbed.cli import main
from raytestbed.core.profile import ModelProfile
from raytestbed.models import build_model
from raytestbed.profile import profiler
from raytestbed.profile.profiler import _select, _warm, profile_model, spread
from raytestbed.profile.timers import CudaEventTimer, ThreadCpuTimer, TimerChoice, make_timer


class FakeEvent:
    """A CUDA event stand-in: records a virtual time; elapsed_time in milliseconds as torch's."""

    clock = [0.0]

    def __init__(self):
        self.t = None
        self.synced = False

    def record(self):
        FakeEvent.clock[0] += 0.0125  # 12.5 ms of "GPU time" pass between two records
        self.t = FakeEvent.clock[0]

    def synchronize(self):
        self.synced = True

    def elapsed_time(self, end):
        assert end.synced, "elapsed_time read before synchronising on the end event"
        return (end.t - self.t) * 1e3


def test_cuda_event_timer_arithmetic_ms_to_seconds():
    timer = CudaEventTimer(event=FakeEvent)
    out, dt = timer.time(lambda a, b: a + b, 2, 3)
    assert out == 5
    assert dt == pytest.approx(0.0125)
    assert timer.switch_count() == 0


def test_thread_cpu_timer_leaves_sleep_out():
    out, dt = ThreadCpuTimer().time(time.sleep, 0.05)
    assert out is None and 0 <= dt < 0.02  # sleeping is not CPU time


def test_make_timer_devices_and_cpu_fallback():
    assert make_timer("cpu").timer.device == "cpu"
    fb = make_timer("cuda", cuda_ok=False)
    assert fb.device == "cpu" and "no CUDA device" in fb.note
    assert make_timer("auto", cuda_ok=False).device == "cpu" and make_timer("auto", cuda_ok=False).note == ""
    assert isinstance(make_timer("cuda", cuda_ok=True).timer, CudaEventTimer)
    assert make_timer("auto", cuda_ok=True).device == "cuda"
    with pytest.raises(ValueError, match="tpu"):
        make_timer("tpu")


def test_spread_is_iqr_over_median():
    assert spread([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx((4.0 - 2.0) / 3.0)
    assert spread([7.0]) == 0.0


def test_profile_records_device_torch_threads_and_spread(tmp_path):
    prof = profile_model(build_model("mlp-tiny"), warmup=1, repeats=3)
    m = prof.measurement
    assert m["device"] == "cpu" and m["threads"] == 1 and m["torch"] and m["repeats"] == 3
    assert len(m["fwd_spread"]) == len(m["bwd_spread"]) == prof.num_layers
    assert m["iterations"] >= 3
    assert all(1 <= k <= m["iterations"] for k in m["fwd_used"] + m["bwd_used"])
    assert set(m["fwd_runs"] + m["bwd_runs"]) <= {"warm", "unswitched", "all"}
    assert isinstance(m["noisy"], bool) and isinstance(m["warnings"], list)
    assert "thread CPU time" in prof.source
    prof.save(tmp_path / "p.json")
    again = ModelProfile.load(tmp_path / "p.json")
    assert again == prof and again.measurement["spread"] == m["spread"]


def test_noisy_profile_says_so():
    prof = profile_model(build_model("mlp-tiny"), warmup=0, repeats=5, spread_limit=-1.0)
    assert prof.measurement["noisy"] and any(w.startswith("noisy") for w in prof.measurement["warnings"])


def test_warm_runs_need_no_switch_since_the_pass_one_iteration_earlier():
    # (seconds, switches before, switches after) of one pass in five iterations
    runs = [(1.0, 0, 0), (1.0, 0, 0), (1.0, 0, 1), (1.0, 1, 1), (1.0, 1, 1)]
    # the first has no earlier run; the third was switched out; the fourth was not, but a switch fell
    # after the third began, so the caches it found were not the previous iteration's
    assert _warm(runs) == [False, True, False, False, True]


def test_select_prefers_warm_then_unswitched_then_all():
    runs = [(9.0, 0, 0), (2.0, 0, 0), (3.0, 0, 0), (5.0, 0, 1), (4.0, 1, 1)]
    assert _select(runs, 1, 2) == ([2.0, 3.0], "warm")  # the warm-up run (9.0) left out
    assert _select(runs, 1, 3) == ([2.0, 3.0, 4.0], "unswitched")
    assert _select(runs, 1, 4) == ([2.0, 3.0, 5.0, 4.0], "all")


class _SwitchBetweenIterations(ThreadCpuTimer):
    """A CPU timer whose thread is switched out once between every two iterations, never inside a pass."""

    def __init__(self, passes_per_iteration: int):
        super().__init__()
        self.per_iteration, self.passes, self.count, self.bumped = passes_per_iteration, 0, 0, 0

    def time(self, fn, *args):
        self.passes += 1
        return super().time(fn, *args)

    def switch_count(self) -> int:
        boundary = self.passes // self.per_iteration
        if self.passes % self.per_iteration == 0 and boundary > self.bumped and self._before:
            self.count, self.bumped = self.count + 1, boundary
        self._before = not self._before
        return self.count

    _before = True  # switch_count is read before and after each pass in turn


def _with_timer(monkeypatch, timer):
    monkeypatch.setattr(profiler, "make_timer", lambda device: TimerChoice(timer, device, ""))


def test_profiler_adds_iterations_until_passes_have_warm_runs_or_time_runs_out(monkeypatch):
    model = build_model("mlp-tiny")
    passes = 2 * model.num_layers
    # no switch anywhere: every run after the first is warm, so `repeats` iterations suffice
    _with_timer(monkeypatch, _SwitchBetweenIterations(10**9))
    m = profile_model(model, warmup=1, repeats=4).measurement
    assert m["iterations"] == 4 and set(m["fwd_runs"] + m["bwd_runs"]) == {"warm"}
    # a switch between every two iterations: no pass is ever warm although none is switched out; the
    # profiler keeps adding iterations until the time limit, then takes the unswitched runs
    _with_timer(monkeypatch, _SwitchBetweenIterations(passes))
    m = profile_model(model, warmup=1, repeats=4, max_time_s=0.0).measurement
    assert m["iterations"] == 4 and set(m["fwd_runs"] + m["bwd_runs"]) == {"unswitched"}
    _with_timer(monkeypatch, _SwitchBetweenIterations(passes))
    m = profile_model(model, warmup=1, repeats=4, max_time_s=0.05).measurement
    assert m["iterations"] > 4 and set(m["fwd_runs"] + m["bwd_runs"]) == {"unswitched"}
    assert m["fwd_used"] == [m["iterations"]] * model.num_layers


def test_profile_max_time_must_be_non_negative():
    with pytest.raises(ValueError, match="max_time_s"):
        profile_model(build_model("mlp-tiny"), repeats=1, max_time_s=-1.0)
    assert main(["profile", "mlp-tiny", "--max-seconds", "-2"]) == 2


def test_profile_cli_cuda_without_gpu_falls_back_and_warns(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("raytestbed.profile.timers.cuda_available", lambda: False)
    out = tmp_path / "p.json"
    assert main(["profile", "mlp-tiny", "--device", "cuda", "--repeats", "2", "--warmup", "0",
                 "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert "no CUDA device" in cap.err and "device: cpu" in cap.out
    prof = ModelProfile.load(out)
    assert prof.measurement["device"] == "cpu" and any("no CUDA device" in w for w in prof.measurement["warnings"])


def test_profile_file_without_measurement_still_loads(tmp_path):
    prof = ModelProfile.load("workloads/profiles/vgg16.json")
    assert prof.measurement is None
    assert '"measurement"' not in prof.to_json()


def _spec(device: str):
    from raytestbed.core.job import StageProfile
    from raytestbed.execution.plan import WorkerSpec

    return WorkerSpec(job_id=0, stage=0, replica=0, gpu=0, rank=0, num_stages=1, replicas=(1,), comm="rar",
                      mode="real", model="mlp-tiny", seed=0, lr=0.05, layers=(0, -1), global_batch=0,
                      profile=StageProfile(1e-3, 2e-3, 0.0, 0.0), prev_gpus=(), next_gpus=(), act_in_bytes=0,
                      act_out_bytes=0, ring=(0,), ring_pos=0, device=device)


def test_real_stage_on_cuda_without_gpu_runs_on_cpu_and_says_so(monkeypatch):
    import numpy as np

    from raytestbed.emu.executors.compute import RealStage

    monkeypatch.setattr("raytestbed.profile.timers.cuda_available", lambda: False)
    st = RealStage(_spec("cuda"))
    assert st.device == "cpu" and isinstance(st.timer, ThreadCpuTimer) and "no CUDA device" in st.device_note
    (out, loss), dt = st.timer.time(st.forward, 0, None, st.first_shard())
    assert out is None and loss > 0 and dt > 0
    assert st.backward(0, None) is None and st.flat_grad(0).dtype == np.float32


def test_real_stage_times_passes_with_the_chosen_timer(monkeypatch):
    from raytestbed.emu.executors.compute import RealStage

    st = RealStage(_spec("cpu"))
    st.timer = CudaEventTimer(event=FakeEvent)  # what a GPU worker would use: CUDA event seconds
    (_, loss), dt = st.timer.time(st.forward, 0, None, st.first_shard())
    assert dt == pytest.approx(0.0125) and loss > 0


def test_trial_compute_device_setting():
    from pydantic import ValidationError

    from raytestbed.config import EmuConfig

    assert EmuConfig().compute_device == "cpu"
    assert EmuConfig(compute_device="cuda").compute_device == "cuda"
    with pytest.raises(ValidationError, match="compute_device"):
        EmuConfig(compute_device="gpu")


_FAULTS_PER_PASS = """
import resource, sys, torch
torch.set_num_threads(1)
from raytestbed.models import build_model
if sys.argv[1] == "timer":
    from raytestbed.profile.timers import ThreadCpuTimer
    ThreadCpuTimer()
m = build_model("resnet-small", seed=0)
f = m.stage(0, m.num_layers)
x, t = m.make_input(m.batch_size), m.make_target(m.batch_size)
def once():
    f.zero_grad()
    m.loss(f(x), t).backward()
for _ in range(5):
    once()
per_pass = []
for _ in range(11):
    a = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    once()
    per_pass.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - a)
print(sorted(per_pass)[5])
"""


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"),
                    reason="glibc's mallopt and RUSAGE_THREAD")
def test_a_cpu_timer_keeps_freed_memory_so_passes_fault_no_pages():
    """With glibc's defaults a resnet-small forward and backward faults thousands of pages in (kernel
    time that thread CPU time counts); once a ThreadCpuTimer exists in the process, the median pass
    faults none (the heap still grows now and then)."""
    def faults(arg: str) -> float:
        out = subprocess.run([sys.executable, "-c", _FAULTS_PER_PASS, arg], capture_output=True, text=True,
                             check=True, timeout=300)
        return float(out.stdout.strip().splitlines()[-1])

    assert faults("defaults") > 1000
    assert faults("timer") < 10
