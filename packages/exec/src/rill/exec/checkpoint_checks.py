"""Checks of checkpoint index entries read from an untrusted file, shared by the rill and the
TensorFlow checkpoint readers: every size an index declares is checked against the data actually
present before anything is allocated for it, and every name is checked before it reaches the file
system. Failures raise DataLossError naming the tensor.
"""

from __future__ import annotations

import os

from rill.graph.errors import DataLossError

__all__ = ["MAX_INT64", "check_data_file_name", "check_string_count", "element_count"]

MAX_INT64 = (1 << 63) - 1


def element_count(shape, where: str) -> int:
    """The element count of `shape` (a sequence of ints), each dim and the product within int64."""
    count = 1
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int):
            raise DataLossError(
                f"{where}: dimension {d!r} of shape {list(shape)} is not an integer"
            )
        if not 0 <= d <= MAX_INT64:
            raise DataLossError(f"{where}: dimension {d} of shape {list(shape)} is out of range")
        count *= d
    if count > MAX_INT64:
        raise DataLossError(f"{where}: shape {list(shape)} has more elements than int64 counts")
    return count


def check_data_file_name(name, where: str) -> str:
    """`name` when it is a plain file name in the checkpoint's directory."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "\x00" in name
        or "/" in name
        or "\\" in name
        or os.sep in name
        or (os.altsep is not None and os.altsep in name)
    ):
        raise DataLossError(f"{where}: data file {name!r} is not a name of a file in the directory")
    return name


def check_string_count(count: int, nbytes: int, min_bytes_each: int, where: str) -> None:
    """A string tensor of `count` elements, each taking at least `min_bytes_each` bytes, fits in
    the `nbytes` bytes recorded for it; checked before an array of `count` objects is made."""
    if count * min_bytes_each > nbytes:
        raise DataLossError(
            f"{where}: {count} strings need at least {count * min_bytes_each} bytes but the "
            f"tensor has {nbytes}"
        )
