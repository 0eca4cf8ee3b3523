"""Benchmark Heavy-Edge GPU mapping vs the optimal placement ILP (A-SRPT Table II).

    .venv/bin/python scripts/bench_placement.py [--cases 20] [--gpus 16] [--random-jobs 200] [--config ...]
    raytestbed bench placement [...]

The code lives in raytestbed/experiments/benches/placement.py; results: docs/benchmarks.md.
"""

import sys

from raytestbed.experiments.benches.placement import main

if __name__ == "__main__":
    sys.exit(main())
