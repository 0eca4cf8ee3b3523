"""SJF-BCO eq. (8) vs flow-level iteration times: `raytestbed bench sjfbco-flow [options]`.

The code lives in raytestbed/experiments/benches/sjfbco_model_vs_flow.py.

    .venv/bin/python scripts/sjfbco_model_vs_flow.py [--quick] [--out DIR]
"""

import sys

from raytestbed.experiments.benches.sjfbco_model_vs_flow import main

if __name__ == "__main__":
    sys.exit(main())
