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

**Start-up on a busy host** (:func:`patient_start`). Ray gives each stage of a
node's start-up 30 s (the GCS writing its port, the raylet registering with the
GCS, a node joining a ``cluster_utils`` cluster). On a loaded host that is too
short, so every start here waits up to :func:`start_timeout_s` (the
``RAYTESTBED_RAY_START_TIMEOUT_S`` environment variable or a trial's
``emu.start_timeout_s``; default 180 s) for each stage, says on stderr what it is
still waiting for once a stage takes more than 15 s, and a failed start is
retried once after shutting down what it had started. A raylet gives its agents
15 s to report the ports they bound, with no knob to raise it, so each node
started here is given its agents' ports up front (:func:`pin_agent_ports`).

**SIGTERM.** ``ray.init`` replaces the process's SIGTERM handler (and Ray's
core worker prints a C stack on SIGTERM); a handler the caller had installed
(the command line's, which unwinds like Ctrl-C) is put back after the start.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import secrets
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

from raytestbed.errors import ConfigError, RaytestbedError

AUTH_MODES = ("session", "disabled", "inherit")

#: messages Ray's processes push to the driver that a user cannot act on: the raylet's note that the
#: emulator's many actors outnumber its worker start-up concurrency (one actor per emulated GPU host)
_NOISE = re.compile(r"worker processes have been started on node|maximum expected startup concurrency")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain_driver_messages() -> None:
    """Print the messages Ray's processes push to this driver (errors, warnings) as plain lines on stderr:
    ``ray (raylet): ...``, without colour codes, leaving out the start-up concurrency notes (``_NOISE``).

    Ray prints them from a thread of the driver with ``ray._private.worker.print_to_stdstream`` (to
    stdout, coloured, whether or not it is a terminal); that function is replaced once per process.
    Real errors (a worker that died, memory pressure) still show. Without that private function
    (another Ray version) nothing changes.
    """
    try:
        import ray._private.worker as ray_worker
    except ImportError:
        return
    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "_raytestbed_plain", False):
        return

    def plain(data, ignore_prefix=False):
        try:
            lines = [_ANSI.sub("", str(line)) for line in data.get("lines", [])]
            lines = [line for line in lines if line.strip() and not _NOISE.search(line)]
            who = data.get("pid", "ray")
            for line in lines:
                print(f"ray ({who}): {line}", file=sys.stderr, flush=True)
        except Exception:  # never lose a message to the filter
            original(data, ignore_prefix)

    plain._raytestbed_plain = True
    ray_worker.print_to_stdstream = plain
_AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")

START_TIMEOUT_ENV = "RAYTESTBED_RAY_START_TIMEOUT_S"
DEFAULT_START_TIMEOUT_S = 180.0
#: wall seconds a start-up stage may take before :func:`patient_start` says what it waits for
NOTICE_AFTER_S = 15.0


def start_timeout_s(value: float | None = None) -> float:
    """Wall seconds each stage of Ray's start-up may take: ``value``, else ``$RAYTESTBED_RAY_START_TIMEOUT_S``,
    else 180 s (one-line error for a value that is not a number > 0)."""
    where = "emu.start_timeout_s"
    if value is None:
        text = os.environ.get(START_TIMEOUT_ENV)
        if not text:
            return DEFAULT_START_TIMEOUT_S
        where = START_TIMEOUT_ENV
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"{where}={text!r}: give wall seconds, a number > 0") from None
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{where}={value!r}: give wall seconds, a number > 0")
    return float(value)


class _Stage:
    """What a start is waiting for (read by :func:`patient_start`'s notice thread)."""

    def __init__(self) -> None:
        self.what = "Ray's GCS server to start"
        self.since = time.monotonic()
        self.noticed = False
        self.nodes: list = []  #: Ray nodes constructed in the block (a failed start's are killed before a retry)

    def set(self, what: str) -> None:
        if what != self.what:
            self.what, self.since, self.noticed = what, time.monotonic(), False


