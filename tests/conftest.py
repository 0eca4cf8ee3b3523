"""Shared test fixtures: small clusters and jobs built by hand."""

import pytest

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.units import gbps_to_bytes_per_s, gbytes_per_s_to_bytes_per_s

MB = 1e6


@pytest.fixture
def spec_job() -> Job:
    """asrpt.md §3.1: S=2, k=(2,2), p^f=(10,10) ms, p^b=(20,20) ms, d_out1=d_in2=4 MB, h=(100,50) MB."""
    # one value per boundary: A_1 = k_1 * d_out_1 = 8 MB
    s1 = StageProfile(0.010, 0.020, out_bytes=8 * MB, param_bytes=100 * MB)
    s2 = StageProfile(0.010, 0.020, out_bytes=0.0, param_bytes=50 * MB)
    return Job(1, 0.0, 100, (Stage(2, s1), Stage(2, s2)), CommPattern.PIPELINE)


@pytest.fixture
def spec_bw():
    """g = 4, B_inter = 10 Gbps, B_intra = 300 GB/s (asrpt.md §3.1)."""
    return 4, gbps_to_bytes_per_s(10), gbytes_per_s_to_bytes_per_s(300)


def small_cluster(servers=2, gpus=4, nic_gbps=10.0, intra_gbs=300.0) -> Cluster:
    return Cluster.homogeneous(servers, gpus, gbps_to_bytes_per_s(nic_gbps), gbytes_per_s_to_bytes_per_s(intra_gbs))


def rar_job(job_id=0, arrival=0.0, workers=2, iterations=10, fwd=0.01, bwd=0.02, grad_bytes=100 * MB) -> Job:
    return Job(job_id, arrival, iterations, (Stage(workers, StageProfile(fwd, bwd, 0.0, grad_bytes)),),
               CommPattern.RAR)


def run_emulated_in_process(cluster, jobs, policies, faults=(), fast_forward=True, mode="replay", timeout_s=None,
                            **trial):
    """A trial on the emulator's clock service with in-process workers (no Ray): returns
    (result dict of ClockService.result, every event delivered, the service). ``trial``: more arguments of
    ``ClockService.begin_trial`` (``speeds``, ``restore_s``). No wall-clock limit of its own by default: on
    a busy host a trial may take minutes, and a hung one is stopped by the test's time limit (pytest-timeout)."""
    from raytestbed.emu.clock_actor import run_in_process
    from raytestbed.emu.fastforward import FastForward

    res, events, _, svc = run_in_process(cluster, jobs, policies, faults, fast_forward=FastForward(enabled=fast_forward),
                                         mode=mode, timeout_s=timeout_s, **trial)
    return res, events, svc


def fresh_venv(folder, wheels=()):
    """A fresh virtual environment in ``folder`` with ``wheels`` installed (``--no-deps``); its python.

    It reuses the running interpreter's installed packages for the dependencies (a ``.pth`` file naming
    its site-packages folders), so nothing is downloaded.
    """
    import os
    import site
    import subprocess
    import sys
    from pathlib import Path

    venv = Path(folder)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    deps = [p for p in site.getsitepackages() + [site.getusersitepackages()] if Path(p).is_dir()]
    (Path(purelib) / "_test_deps.pth").write_text("\n".join(deps) + "\n")
    if wheels:  # PYTHONPATH could show pip a source tree's *.egg-info as "already installed"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                        "--force-reinstall", *map(str, wheels)], check=True, env=env)
    return py


def build_wheel(src, out):
    """Build the wheel of the project in ``src`` into ``out`` with the running interpreter's setuptools
    (no build isolation: nothing is downloaded); the wheel's path."""
    import subprocess
    import sys
    from pathlib import Path

    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(src)], check=True, capture_output=True, text=True)
    wheel, = Path(out).glob("*.whl")
    return wheel
