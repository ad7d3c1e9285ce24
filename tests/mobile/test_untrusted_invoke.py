"""Failures while running an operator on its data leave invoke as InvokeError naming the
operator (a RuntimeError, as in LiteRT, and a ValueError, as the other interpreter errors)."""

from __future__ import annotations

import numpy as np
import pytest
from mobile.kernel_testing import fp, sample
from mobile.tflite_builder import T, rill_run, single_op

from rill.mobile.errors import InvokeError


def test_gather_indices_out_of_range_at_invoke():
    model = single_op("GATHER", [fp(4, 3), T((2,), np.int32)], [fp(2, 3)], {"axis": 0})
    x = sample(fp(4, 3))
    with pytest.raises(InvokeError, match=r"operator #0 GATHER.*index 9 is out of range") as e:
        rill_run(model, [x, np.array([1, 9], np.int32)])
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, ValueError)


from mobile.tflite_builder import Op, build  # noqa: E402

from rill.mobile.errors import ModelFormatError  # noqa: E402
from rill.mobile.interpreter import Interpreter  # noqa: E402


@pytest.mark.parametrize(
    "tensors, ops, inputs, outputs, message",
    [
        ([T((2,)), T((2,)), T((2,))], [Op("ADD", [0, 0], [1])], [0], [1, 2],
         r"output tensor #2 't2' is written by no operator"),
        ([T((2,), data=np.ones(2, np.float32)), T((2,))], [Op("ADD", [0, 0], [1])], [0], [1],
         r"input tensor #0 't0' is a constant"),
        ([T((2,)), T((2,))], [Op("ADD", [0, 0], [0])], [0], [0],
         r"input tensor #0 't0' is also written by operator #0"),
    ],
)  # fmt: skip
def test_structurally_invalid_models_are_refused_at_load(tensors, ops, inputs, outputs, message):
    with pytest.raises(ModelFormatError, match=message):
        Interpreter(model_content=build(tensors, ops, inputs, outputs))
