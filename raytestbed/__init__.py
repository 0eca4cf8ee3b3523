"""raytestbed: try GPU-cluster schedulers for distributed deep-learning jobs.

The same policy objects run in a discrete-event simulator (``raytestbed.sim``)
and on an emulated GPU cluster built from Ray actors (``raytestbed.emu``).
Units everywhere: seconds, bytes, bytes/s.
"""

__version__ = "0.1.0"
