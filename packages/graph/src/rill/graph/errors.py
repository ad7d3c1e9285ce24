"""TensorFlow's canonical error classes, shared by every rill package.

Construction-time mistakes (a wrong dtype, an incompatible shape, an unknown op) raise Python's
TypeError / ValueError subclasses defined here; run-time failures raise an `OpError` subclass that
carries the op, its printed line and the user source line that created it.
"""

from __future__ import annotations

__all__ = [
    "RillError",
    "OpError",
    "CancelledError",
    "UnknownError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "UnavailableError",
    "DataLossError",
    "UnauthenticatedError",
    "GraphTypeError",
    "GraphValueError",
    "error_class_for_code",
]

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class RillError(Exception):
    """The common base of every error rill raises on purpose: OpError (run time, with TensorFlow's
    canonical codes), GraphTypeError / GraphValueError (graph construction and import), and the
    packages' own (OnnxImportError, OpDefError, ...). Input from an untrusted file that rill cannot
    use ends in one of these, never in another exception."""


class OpError(RillError):
    """A failure while running a graph. `op` is the Operation that failed, when known."""

    error_code = UNKNOWN

    def __init__(self, message: str, op=None, node_def=None):
        self.message = message
        self.op = op
        self.node_def = node_def
        super().__init__(self._render())

    def _render(self) -> str:
        if self.op is None:
            return self.message
        return f"{self.message}\n{describe_op(self.op)}"

    def __reduce__(self):
        return type(self), (self.message,)


def describe_op(op) -> str:
    """The lines an error shows for an op: its text form and the user source line."""
    lines = []
    try:
        from rill.graph.text import format_op

        lines.append(f"  {format_op(op)}")
    except Exception:
        lines.append(f"  op {op.name!r} of type {op.type}")
    src = getattr(op, "source", None)
    if src:
        lines.append(f"  created at {src[0]}:{src[1]} in {src[2]}")
    return "\n".join(lines)


class CancelledError(OpError):
    error_code = CANCELLED


class UnknownError(OpError):
    error_code = UNKNOWN


class InvalidArgumentError(OpError):
    error_code = INVALID_ARGUMENT


class DeadlineExceededError(OpError):
    error_code = DEADLINE_EXCEEDED


class NotFoundError(OpError):
    error_code = NOT_FOUND


class AlreadyExistsError(OpError):
    error_code = ALREADY_EXISTS


class PermissionDeniedError(OpError):
    error_code = PERMISSION_DENIED


class ResourceExhaustedError(OpError):
    error_code = RESOURCE_EXHAUSTED


class FailedPreconditionError(OpError):
    error_code = FAILED_PRECONDITION


class AbortedError(OpError):
    error_code = ABORTED


class OutOfRangeError(OpError):
    error_code = OUT_OF_RANGE


class UnimplementedError(OpError):
    error_code = UNIMPLEMENTED


class InternalError(OpError):
    error_code = INTERNAL


class UnavailableError(OpError):
    error_code = UNAVAILABLE


class DataLossError(OpError):
    error_code = DATA_LOSS


class UnauthenticatedError(OpError):
    error_code = UNAUTHENTICATED


_BY_CODE = {
    cls.error_code: cls
    for cls in (
        CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
        NotFoundError, AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError,
        FailedPreconditionError, AbortedError, OutOfRangeError, UnimplementedError,
        InternalError, UnavailableError, DataLossError, UnauthenticatedError,
    )
}  # fmt: skip


def error_class_for_code(code: int) -> type[OpError]:
    return _BY_CODE.get(code, UnknownError)


class GraphTypeError(RillError, TypeError):
    """A dtype mistake found while building a graph (names the op and the user's source line)."""


class GraphValueError(RillError, ValueError):
    """A shape, attr or structure mistake found while building or importing a graph."""
