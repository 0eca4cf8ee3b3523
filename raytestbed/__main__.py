"""``python -m raytestbed`` runs the same CLI as the ``raytestbed`` command."""

from raytestbed.cli import main

raise SystemExit(main())
