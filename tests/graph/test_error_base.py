"""Every error class rill raises on purpose derives from rill.graph.errors.RillError."""

import rill.graph.errors as errors
from rill.graph.onnx.import_util import OnnxImportError
from rill.graph.op_def import OpDefError


def test_every_documented_error_class_is_a_rill_error():
    classes = [getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)]
    classes += [OnnxImportError, OpDefError]
    assert errors.OpError in classes and errors.GraphValueError in classes
    for c in classes:
        if issubclass(c, Exception):
            assert issubclass(c, errors.RillError), c
    # the builtin bases callers already catch stay
    assert issubclass(errors.GraphValueError, ValueError)
    assert issubclass(errors.GraphTypeError, TypeError)
    assert issubclass(OnnxImportError, ValueError) and issubclass(OpDefError, ValueError)
