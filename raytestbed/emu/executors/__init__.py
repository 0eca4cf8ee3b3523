"""Executors: real PyTorch training jobs on the emulated cluster (see docs/emulator.md, "Executors").

* pipeline-parallel jobs (A-SRPT): stage replicas on emulated GPUs, asynchronous
  PipeDream-style 1F1B pipeline, activations/gradients through the fabric,
  per-stage ring all-reduce;
* ring-all-reduce data-parallel jobs (SJF-BCO, GADGET): the same worker with one
  stage, our own ring (reduce-scatter + all-gather) over the fabric;
* parameter-server jobs (Parrot): push/pull coflows to PS actors.

Compute modes: ``real`` (run the zoo model's layers, charge their CPU time at the
emulated GPU's speed) and ``replay`` (charge the profiled time while moving real bytes).
"""

from raytestbed.emu.executors.job import JobRun, start_job
from raytestbed.execution.plan import MODES, JobPlan, PsSpec, WorkerSpec, find_boundaries, plan_job

__all__ = ["JobRun", "start_job", "MODES", "JobPlan", "PsSpec", "WorkerSpec",
           "find_boundaries", "plan_job"]
