"""The emulation backend: an emulated GPU cluster on Ray, on a virtual clock (see docs/emulator.md).

Import the submodules directly (``raytestbed.emu.cluster``, ``.clock_service``, ``.scheduler``, ``.vclock``);
importing this package does not import Ray.
"""
