"""SJF-BCO eq. (8) vs flow-level iteration times: `raytestbed bench sjfbco-flow [options]`.

The code lives in benchmarks/sjfbco_model_vs_flow.py.

    .venv/bin/python scripts/sjfbco_model_vs_flow.py [--quick] [--out DIR]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "sjfbco-flow", *sys.argv[1:]]))
