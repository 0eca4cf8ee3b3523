"""Benchmark: `raytestbed bench sjfbco [options]` (code: raytestbed/experiments/benches/sjfbco.py; results: docs/benchmarks.md).

    .venv/bin/python scripts/bench_sjfbco.py [options]
"""

import sys

from raytestbed.experiments.benches.sjfbco import main

if __name__ == "__main__":
    sys.exit(main())