@contextlib.contextmanager
def patient_start(timeout_s: float | None = None, what: str = "Ray"):
    """Start Ray nodes inside this block with up to ``timeout_s`` wall seconds per start-up stage.

    Ray's own waits for a starting node are 30 s each; this sets Ray's knobs for them
    (``RAY_gcs_server_port_wait_time_s``: the GCS port; ``RAY_raylet_start_wait_time_s``: the
    driver's wait for its raylet; unless the environment sets them already), and, where Ray has
    no knob (the head node waiting for its raylet to register with the GCS, a
    ``cluster_utils`` node joining), makes Ray's own check wait up to ``timeout_s`` before it
    gives up; a node started in the block gets its agents' ports up front (:func:`pin_agent_ports`),
    so its raylet does not abort waiting for them. A stage still running after 15 s is named once on
    stderr.
    """
    import ray._private.node as node_mod
    import ray._private.services as services

    timeout_s = start_timeout_s(timeout_s)
    env = {"RAY_gcs_server_port_wait_time_s": str(math.ceil(timeout_s)),
           "RAY_raylet_start_wait_time_s": str(math.ceil(timeout_s))}
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if saved[k] is None:
            os.environ[k] = v
    stage = _Stage()
    orig_get_node, orig_wait_for_node = services.get_node, services.wait_for_node

    def get_node(gcs_address, node_id):
        stage.set("the raylet to register with the GCS")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                info = orig_get_node(gcs_address, node_id)
            except RuntimeError:
                if time.monotonic() > deadline or _raylet_died(stage.nodes):
                    raise  # Ray's own check then fails the start: a dead raylet never registers
                time.sleep(0.2)
                continue
            stage.set("the driver to connect")
            return info

    def wait_for_node(gcs_address, socket_name, timeout=30):
        stage.set("a node to join the cluster")
        return orig_wait_for_node(gcs_address, socket_name, max(timeout, timeout_s))

    orig_node_init = node_mod.Node.__init__

    def node_init(self, *args, **kwargs):
        stage.nodes.append(self)
        params = args[0] if args else kwargs.get("ray_params")
        if params is not None and not kwargs.get("connect_only", False):
            pin_agent_ports(params)
        orig_node_init(self, *args, **kwargs)

    done = threading.Event()

    def notice():
        while not done.wait(1.0):
            waited = time.monotonic() - stage.since
            if waited > NOTICE_AFTER_S and not stage.noticed:
                stage.noticed = True
                print(f"raytestbed: {what} is starting slowly (busy host?): waiting for {stage.what}, "
                      f"{waited:.0f} s so far, up to {timeout_s:g} s ({START_TIMEOUT_ENV})", file=sys.stderr)

    services.get_node, services.wait_for_node = get_node, wait_for_node
    node_mod.Node.__init__ = node_init
    ticker = threading.Thread(target=notice, name="ray-start-notice", daemon=True)
    ticker.start()
    try:
        yield stage
    finally:
        done.set()
        services.get_node, services.wait_for_node = orig_get_node, orig_wait_for_node
        node_mod.Node.__init__ = orig_node_init
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)


#: the ports a node's agents (dashboard agent, runtime-env agent) listen on, as ``RayParams`` names them
AGENT_PORTS = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port", "runtime_env_agent_port")


def pin_agent_ports(ray_params) -> None:
    """Give a starting node's agents free ports chosen here, where Ray would let them pick their own.

    With a port of 0 the raylet waits for the agent to write the port it bound to a file, and aborts
    when that takes more than 15 s, a limit Ray offers no knob for; on a busy host the agent's
    Python start-up alone can take longer. Given the ports up front, the raylet passes them to its
    agents and does not wait. Ports the caller set are kept.
    """
    for name in AGENT_PORTS:
        if not getattr(ray_params, name, None):
            setattr(ray_params, name, _free_port())


def _free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick for port 0 on 127.0.0.1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raylet_died(nodes) -> bool:
    """Whether the raylet of a node started in the block has exited (e.g. aborted waiting for its agents)."""
    for node in nodes:
        for info in getattr(node, "all_processes", {}).get("raylet", []):
            if info.process is not None and info.process.poll() is not None:
                return True
    return False


