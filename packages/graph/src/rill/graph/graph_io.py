"""`write_graph` (TensorFlow's `tf.io.write_graph` / `tf.train.write_graph`): a GraphDef to a
file, binary or text format."""

from __future__ import annotations

import os

from google.protobuf import text_format

__all__ = ["write_graph"]


def write_graph(graph_or_graph_def, logdir, name: str, as_text: bool = True) -> str:
    """Writes the GraphDef of a Graph (or a GraphDef) to `logdir/name`, atomically (write then
    rename); returns the path.

    >>> import tempfile, rill.graph as rg
    >>> g = rg.Graph()
    >>> with g.as_default():
    ...     _ = rg.constant(1.0, name="c")
    >>> path = write_graph(g, tempfile.mkdtemp(), "g.pbtxt")
    >>> 'name: "c"' in open(path).read()
    True
    """
    gd = graph_or_graph_def
    if hasattr(gd, "as_graph_def"):
        gd = gd.as_graph_def()
    os.makedirs(os.fspath(logdir), exist_ok=True)
    path = os.path.join(os.fspath(logdir), name)
    tmp = path + ".tmp"
    if as_text:
        with open(tmp, "w") as f:
            f.write(text_format.MessageToString(gd))
    else:
        with open(tmp, "wb") as f:
            f.write(gd.SerializeToString())
    os.replace(tmp, path)
    return path
