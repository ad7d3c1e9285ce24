"""Reading and writing MetaGraphDef files (TensorFlow's format: binary or the protobuf text
form). What goes into one is rill.train.meta_graph's business; this module only moves bytes, so
that the packages above rill.graph need no protobuf of their own."""

from __future__ import annotations

import os

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from rill.graph.errors import GraphValueError
from rill.graph.proto import meta_graph_pb2

__all__ = [
    "parse_message",
    "parse_text_message",
    "read_meta_graph_file",
    "write_meta_graph_file",
]


def read_meta_graph_file(filename) -> meta_graph_pb2.MetaGraphDef:
    """A MetaGraphDef from a file in the binary or the text form."""
    filename = os.fspath(filename)
    if not os.path.isfile(filename):
        raise OSError(f"File {filename} does not exist.")
    with open(filename, "rb") as f:
        data = f.read()
    m = meta_graph_pb2.MetaGraphDef()
    try:
        m.ParseFromString(data)
        return m
    except DecodeError:
        pass
    try:
        text_format.Merge(data.decode("utf-8"), m)
    except (UnicodeDecodeError, text_format.ParseError) as e:
        raise GraphValueError(
            f"{filename} is neither a binary nor a text MetaGraphDef: {e}"
        ) from None
    return m


def write_meta_graph_file(m: meta_graph_pb2.MetaGraphDef, filename, as_text: bool = False) -> None:
    """Writes `m` to `filename` through a temporary file, so a crash mid-write leaves the
    previous file intact."""
    data = text_format.MessageToString(m).encode() if as_text else m.SerializeToString()
    tmp = f"{filename}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, filename)


def parse_message(cls, data: bytes, what: str):
    """`cls.FromString(data)`, with a malformed message a GraphValueError naming `what`."""
    try:
        return cls.FromString(data)
    except DecodeError as e:
        raise GraphValueError(f"{what}: malformed {cls.__name__}: {e}") from None


def parse_text_message(cls, data: bytes, what: str):
    """A `cls` from its protobuf text form, with a malformed one a GraphValueError naming
    `what`."""
    m = cls()
    try:
        text_format.Merge(data.decode("utf-8"), m)
    except (UnicodeDecodeError, text_format.ParseError) as e:
        raise GraphValueError(f"{what}: malformed {cls.__name__} text: {e}") from None
    return m