def start_with_retry(start, stop, timeout_s: float | None = None, what: str = "Ray"):
    """``start()`` inside :func:`patient_start`; if it fails, ``stop()`` and try once more.

    Returns what ``start`` returns. The second failure raises a one-line
    :class:`~raytestbed.errors.RaytestbedError` naming the time limit and how to raise it.
    Arguments Ray refuses (``TypeError``, ``ValueError``) are not retried.
    """
    timeout_s = start_timeout_s(timeout_s)
    for attempt in (1, 2):
        stage = None
        try:
            with patient_start(timeout_s, what) as stage:
                return start()
        except (TypeError, ValueError):
            raise
        except Exception as e:  # Ray raises plain Exception, RuntimeError, TimeoutError, ConnectionError
            reason = " ".join(str(e).split())[:200] or type(e).__name__
            with contextlib.suppress(Exception):
                stop()
            nodes = stage.nodes if stage is not None else []
            raylet_died = _raylet_died(nodes)
            for node in nodes:  # processes of a node that never came up
                with contextlib.suppress(Exception):
                    node.kill_all_processes(check_alive=False, allow_graceful=False)
            if attempt == 2 and raylet_died:
                raise RaytestbedError(
                    f"{what} did not start, twice: its raylet exited while starting (see raylet.out in the Ray "
                    f"session's logs); try again when the host is less loaded") from None
            if attempt == 2:
                raise RaytestbedError(
                    f"{what} did not start, twice (each stage may take {timeout_s:g} s; last error: {reason}); "
                    f"on a busy host set {START_TIMEOUT_ENV} to more seconds") from None
            print(f"raytestbed: {what} did not start ({reason}); retrying once", file=sys.stderr)


@contextlib.contextmanager
def _keep_sigterm_handler():
    """Put back, after ``ray.init``, the SIGTERM handler installed before it (main thread only).

    Ray installs its own handler (exit with status 15 or 1), and its core worker a C-level one
    that prints a stack; a handler installed with ``signal.signal`` (e.g. the command line's, which
    unwinds like Ctrl-C so that results folders are kept resumable) is re-installed, which also
    removes the C-level one. With no Python handler before, Ray's Python handler is re-installed
    (it shuts Ray down), again without the stack.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        keep = before if callable(before) else signal.getsignal(signal.SIGTERM)
        if keep is not None:
            signal.signal(signal.SIGTERM, keep)


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
    holder: dict = {}
    timeout_s = start_timeout_s()

    def start():
        with full_priority_workers():
            holder["cluster"] = c = cluster_utils.Cluster(
                initialize_head=True, head_node_args={"num_cpus": cpus_per_node, "resources": resources})
            for _ in range(nodes - 1):
                c.add_node(num_cpus=cpus_per_node, resources=resources)
            c.wait_for_nodes(timeout=timeout_s)

    def stop():
        c = holder.pop("cluster", None)
        if c is not None:
            c.shutdown()

    try:
        start_with_retry(start, stop, timeout_s, what=f"a {nodes}-node Ray cluster")
        cluster = holder["cluster"]
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        stop()
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
             start_timeout_s: float | None = None, **ray_opts) -> "RaySession":
        """Connect as described in the module docstring; returns the session to close later.

        ``start_timeout_s``: wall seconds each start-up stage may take (:func:`start_timeout_s`);
        a failed start is retried once (:func:`start_with_retry`).
        """
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
        plain_driver_messages()
        ray_opts.setdefault("logging_level", logging.WARNING)  # no "Started a local Ray instance" line

        def start():
            with _keep_sigterm_handler():
                if address:
                    ray.init(address=address, log_to_driver=False, **ray_opts)
                else:
                    session._init_local(host, resources or {}, num_cpus, object_store_memory,
                                        include_dashboard, ray_opts)

        try:
            start_with_retry(start, ray.shutdown, start_timeout_s,
                             what=f"Ray (attaching to {address})" if address else "a local Ray")
        except BaseException:
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
