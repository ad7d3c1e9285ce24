"""rill.compat.v1's coverage of TensorFlow 1.x's public names (tools/fixtures/tf1_api.json,
written from TensorFlow 2.21's tf.compat.v1 by tools/tf1_api_names.py).

Prints the coverage per module (`pytest -s` shows it) and fails if a module falls below the
floor it has reached, so a name lost from the facade is a failure.
"""

import importlib
import json
import pathlib

import pytest

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "tools" / "fixtures" / "tf1_api.json"

# Names rill.compat.v1 must keep per module: what it covers today (raise them as it grows).
FLOORS = {
    "tf": 471,
    "nn": 90,
    "nn.rnn_cell": 10,
    "layers": 31,
    "train": 87,
    "losses": 16,
    "metrics": 24,
    "summary": 16,
    "app": 1,
    "flags": 66,
    "gfile": 15,
    "logging": 19,
    "errors": 35,
    "random": 23,
    "math": 105,
    "linalg": 24,
    "image": 36,
    "io": 14,
    "saved_model": 38,
    "debugging": 18,
    "initializers": 20,
    "dtypes": 23,
    "data": 13,
    "data.experimental": 16,
}


def _module(path: str):
    tf = importlib.import_module("rill.compat.v1")
    if path == "tf":
        return tf
    m = tf
    for part in path.split("."):
        m = getattr(m, part, None)
        if m is None:
            return None
    return m


def coverage() -> dict[str, tuple[int, int, list[str]]]:
    facts = json.loads(FIXTURE.read_text())["modules"]
    out = {}
    for path, names in facts.items():
        m = _module(path)
        missing = [n for n in names if m is None or not hasattr(m, n)]
        out[path] = (len(names) - len(missing), len(names), missing)
    return out


def test_fixture_is_tensorflows_tf1_api():
    facts = json.loads(FIXTURE.read_text())
    assert facts["tensorflow_version"].startswith("2.")
    assert "placeholder" in facts["modules"]["tf"] and "dropout" in facts["modules"]["nn"]
    assert set(FLOORS) == set(facts["modules"])


def test_coverage_per_module_meets_its_floor():
    cov = coverage()
    lines = [f"{'module':14} {'covered':>8} {'of':>5} {'pct':>6}"]
    total_have = total_all = 0
    for path, (have, total, _) in sorted(cov.items()):
        total_have += have
        total_all += total
        pct = 100.0 * have / total if total else 100.0
        lines.append(f"{path:14} {have:8d} {total:5d} {pct:5.1f}%")
    lines.append(
        f"{'all':14} {total_have:8d} {total_all:5d} {100.0 * total_have / total_all:5.1f}%"
    )
    print("\n" + "\n".join(lines))
    low = {p: (have, FLOORS[p]) for p, (have, _, _) in cov.items() if have < FLOORS[p]}
    assert not low, f"modules below their coverage floor (have, floor): {low}"


@pytest.mark.parametrize("name", ["Session", "placeholder", "Variable", "get_variable",
                                  "variable_scope", "name_scope", "device",
                                  "control_dependencies", "colocate_with", "gradients",
                                  "initialize_all_variables", "arg_max", "to_float"])  # fmt: skip
def test_the_names_the_issue_lists_are_there(name):
    assert hasattr(_module("tf"), name)
