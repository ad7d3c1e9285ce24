"""Tensor element types, numbered as TensorFlow's DataType enum and mapped to numpy.

>>> float32.name, float32.enum, float32.np
('float32', 1, dtype('float32'))
>>> as_dtype("int64") is int64
True

The narrow types (float8, float4, 4-bit and 2-bit integers) hold values and convert with Cast, as
in TensorFlow, which allows them almost nowhere else; numpy holds them one per byte (ml_dtypes).
float8_e8m0fnu (ONNX's FLOAT8E8M0, the MX scale type) has no TensorFlow DataType number: rill
graphs can hold it, but it cannot be written to a GraphDef.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "DType",
    "as_dtype",
    "bfloat16",
    "bool_",
    "complex64",
    "complex128",
    "float16",
    "float32",
    "float64",
    "float4_e2m1fn",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "half",
    "double",
    "int2",
    "int4",
    "int8",
    "int16",
    "int32",
    "int64",
    "resource",
    "string",
    "uint2",
    "uint4",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "variant",
    "ALL_TYPES",
    "FLOAT_TYPES",
    "INTEGER_TYPES",
    "NARROW_TYPES",
    "NUMBER_TYPES",
    "REAL_NUMBER_TYPES",
]


class DType:
    """One element type. Instances are singletons: compare with `is` or `==`.

    Attributes:
        name: the TensorFlow name (`float32`, `int64`, `resource`, ...).
        enum: the DataType number used in GraphDef; None for a type TensorFlow does not number.
        np: the numpy dtype holding values of this type (object for string/resource/variant).
        short: the abbreviation used in the text form (`f32`, `i64`, ...).
        size: bytes per element in memory (1 for every narrow type; 0 for string and handles).
        is_narrow: a float8, float4, 4-bit or 2-bit type, which only Cast and data movement take.
    """

    __slots__ = ("name", "enum", "np", "short", "_kind", "size", "is_narrow")

    def __init__(
        self, name: str, enum: int | None, np_dtype, short: str, kind: str, narrow: bool = False
    ):
        self.name = name
        self.enum = enum
        self.np = np.dtype(np_dtype)
        self.short = short
        self._kind = kind  # f: float, i: signed int, u: unsigned, b: bool, c: complex, o: other
        self.size = self.np.itemsize if kind != "o" else 0
        self.is_narrow = narrow

    @property
    def is_floating(self) -> bool:
        return self._kind == "f"

    @property
    def is_integer(self) -> bool:
        return self._kind in "iu"

    @property
    def is_unsigned(self) -> bool:
        return self._kind == "u"

    @property
    def is_bool(self) -> bool:
        return self._kind == "b"

    @property
    def is_complex(self) -> bool:
        return self._kind == "c"

    @property
    def is_numeric(self) -> bool:
        return self._kind in "fiuc"

    @property
    def is_differentiable(self) -> bool:
        return self._kind in "fc" and not self.is_narrow  # TensorFlow trains no float8

    @property
    def real_dtype(self) -> DType:
        return {complex64: float32, complex128: float64}.get(self, self)

    @property
    def min(self):
        if self._kind == "f":
            return float(ml_dtypes.finfo(self.np).min)
        if self._kind in "iu":
            return int(ml_dtypes.iinfo(self.np).min)
        raise TypeError(f"{self.name} has no minimum")

    @property
    def max(self):
        if self._kind == "f":
            return float(ml_dtypes.finfo(self.np).max)
        if self._kind in "iu":
            return int(ml_dtypes.iinfo(self.np).max)
        raise TypeError(f"{self.name} has no maximum")

    def __repr__(self) -> str:
        return f"rill.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):
        return as_dtype, (self.name,)


float16 = half = DType("float16", 19, np.float16, "f16", "f")
bfloat16 = DType("bfloat16", 14, ml_dtypes.bfloat16, "bf16", "f")
float32 = DType("float32", 1, np.float32, "f32", "f")
float64 = double = DType("float64", 2, np.float64, "f64", "f")
int8 = DType("int8", 6, np.int8, "i8", "i")
int16 = DType("int16", 5, np.int16, "i16", "i")
int32 = DType("int32", 3, np.int32, "i32", "i")
int64 = DType("int64", 9, np.int64, "i64", "i")
uint8 = DType("uint8", 4, np.uint8, "u8", "u")
uint16 = DType("uint16", 17, np.uint16, "u16", "u")
uint32 = DType("uint32", 22, np.uint32, "u32", "u")
uint64 = DType("uint64", 23, np.uint64, "u64", "u")
bool_ = DType("bool", 10, np.bool_, "bool", "b")
string = DType("string", 7, object, "string", "o")
complex64 = DType("complex64", 8, np.complex64, "c64", "c")
complex128 = DType("complex128", 18, np.complex128, "c128", "c")
resource = DType("resource", 20, object, "resource", "o")
variant = DType("variant", 21, object, "variant", "o")
float8_e5m2 = DType("float8_e5m2", 24, ml_dtypes.float8_e5m2, "f8e5m2", "f", True)
float8_e4m3fn = DType("float8_e4m3fn", 25, ml_dtypes.float8_e4m3fn, "f8e4m3fn", "f", True)
float8_e4m3fnuz = DType("float8_e4m3fnuz", 26, ml_dtypes.float8_e4m3fnuz, "f8e4m3fnuz", "f", True)
float8_e4m3b11fnuz = DType(
    "float8_e4m3b11fnuz", 27, ml_dtypes.float8_e4m3b11fnuz, "f8e4m3b11fnuz", "f", True
)
float8_e5m2fnuz = DType("float8_e5m2fnuz", 28, ml_dtypes.float8_e5m2fnuz, "f8e5m2fnuz", "f", True)
int4 = DType("int4", 29, ml_dtypes.int4, "i4", "i", True)
uint4 = DType("uint4", 30, ml_dtypes.uint4, "u4", "u", True)
int2 = DType("int2", 31, ml_dtypes.int2, "i2", "i", True)
uint2 = DType("uint2", 32, ml_dtypes.uint2, "u2", "u", True)
float4_e2m1fn = DType("float4_e2m1fn", 33, ml_dtypes.float4_e2m1fn, "f4e2m1fn", "f", True)
# Only positive powers of two and NaN; TensorFlow's DataType has no number for it.
float8_e8m0fnu = DType("float8_e8m0fnu", None, ml_dtypes.float8_e8m0fnu, "f8e8m0fnu", "f", True)

ALL_TYPES: tuple[DType, ...] = (
    float16, bfloat16, float32, float64,
    int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    bool_, string, complex64, complex128, resource, variant,
    float8_e5m2, float8_e4m3fn, float8_e4m3fnuz, float8_e4m3b11fnuz, float8_e5m2fnuz,
    int4, uint4, int2, uint2, float4_e2m1fn, float8_e8m0fnu,
)  # fmt: skip
# The types arithmetic takes; the narrow ones are apart (TensorFlow's numbertypes leave them out).
NARROW_TYPES = tuple(t for t in ALL_TYPES if t.is_narrow)
FLOAT_TYPES = (float16, bfloat16, float32, float64)
INTEGER_TYPES = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)
REAL_NUMBER_TYPES = FLOAT_TYPES + INTEGER_TYPES
NUMBER_TYPES = REAL_NUMBER_TYPES + (complex64, complex128)

_BY_NAME: dict[str, DType] = {}
for _t in ALL_TYPES:
    _BY_NAME[_t.name] = _t
    _BY_NAME[_t.short] = _t
_BY_NAME.update(half=float16, double=float64, bool_=bool_, bf16=bfloat16)
# TensorFlow's C names ("float" is float32 there, as in its DataType enum DT_FLOAT). TensorFlow
# accepts no "int" or "long" string, and neither does rill.
_BY_NAME["float"] = float32
_BY_ENUM: dict[int, DType] = {t.enum: t for t in ALL_TYPES if t.enum is not None}
_BY_NP: dict[np.dtype, DType] = {t.np: t for t in ALL_TYPES if t not in (string, resource, variant)}
_BY_NP[np.dtype(np.bytes_)] = string
_BY_NP[np.dtype(np.str_)] = string
_BY_NP[np.dtype(object)] = string  # object arrays hold bytes, as TensorFlow reads them


def as_dtype(value) -> DType:
    """Converts a DType, a name, an abbreviation, a DataType number or a numpy dtype to a DType.

    >>> as_dtype(np.float64), as_dtype(3), as_dtype("f16"), as_dtype("float")
    (rill.float64, rill.int32, rill.float16, rill.float32)
    """
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        found = _BY_NAME.get(value)
        if found is None and value.endswith("_ref"):
            found = _BY_NAME.get(value[: -len("_ref")])  # TF-1 reference types: their base type
        if found is None:
            raise TypeError(f"unknown dtype name {value!r}; expected one of {sorted(_BY_NAME)}")
        return found
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        found = _BY_ENUM.get(int(value))
        if found is None:
            ref = _BY_ENUM.get(int(value) - 100)
            if ref is not None:
                return ref  # *_REF types from TF-1 graphs map to their base type
            raise TypeError(f"unknown DataType number {value}")
        return found
    if value is bool:
        return bool_
    if value is float:
        return float32
    if value is int:
        return int32
    if value is str or value is bytes:
        return string
    try:
        npd = np.dtype(value)
    except TypeError as e:
        raise TypeError(f"cannot interpret {value!r} as a dtype") from e
    if npd.kind in "SU":
        return string
    found = _BY_NP.get(npd)
    if found is None:
        raise TypeError(f"numpy dtype {npd} has no rill equivalent")
    return found
