"""A-SRPT testbed study (A-SRPT §V-A, Fig. 5) on the emulator: `raytestbed bench asrpt-testbed [options]`.

The code lives in benchmarks/asrpt_testbed.py; results: docs/results.md.

    .venv/bin/python scripts/reproduce_asrpt_testbed.py --out results/asrpt_testbed \
        [--sets 3] [--jobs 75] [--compress 0.01] [--policies ...] [--backends emu,sim]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "asrpt-testbed", *sys.argv[1:]]))
