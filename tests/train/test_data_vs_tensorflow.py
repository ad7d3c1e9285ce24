"""tf.data pipelines give TensorFlow's elements, in TensorFlow's order, with its static shapes:
the cases of tools/fixtures/tf_data_cases.py against what TensorFlow recorded
(tools/fixtures/tf_data_outputs.json, made by tools/fixtures/make_tf_data_fixtures.py)."""

import json
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import rill.compat.v1 as tf  # noqa: E402
from rill.graph import nest  # noqa: E402
from tools.fixtures import tf_data_cases  # noqa: E402

RECORDED = json.loads((ROOT / "tools" / "fixtures" / "tf_data_outputs.json").read_text())


@pytest.mark.parametrize("case", tf_data_cases.CASES, ids=lambda c: c.__name__)
def test_same_elements_and_shapes_as_tensorflow(case):
    with tf.Graph().as_default():
        got = tf_data_cases.record(tf, nest.flatten, tf.Session, case(tf))
    want = RECORDED[case.__name__]
    assert got["shapes"] == want["shapes"]
    assert len(got["elements"]) == len(want["elements"]), (got["elements"], want["elements"])
    for k, (g, w) in enumerate(zip(got["elements"], want["elements"])):
        assert [c["dtype"] for c in g] == [c["dtype"] for c in w], f"element {k}"
        for c, (gc, wc) in enumerate(zip(g, w)):
            np.testing.assert_array_equal(gc["value"], wc["value"], err_msg=f"element {k} #{c}")


def test_recorded_by_tensorflow():
    assert RECORDED["tensorflow_version"].startswith("2.")
    assert set(RECORDED) >= {c.__name__ for c in tf_data_cases.CASES}
