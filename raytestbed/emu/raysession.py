"""Start or attach to Ray for the emulator: loopback binding and deliberate token authentication.

* **Local** (no ``address``, no ``RAY_ADDRESS``): a private Ray instance whose
  GCS, raylet and (optional) dashboard bind to 127.0.0.1 (``host=``
  overrides), random ports, ``num_cpus`` = host cores, and a custom resource
  ``emu_gpu`` = the emulated GPU count.
* **Attach** (``address=`` or ``RAY_ADDRESS``): ``ray.init(address=...)``;
  the cluster's nodes must offer ``emu_gpu`` resources
  (``ray start --resources '{"emu_gpu": 8}'``).  Shutdown only disconnects.
* **Already initialised** in this process (e.g. a test fixture): reused and
  left running.

Ray >= 2.60 enables token authentication for new local clusters and writes
``~/.ray/auth_token``.  ``auth`` decides deliberately:

* ``"session"`` (default for local starts): a fresh random token for this
  Ray instance only, passed to Ray's processes through the environment
  (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``); nothing is written under
  ``$HOME``; the previous environment is restored at shutdown.
* ``"disabled"``: ``RAY_AUTH_MODE=disabled`` (any local process may connect —
  the loopback binding still keeps other machines out).
* ``"inherit"`` (default when attaching): leave the environment alone; Ray
  uses ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` / ``~/.ray/auth_token`` as
  it would for ``ray.init()``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass, field

from raytestbed.errors import ConfigError

AUTH_MODES = ("session", "disabled", "inherit")
_AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _refresh_ray_auth_config() -> None:
    """Make this (driver) process re-read RAY_AUTH_* after we changed them (Ray caches them at import)."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError):  # Ray < 2.60 has no token authentication
        pass


@contextlib.contextmanager
def full_priority_workers():
    """Start Ray nodes whose workers run at normal priority (``RAY_worker_niceness=0``).

    Ray starts its workers at niceness 15 by default; a sweep's cells and the emulator's workers
    are the work itself, and at niceness 15 they lose the CPU to any other process of the host
    (a sweep on Ray slower than the same cells in one process; an emulated trial beside two busy
    processes ~15x slower in wall time; its emulated times are unaffected either way). Only nodes started inside the block are
    affected (a cluster started with ``ray start`` keeps its own setting).
    """
    # Also: workers see the host's GPUs as the driver does. Ray hides every GPU from a worker that
    # requested none (CUDA_VISIBLE_DEVICES=""); the emulator's GPU hosts request none and, with
    # ``emu.compute_device: cuda``, share the host's GPUs.
    keys = {"RAY_worker_niceness": "0", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
    old = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v




@contextlib.contextmanager
def local_cluster(nodes: int = 2, cpus_per_node: int = 1, emu_gpus_per_node: int = 0):
    """A multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``), for tests and benchmarks.

    Its nodes share a fresh session token (in the environment, nothing written under ``$HOME``)
    and run their workers at normal priority; each node offers ``cpus_per_node`` CPUs and, if
    ``emu_gpus_per_node`` > 0, that many ``emu_gpu`` resources. Yields the cluster (connect with
    its ``address``); on exit a driver still connected is shut down, the nodes are stopped and the
    auth environment is restored.
    """
    import ray
    from ray import cluster_utils

    saved = {k: os.environ.get(k) for k in _AUTH_ENV}
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    _refresh_ray_auth_config()
    resources = {"emu_gpu": emu_gpus_per_node} if emu_gpus_per_node else {}
    cluster = None
    try:
        with full_priority_workers():
            cluster = cluster_utils.Cluster(initialize_head=True,
                                            head_node_args={"num_cpus": cpus_per_node, "resources": resources})
            for _ in range(nodes - 1):
                cluster.add_node(num_cpus=cpus_per_node, resources=resources)
            cluster.wait_for_nodes()
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _refresh_ray_auth_config()

@dataclass
class RaySession:
    """How this process is connected to Ray, and what to undo at :meth:`close`."""

    owns: bool  # we called ray.init (then close() calls ray.shutdown)
    attached: bool  # connected to an existing cluster by address
    address: str | None
    auth: str
    _saved_env: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def open(cls, *, address: str | None = None, auth: str | None = None, host: str = "127.0.0.1",
             resources: dict[str, float] | None = None, num_cpus: int | None = None,
             object_store_memory: int | None = 1 << 30, include_dashboard: bool = False,
             **ray_opts) -> "RaySession":
        """Connect as described in the module docstring; returns the session to close later."""
        import ray

        if auth is not None and auth not in AUTH_MODES:
            raise ConfigError(f"emulator: auth must be one of {', '.join(AUTH_MODES)}, got {auth!r}")
        if ray.is_initialized():
            return cls(owns=False, attached=True, address=None, auth="inherit")
        address = address or os.environ.get("RAY_ADDRESS") or None
        auth = auth or ("inherit" if address else "session")
        saved = {k: os.environ.get(k) for k in _AUTH_ENV}
        if auth == "session":
            os.environ["RAY_AUTH_MODE"] = "token"
            os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
            os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
        elif auth == "disabled":
            os.environ["RAY_AUTH_MODE"] = "disabled"
        if auth != "inherit":
            _refresh_ray_auth_config()
        session = cls(owns=True, attached=bool(address), address=address, auth=auth, _saved_env=saved)
        try:
            if address:
                ray.init(address=address, log_to_driver=False, **ray_opts)
            else:
                session._init_local(host, resources or {}, num_cpus, object_store_memory,
                                    include_dashboard, ray_opts)
        except Exception:
            session._restore_env()
            raise
        return session

    def _init_local(self, host, resources, num_cpus, object_store_memory, include_dashboard, ray_opts) -> None:
        import ray
        import ray._private.ray_constants as ray_constants

        # Ray resolves 127.0.0.1 to the machine's routable address unless clustering is off
        # (services.get_node_ip_address); switch it off while the local node starts so that
        # GCS and raylet listen on the loopback address only.
        loopback = host in ("127.0.0.1", "localhost")
        saved_flag = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
        if loopback and saved_flag is not None:
            ray_constants.ENABLE_RAY_CLUSTER = False
        try:
            # address "local": a new private instance even when a `ray start` cluster runs on this machine
            opts = dict(address="local", num_cpus=num_cpus if num_cpus is not None else (os.cpu_count() or 1),
                        resources=resources, include_dashboard=include_dashboard,
                        dashboard_host=host if host != "localhost" else "127.0.0.1",
                        log_to_driver=False, _node_ip_address=host,
                        object_store_memory=object_store_memory)
            opts.update(ray_opts)
            with full_priority_workers():
                ray.init(**opts)
        finally:
            if loopback and saved_flag is not None:
                ray_constants.ENABLE_RAY_CLUSTER = saved_flag

    def close(self) -> None:
        """Shut Ray down (or disconnect) if this session started it; restore the auth environment."""
        import ray

        if self.owns:
            ray.shutdown()
            self._restore_env()
            self.owns = False

    def _restore_env(self) -> None:
        if self.auth == "inherit" or not self._saved_env:
            return
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _refresh_ray_auth_config()
        self._saved_env = {}
