"""Static tensor shapes, with unknown dimensions (None) and unknown rank.

>>> s = TensorShape([None, 784])
>>> s.merge_with([100, None])
TensorShape([100, 784])
>>> broadcast_shapes(TensorShape([3, 1]), TensorShape([4]))
TensorShape([3, 4])
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["TensorShape", "as_shape", "broadcast_shapes", "unknown_shape", "scalar"]


class TensorShape:
    """A possibly partial shape. `dims` is None for unknown rank, else a tuple of int | None.

    Instances are immutable and hashable.
    """

    __slots__ = ("dims",)

    def __init__(self, dims: Iterable[int | None] | None):
        if dims is None:
            self.dims = None
        else:
            out = []
            for d in dims:
                if d is None or (isinstance(d, int) and d == -1):
                    out.append(None)
                else:
                    d = int(d)
                    if d < 0:
                        raise ValueError(f"negative dimension {d} in shape {list(dims)}")
                    out.append(d)
            self.dims = tuple(out)

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    @property
    def ndims(self) -> int | None:
        return self.rank

    def is_fully_defined(self) -> bool:
        return self.dims is not None and None not in self.dims

    def num_elements(self) -> int | None:
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self.dims:
            n *= d
        return n

    def as_list(self) -> list[int | None]:
        if self.dims is None:
            raise ValueError("as_list() is not defined on a shape of unknown rank")
        return list(self.dims)

    def as_tuple(self) -> tuple[int, ...]:
        if not self.is_fully_defined():
            raise ValueError(f"shape {self} is not fully defined")
        return self.dims

    def __len__(self) -> int:
        if self.dims is None:
            raise ValueError("len() of a shape of unknown rank")
        return len(self.dims)

    def __iter__(self):
        if self.dims is None:
            raise ValueError("cannot iterate over a shape of unknown rank")
        return iter(self.dims)

    def __getitem__(self, key):
        if self.dims is None:
            if isinstance(key, slice):
                return unknown_shape()
            return None
        if isinstance(key, slice):
            return TensorShape(self.dims[key])
        return self.dims[key]

    def is_compatible_with(self, other) -> bool:
        other = as_shape(other)
        if self.dims is None or other.dims is None:
            return True
        if len(self.dims) != len(other.dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.dims, other.dims))

    def merge_with(self, other) -> TensorShape:
        """The most specific shape compatible with both; ValueError if they conflict."""
        other = as_shape(other)
        if self.dims is None:
            return other
        if other.dims is None:
            return self
        if len(self.dims) != len(other.dims):
            raise ValueError(f"shapes {self} and {other} have different ranks")
        out = []
        for a, b in zip(self.dims, other.dims):
            if a is None:
                out.append(b)
            elif b is None or a == b:
                out.append(a)
            else:
                raise ValueError(f"shapes {self} and {other} are not compatible")
        return TensorShape(out)

    def with_rank(self, rank: int) -> TensorShape:
        if self.dims is None:
            return TensorShape([None] * rank)
        if len(self.dims) != rank:
            raise ValueError(f"shape {self} must have rank {rank}")
        return self

    def with_rank_at_least(self, rank: int) -> TensorShape:
        if self.dims is not None and len(self.dims) < rank:
            raise ValueError(f"shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank: int) -> TensorShape:
        if self.dims is not None and len(self.dims) > rank:
            raise ValueError(f"shape {self} must have rank at most {rank}")
        return self

    def concatenate(self, other) -> TensorShape:
        other = as_shape(other)
        if self.dims is None or other.dims is None:
            return unknown_shape()
        return TensorShape(self.dims + other.dims)

    def most_specific_compatible(self, other) -> TensorShape:
        """The least specific shape that both shapes are compatible with (a join)."""
        other = as_shape(other)
        if self.dims is None or other.dims is None or len(self.dims) != len(other.dims):
            return unknown_shape()
        return TensorShape([a if a == b else None for a, b in zip(self.dims, other.dims)])

    def __eq__(self, other) -> bool:
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self.dims == other.dims

    def __hash__(self) -> int:
        return hash(self.dims)

    def __repr__(self) -> str:
        return "TensorShape(None)" if self.dims is None else f"TensorShape({list(self.dims)})"

    def __str__(self) -> str:
        return format_dims(self.dims)


def format_dims(dims) -> str:
    """`[?,784]`, `[]`, or `[*]` for unknown rank."""
    if dims is None:
        return "[*]"
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


# The largest rank a shape may have (TensorFlow's TensorShape limit): a rank read from an input
# (the length of a shape vector) is checked against it before a list of that length is built.
MAX_RANK = 254


def check_rank(rank: int, what: str = "a shape") -> int:
    """`rank` when it is at most MAX_RANK; a GraphValueError naming `what` otherwise."""
    if rank > MAX_RANK:
        from rill.graph.errors import GraphValueError

        raise GraphValueError(f"{what} has rank {rank}, above the maximum rank {MAX_RANK}")
    return rank


def unknown_shape(rank: int | None = None) -> TensorShape:
    return TensorShape(None if rank is None else [None] * check_rank(rank))


def scalar() -> TensorShape:
    return TensorShape(())


def as_shape(value) -> TensorShape:
    if isinstance(value, TensorShape):
        return value
    if value is None:
        return TensorShape(None)
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return TensorShape([value])
    return TensorShape(value)


def broadcast_shapes(a, b) -> TensorShape:
    """Numpy broadcasting of two static shapes; ValueError when they cannot broadcast."""
    a, b = as_shape(a), as_shape(b)
    if a.dims is None or b.dims is None:
        return unknown_shape()
    n = max(len(a.dims), len(b.dims))
    da = (1,) * (n - len(a.dims)) + a.dims
    db = (1,) * (n - len(b.dims)) + b.dims
    out = []
    for x, y in zip(da, db):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None and y is None:
            out.append(None)
        elif x is None:
            out.append(y)  # x is either y or 1; either way the result is y (y != 1 here)
        elif y is None or x == y:
            out.append(x)
        else:
            raise ValueError(f"shapes {a} and {b} cannot be broadcast together")
    return TensorShape(out)
