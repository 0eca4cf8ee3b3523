"""Policy parameters come from the constructor signature (one mechanism, as scikit-learn's get_params)
and every run's summary records all of them."""

import inspect
import json
import pickle
from enum import Enum

from raytestbed.cli import main
from raytestbed.core.policy import Policy
from raytestbed.results.records import PARAM_ITEMS_MAX, params_record
from raytestbed.schedulers.base import available_policies, make_policy


class _Knobs(Policy):
    name = "knobs"

    def __init__(self, seed: int = 0, alpha: float = 0.5, mode: str = "a", **extra) -> None:
        super().__init__(seed)
        self._a = alpha * 2  # stored under another name: get_params still reports what was given

    def on_event(self, event, view):
        return []


def test_params_are_the_constructor_arguments_with_defaults():
    p = _Knobs(3, mode="b", beta=7)
    assert p.get_params() == {"alpha": 0.5, "mode": "b", "beta": 7}
    assert p.seed == 3  # the seed is the run's, recorded as summary["seed"], not a parameter
    again = type(p)(seed=p.seed, **p.get_params())
    assert again.get_params() == p.get_params()
    assert pickle.loads(pickle.dumps(p)).get_params() == p.get_params()


def test_every_registered_policy_reports_every_constructor_parameter():
    for name, cls in available_policies().items():
        sig = inspect.signature(cls.__init__)
        expected = {n for n, par in sig.parameters.items()
                    if n not in ("self", "seed") and par.kind not in (par.VAR_POSITIONAL, par.VAR_KEYWORD)}
        pol = make_policy(name)
        assert set(pol.get_params()) == expected, name
        json.dumps(params_record(pol.get_params()))  # always JSON-writable


def test_params_record_keeps_values_and_shortens_long_sequences():
    class Colour(Enum):
        RED = "red"

    rows = [("g", "u", i) for i in range(PARAM_ITEMS_MAX + 1)]
    rec = params_record({"x": 1.5, "c": Colour.RED, "short": [("g", "u", 3)], "history": rows,
                         "obj": object(), "none": None})
    assert rec == {"x": 1.5, "c": "red", "short": [["g", "u", 3]], "history": {"items": PARAM_ITEMS_MAX + 1},
                   "obj": "<builtins.object>", "none": None}


def test_summary_records_fifo_spread_and_the_network_policy_params(tmp_path):
    trial = tmp_path / "t.yaml"
    trial.write_text("""
cluster: laptop.yaml
workload: {kind: synthetic, jobs: 6, iterations: [20, 50]}
timing: {mode: flow, iterations_per_coflow: 5}
policy_params: {fifo: {spread: random}, parrot: {theta_max: 0.8}}
""")
    out = tmp_path / "o"
    assert main(["run", str(trial), "--policy", "fifo+parrot", "--out", str(out), "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["policy_params"] == {"spread": "random"}
    assert s["network_policy_params"]["theta_max"] == 0.8
    assert set(s["network_policy_params"]) == set(make_policy("parrot").get_params())
