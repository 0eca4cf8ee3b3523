"""Import PipeDream per-layer profiles into workloads/profiles (code: raytestbed/profile/pipedream.py).

    .venv/bin/python scripts/import_pipedream_profiles.py --src "$RAYTESTBED_DATA_DIR/pipedream-profiles" --out workloads/profiles
"""

import sys

from raytestbed.profile.pipedream import main

if __name__ == "__main__":
    sys.exit(main())
