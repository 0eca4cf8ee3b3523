"""Gavel's continuous job stream (``workload.kind: gavel_generated``), drawn as Gavel's simulator draws it.

Gavel's continuous-trace experiments (its paper's Figures 8-10; its sweep ``run_sweep_continuous.py``)
do not read a trace file: the simulator draws each job when it arrives. This loader draws the same
distribution, with its own seeded generator (``numpy``; the same seed gives the same jobs here, not
Gavel's jobs):

* arrivals: a Poisson process of ``rate_per_hour`` jobs/hour (exponential gaps of mean
  3,600 / rate s), the first job at 0 s;
* job type: uniform over the throughput table's job types (Gavel's table: its 26 job templates);
* scale factor (``multi_gpu: true``): 1, 2, 4, 8 GPUs with probabilities 0.70, 0.10, 0.15, 0.05
  (Gavel's fit to the Philly trace); a job of more than one GPU redraws its type until the table has
  it at that scale factor (the distributed types: ResNet-18/-50, Transformer, LM). Without
  ``multi_gpu`` every job has one GPU (Gavel's "continuous-single");
* duration on the reference GPU type (``reference``, a V100): with probability 0.8 it is
  10^U(1.5, 3) minutes, else 10^U(3, 4) minutes (Gavel's fit to the Philly trace: 0.5 h to 16.7 h,
  and 16.7 h to 167 h); the job's iterations = duration x the reference type's throughput for its
  type and scale factor, rounded (at least 1);
* priority weight 1, no SLO.

Jobs are then built as the ``gavel`` kind builds a trace line's job
(:func:`~raytestbed.traces.gavel_trace.gavel_job`), so both kinds run the same way.

Parameters: ``jobs`` (how many), ``rate_per_hour``, ``multi_gpu`` (default false), ``throughputs``
(default ``gavel``, as ``timing.throughputs``), ``reference`` (default ``v100``). The trial's seed
draws the stream.
"""

from __future__ import annotations

import numpy as np
from pydantic import PositiveFloat, PositiveInt

from raytestbed.core.job import Job
from raytestbed.errors import ConfigError
from raytestbed.traces.csvrows import MAX_INT
from raytestbed.traces.gavel_trace import GavelJobs, gavel_job
from raytestbed.traces.registry import LoaderParams, WorkloadContext, parse_params, register_workload
from raytestbed.traces.throughputs import load_throughputs

#: Gavel's scale factors (GPUs) and their probabilities (its fit to the Philly trace)
SCALE_FACTORS = (1, 2, 4, 8)
SCALE_PROBS = (0.70, 0.10, 0.15, 0.05)
#: duration on the reference type: with probability LONG_P, 10^U(LONG) minutes, else 10^U(SHORT) minutes
SHORT, LONG, LONG_P = (1.5, 3.0), (3.0, 4.0), 0.2


class GavelGeneratedParams(LoaderParams):
    kind: str = "gavel_generated"
    jobs: PositiveInt
    rate_per_hour: PositiveFloat
    multi_gpu: bool = False
    throughputs: str = "gavel"
    reference: str = "v100"


def duration_s(rng: np.random.Generator) -> float:
    """One job's duration on the reference GPU type, seconds (Gavel's Philly fit, see the module docstring)."""
    lo, hi = LONG if rng.random() < LONG_P else SHORT
    return 60.0 * 10.0 ** rng.uniform(lo, hi)


@register_workload("gavel_generated")
def gavel_generated_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """Gavel's continuous job stream (see the module docstring), seeded by the trial's seed."""
    p: GavelGeneratedParams = parse_params(GavelGeneratedParams, params, ctx.where)  # type: ignore[assignment]
    table = load_throughputs(p.throughputs, ctx.base_dir)
    if p.reference not in table.gpu_types:
        raise ConfigError(f"{ctx.where}.reference: GPU type {p.reference!r} is not in the throughput table "
                          f"{table.source} (types: {', '.join(table.gpu_types)})")
    types = table.job_types()
    distributed = [t for t in types if any(table.has(t, s) for s in SCALE_FACTORS[1:])]
    if not types:
        raise ConfigError(f"{ctx.where}: the throughput table {table.source} has no job types")
    rng = np.random.default_rng(ctx.seed)
    mean_gap_s = 3600.0 / p.rate_per_hour
    jobs = GavelJobs()
    jobs.throughputs = table
    t = 0.0
    for jid in range(p.jobs):
        if jid:
            t += float(rng.exponential(mean_gap_s))
        sf = int(rng.choice(SCALE_FACTORS, p=SCALE_PROBS)) if p.multi_gpu and distributed else 1
        dur = duration_s(rng)
        pool = types if sf == 1 else [x for x in distributed if table.has(x, sf)]
        job_type = pool[int(rng.integers(len(pool)))]
        speed = table.get(p.reference, job_type, sf)
        where = f"{ctx.where}: job {jid}"
        if not speed:
            raise ConfigError(f"{where}: the throughput table {table.source} has no {p.reference} row for "
                              f"{job_type!r} at scale factor {sf}")
        steps = min(MAX_INT, max(1, round(dur * speed)))
        jobs.append(gavel_job(jid, job_type, steps, sf, round(t, 6), table, ctx, where))
    return jobs
