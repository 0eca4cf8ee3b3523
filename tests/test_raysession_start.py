"""Ray start-up on a busy host (raytestbed/emu/raysession.py): the wait per stage, the notice that says
what is awaited, one retry. No Ray is started here: Ray's functions are stood in for where named."""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("ray")

import ray._private.services as services  # noqa: E402

from raytestbed.emu import raysession  # noqa: E402
from raytestbed.errors import ConfigError, RaytestbedError  # noqa: E402


def test_start_timeout_from_argument_environment_or_default(monkeypatch):
    monkeypatch.delenv(raysession.START_TIMEOUT_ENV, raising=False)
    assert raysession.start_timeout_s() == raysession.DEFAULT_START_TIMEOUT_S == 180.0
    monkeypatch.setenv(raysession.START_TIMEOUT_ENV, "420")
    assert raysession.start_timeout_s() == 420.0 and raysession.start_timeout_s(30) == 30.0
    for bad in ("soon", "0", "-5", "nan", "inf"):
        monkeypatch.setenv(raysession.START_TIMEOUT_ENV, bad)
        with pytest.raises(ConfigError, match=raysession.START_TIMEOUT_ENV):
            raysession.start_timeout_s()


def test_patient_start_sets_rays_knobs_and_outwaits_its_registration_check(monkeypatch):
    """Ray's head node gives up when get_node has failed for 30 s; inside the block one get_node call
    waits (here: three failures) until the raylet has registered, and the knobs are Ray's own."""
    monkeypatch.delenv("RAY_gcs_server_port_wait_time_s", raising=False)
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "999")  # the user's own setting wins
    calls = []

    def fake_get_node(gcs_address, node_id):
        calls.append(time.monotonic())
        if len(calls) < 4:
            raise RuntimeError("node not registered yet")
        return {"node_id": node_id}

    monkeypatch.setattr(services, "get_node", fake_get_node)
    with raysession.patient_start(240) as stage:
        assert os.environ["RAY_gcs_server_port_wait_time_s"] == "240"
        assert os.environ["RAY_raylet_start_wait_time_s"] == "999"
        assert services.get_node("127.0.0.1:1", "abc") == {"node_id": "abc"}  # Ray's loop sees one success
        assert len(calls) == 4 and stage.what == "the driver to connect"
    assert services.get_node is fake_get_node and "RAY_gcs_server_port_wait_time_s" not in os.environ


def test_patient_start_gives_up_at_its_limit(monkeypatch):
    def never(gcs_address, node_id):
        raise RuntimeError("node not registered yet")

    monkeypatch.setattr(services, "get_node", never)
    with raysession.patient_start(0.5):
        t0 = time.monotonic()
        with pytest.raises(RuntimeError):
            services.get_node("127.0.0.1:1", "abc")
        assert 0.5 <= time.monotonic() - t0 < 5


def test_a_slow_stage_is_named_once(monkeypatch, capsys):
    monkeypatch.setattr(raysession, "NOTICE_AFTER_S", 0.2)
    with raysession.patient_start(60, what="a local Ray") as stage:
        stage.set("the raylet to register with the GCS")
        time.sleep(2.5)
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert ("raytestbed: a local Ray is starting slowly (busy host?): waiting for the raylet to register with the "
            "GCS") in err and "up to 60 s (RAYTESTBED_RAY_START_TIMEOUT_S)" in err


def test_a_failed_start_is_stopped_and_retried_once(capsys):
    tries, stops = [], []

    def flaky():
        tries.append(1)
        if len(tries) == 1:
            raise Exception("The current node timed out during startup.")
        return "up"

    assert raysession.start_with_retry(flaky, lambda: stops.append(1), 60, what="a local Ray") == "up"
    assert len(tries) == 2 and len(stops) == 1
    assert capsys.readouterr().err == ("raytestbed: a local Ray did not start (The current node timed out during "
                                       "startup.); retrying once\n")

    def broken():
        tries.append(1)
        raise TimeoutError("Timed out after 30 seconds while waiting for node to startup.")

    tries.clear()
    with pytest.raises(RaytestbedError, match=r"a local Ray did not start, twice \(each stage may take 60 s; "
                       r"last error: Timed out after 30 seconds.*set RAYTESTBED_RAY_START_TIMEOUT_S"):
        raysession.start_with_retry(broken, lambda: None, 60, what="a local Ray")
    assert len(tries) == 2

    def bad_argument():
        tries.append(1)
        raise TypeError("init() got an unexpected keyword argument 'x'")

    tries.clear()
    with pytest.raises(TypeError):
        raysession.start_with_retry(bad_argument, lambda: None, 60)
    assert len(tries) == 1


def test_a_raylet_that_died_is_not_waited_for(monkeypatch):
    """A raylet that aborted (Ray's 15 s wait for its dashboard agent's ports) never registers: the
    start fails at once, so the retry comes without waiting out the limit."""
    from types import SimpleNamespace

    def never(gcs_address, node_id):
        raise RuntimeError("node not registered yet")

    monkeypatch.setattr(services, "get_node", never)
    with raysession.patient_start(600) as stage:
        stage.nodes.append(SimpleNamespace(all_processes={"raylet": [SimpleNamespace(process=SimpleNamespace(
            poll=lambda: -6))]}))
        t0 = time.monotonic()
        with pytest.raises(RuntimeError):
            services.get_node("127.0.0.1:1", "abc")
        assert time.monotonic() - t0 < 5


def test_a_start_whose_raylet_died_twice_says_so(capsys):
    """The raylet's own 15 s wait for its agent has no knob: the error must not send the user to the
    time limit that cannot help."""
    from types import SimpleNamespace

    def start():
        stage_nodes[-1].append(SimpleNamespace(all_processes={"raylet": [SimpleNamespace(process=SimpleNamespace(
            poll=lambda: -6))]}, kill_all_processes=lambda **kw: None))
        raise Exception("The current node timed out during startup.")

    stage_nodes = []
    orig = raysession.patient_start

    def recording(*a, **k):
        cm = orig(*a, **k)

        class Wrap:
            def __enter__(self):
                st = cm.__enter__()
                stage_nodes.append(st.nodes)
                return st

            def __exit__(self, *exc):
                return cm.__exit__(*exc)

        return Wrap()

    raysession.patient_start = recording
    try:
        with pytest.raises(RaytestbedError, match=r"did not start, twice: its raylet exited while starting .*raylet.out"):
            raysession.start_with_retry(start, lambda: None, 60, what="a local Ray")
    finally:
        raysession.patient_start = orig


def test_a_node_started_in_the_block_gets_its_agents_ports_up_front(monkeypatch):
    """Its raylet then never waits for the agents' port files (a wait that aborts after 15 s on a busy
    host); a port the caller set is kept, a node that only connects is left alone."""
    import ray._private.node as node_mod
    from ray._private.parameter import RayParams

    seen = []
    monkeypatch.setattr(node_mod.Node, "__init__", lambda self, ray_params, head=False, **kw: seen.append(ray_params))
    given, joining = RayParams(dashboard_agent_listen_port=52365), RayParams()
    before = [getattr(joining, name) for name in raysession.AGENT_PORTS]
    with raysession.patient_start(60):
        node_mod.Node(given, head=True)
        node_mod.Node(joining, connect_only=True)
    ports = [getattr(given, name) for name in raysession.AGENT_PORTS]
    assert all(p and p > 0 for p in ports) and len(set(ports)) == len(ports), ports
    assert given.dashboard_agent_listen_port == 52365
    assert [getattr(joining, name) for name in raysession.AGENT_PORTS] == before
    assert seen == [given, joining]
