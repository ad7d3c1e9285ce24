"""The kernel interface and registry.

A kernel follows TensorFlow Lite Micro's phases:

- **construction** (once per model load): reads the operator's options;
- **prepare** (once per `allocate_tensors`, i.e. again after a resize): every check on input
  types, shapes and quantization, the output shapes, all float math (requantization multipliers,
  activation ranges, repacked weights) and the scratch buffers it will need, requested from the
  interpreter's arena with `scratch()`;
- **bind** (once per `allocate_tensors`, after the arena is planned): receives the arrays its
  tensors and scratch buffers will live in for good (views into the arena, constants' buffers) and
  returns the invoke closure; a kernel may build strided views of them here, once;
- **invoke** (every run): arithmetic only, writing into the output and scratch views it was given
  (for int8, integer arithmetic only), no allocation where numpy allows it.

Memory a kernel owns across runs (a padded copy of its input whose border never changes, an
im2col matrix with its constant column of ones) is *persistent*: allocated in prepare with
`persistent()`, as TFLite Micro's AllocatePersistentBuffer. Memory it needs only while it runs is
*scratch*, planned in the arena with the tensors (`scratch()`).

A kernel class is registered by its BuiltinOperator name with the newest operator version whose
semantics it implements; the interpreter lists every operator of a model that has no kernel, or
a newer version, before it runs anything.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from rill.mobile.errors import PrepareError
from rill.mobile.schema import OperatorDef, Quantization, TensorDef

__all__ = ["TensorSpec", "Kernel", "DynamicShape", "register", "KERNELS", "lookup"]

KERNELS: dict[str, type[Kernel]] = {}


class DynamicShape(Exception):
    """Raised by `prepare` when an output's shape depends on values known only at run time (a
    computed shape, WHERE's count, UNIQUE's size). The interpreter then runs that subgraph
    *eagerly*: at every invoke, each operator is prepared with every input's current value
    (`TensorSpec.data`) and its outputs allocated, as TFLite does for dynamic tensors."""


@dataclasses.dataclass
class TensorSpec:
    """What prepare knows of a tensor: its current shape (after resizes and shape propagation),
    type, quantization and, for constants, the data."""

    index: int
    name: str
    dtype: np.dtype | None
    type_name: str
    shape: tuple[int, ...] | None
    quant: Quantization | None
    data: np.ndarray | None
    signature: tuple[int, ...] | None = None  # the file's shape signature (-1: unknown)

    @classmethod
    def of(cls, t: TensorDef, shape: tuple[int, ...] | None) -> TensorSpec:
        sig = t.shape_signature if t.shape_signature is not None else t.shape
        return cls(t.index, t.name, t.dtype, t.type_name, shape, t.quantization, t.data,
                   tuple(sig))  # fmt: skip

    @property
    def scale(self) -> float:
        return float(self.quant.scale[0])

    @property
    def zero_point(self) -> int:
        return int(self.quant.zero_point[0])

    def __str__(self) -> str:
        shape = "?" if self.shape is None else list(self.shape)
        return f"#{self.index} '{self.name}' {self.type_name}{shape}"


class Kernel:
    """Base class of operator kernels. Subclasses set `types` and implement prepare/invoke."""

    op_name: ClassVar[str] = ""
    max_version: ClassVar[int] = 1
    # False for operators with effects (variables, subgraphs): never run once in prepare even
    # when every input is a constant.
    foldable: ClassVar[bool] = True
    # True for operators whose output is their first input's bytes under another shape
    # (RESHAPE, SQUEEZE, EXPAND_DIMS): the interpreter may give the output the input's memory
    # and skip the operator at invoke.
    aliases_input: ClassVar[bool] = False

    def __init__(self, op: OperatorDef):
        self.op = op
        self.options = op.options
        self._scratch: list[tuple[tuple[int, ...], np.dtype]] = []
        self.persistent_bytes = 0
        # Outputs whose values prepare already knows (SHAPE, VAR_HANDLE; in eager mode every
        # data-dependent operator): the interpreter takes them as constants.
        self.known: list[np.ndarray] | None = None
        self.interp = None  # the owning Interpreter (control flow, variables)
        self.eager = False  # True while prepared with every input's value (see DynamicShape)

    # -- prepare-time helpers ------------------------------------------------------------------

    def fail(self, message: str) -> PrepareError:
        """An error naming this operator; `raise self.fail("...")`."""
        return PrepareError(f"operator #{self.op.index} {self.op.name} (version "
                            f"{self.op.version}): {message}")  # fmt: skip

    def scratch(self, shape, dtype) -> int:
        """Requests a scratch buffer in the arena, live only while this operator runs; its view
        is passed to invoke as scratch[k], k being the returned number."""
        self._scratch.append((tuple(int(d) for d in shape), np.dtype(dtype)))
        return len(self._scratch) - 1

    def persistent(self, shape, dtype, fill=0) -> np.ndarray:
        """A buffer this kernel keeps across runs (allocated here, in prepare)."""
        a = np.full(tuple(int(d) for d in shape), fill, dtype=dtype)
        self.persistent_bytes += a.nbytes
        return a

    def begin_prepare(self) -> None:
        self._scratch = []
        self.persistent_bytes = 0
        self.known = None

    def need_value(self, spec: TensorSpec | None, what: str) -> np.ndarray:
        """The value of an input that decides an output's shape; DynamicShape when it is known
        only at run time (the subgraph then runs eagerly)."""
        if spec is None:
            raise self.fail(f"the {what} input is missing")
        if spec.data is None:
            raise DynamicShape(f"operator #{self.op.index} {self.op.name}: the {what} {spec} is "
                               "computed at run time")  # fmt: skip
        return spec.data

    @property
    def scratch_specs(self) -> list[tuple[tuple[int, ...], np.dtype]]:
        return self._scratch

    def expect_dtype(self, spec: TensorSpec, allowed, what: str = "input") -> None:
        names = [np.dtype(a).name for a in allowed]
        if spec.dtype is None or spec.dtype.name not in names:
            raise self.fail(f"{what} {spec} has type {spec.type_name}; expected "
                            f"{' or '.join(n.upper() for n in names)}")  # fmt: skip

    def expect_same_dtype(self, a: TensorSpec, b: TensorSpec) -> None:
        if a.dtype != b.dtype:
            raise self.fail(f"{a} and {b} must have the same type")

    def expect_const(self, spec: TensorSpec | None, what: str) -> np.ndarray:
        if spec is None or spec.data is None:
            raise self.fail(f"the {what} must be a constant tensor (found {spec}); computed "
                            f"{what}s are not supported")  # fmt: skip
        return spec.data

    def expect_quantized(self, spec: TensorSpec, per_channel_ok: bool = False) -> None:
        if spec.quant is None:
            raise self.fail(f"{spec} is {spec.type_name} but has no quantization parameters")
        if spec.quant.per_channel and not per_channel_ok:
            raise self.fail(f"{spec} must be quantized per tensor, found "
                            f"{spec.quant.scale.size} scales")  # fmt: skip

    def expect_same_quant(self, a: TensorSpec, b: TensorSpec) -> None:
        self.expect_quantized(a)
        self.expect_quantized(b)
        if a.scale != b.scale or a.zero_point != b.zero_point:
            raise self.fail(f"{a} (scale {a.scale}, zero point {a.zero_point}) and {b} (scale "
                            f"{b.scale}, zero point {b.zero_point}) must share quantization")  # fmt: skip

    # -- the two phases --------------------------------------------------------------------------

    def prepare(self, inputs: list[TensorSpec | None], outputs: list[TensorSpec]
                ) -> list[tuple[int, ...]]:  # fmt: skip
        """Checks everything and returns the shape of each output."""
        raise NotImplementedError

    def bind(self, inputs: list[np.ndarray | None], outputs: list[np.ndarray],
             scratch: list[np.ndarray]) -> Callable[[], None]:  # fmt: skip
        """Returns the invoke closure over the arrays this operator reads and writes."""
        return functools.partial(self.invoke, inputs, outputs, scratch)

    def invoke(self, inputs: list[np.ndarray | None], outputs: list[np.ndarray],
               scratch: list[np.ndarray]) -> None:  # fmt: skip
        raise NotImplementedError


def register(name: str, max_version: int):
    """Class decorator: the kernel for BuiltinOperator `name`, versions 1..max_version."""

    def deco(cls):
        if name in KERNELS:
            raise ValueError(f"a kernel for {name} is already registered")
        cls.op_name = name
        cls.max_version = max_version
        KERNELS[name] = cls
        return cls

    return deco


def lookup(op: OperatorDef) -> type[Kernel] | None:
    cls = KERNELS.get(op.name)
    if cls is None or op.version > cls.max_version:
        return None
    return cls
