"""The emulation backend: an emulated GPU cluster on Ray (see docs/emulator.md).

Import the submodules directly (``raytestbed.emu.cluster``, ``.fabric``, ``.timescale``);
importing this package does not import Ray.
"""
