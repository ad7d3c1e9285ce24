"""Fetch structures: a tensor, op, name, list, tuple, dict or namedtuple, nested.

`FetchMapper(graph, fetches)` flattens a structure into unique graph elements and rebuilds the
same structure from their values. As in TensorFlow, a scalar comes back as a numpy scalar
(np.float32, np.int64, ...), a scalar string as `bytes`, and anything else as an ndarray.

A composite fetch (IndexedSlices, SparseTensor) defines `_fetch_components()`, returning its
component tensors and a function that builds its value (IndexedSlicesValue, ...) from theirs:
the packages that own those types plug in without exec importing them.
"""

from __future__ import annotations

import numpy as np

from rill.graph.graph import Operation, Tensor

__all__ = ["FetchMapper"]


def _scalar(value):
    """A fetched 0-d array as TensorFlow hands it back: a numpy scalar (np.float32, ...), and for
    a string the bytes object itself; anything else unchanged."""
    if type(value) is np.ndarray and value.ndim == 0:
        return value[()]
    return value


class FetchMapper:
    __slots__ = ("elements", "_build")

    def __init__(self, graph, fetches):
        self.elements: list = []
        index: dict = {}

        def element(obj):
            if obj is None:
                raise TypeError("fetch argument None is not a tensor, an operation or a name")
            try:
                el = graph.as_graph_element(obj)
            except TypeError as e:
                raise TypeError(f"fetch argument {obj!r} cannot be interpreted: {e}") from None
            except (KeyError, ValueError) as e:
                msg = e.args[0] if e.args else str(e)
                raise ValueError(f"fetch argument {obj!r} cannot be interpreted: {msg}") from None
            pos = index.get(el)
            if pos is None:
                pos = index[el] = len(self.elements)
                self.elements.append(el)
            return pos

        def compile_(obj):
            if hasattr(obj, "_fetch_components"):
                parts, make = obj._fetch_components()
                part_subs = [compile_(x) for x in parts]
                return lambda vals: make([s(vals) for s in part_subs])
            if isinstance(obj, (Tensor, Operation, str)) or hasattr(obj, "_as_graph_element"):
                pos = element(obj)
                if isinstance(self.elements[pos], Operation):
                    return lambda vals: None
                return lambda vals: _scalar(vals[pos])
            if isinstance(obj, dict):
                keys = list(obj)
                subs = [compile_(obj[k]) for k in keys]
                cls = type(obj)

                def build_dict(vals):
                    d = cls()
                    for k, s in zip(keys, subs):
                        d[k] = s(vals)
                    return d

                return build_dict
            if isinstance(obj, tuple) and hasattr(obj, "_fields"):
                subs = [compile_(x) for x in obj]
                cls = type(obj)
                return lambda vals: cls(*[s(vals) for s in subs])
            if isinstance(obj, (list, tuple)):
                subs = [compile_(x) for x in obj]
                cls = type(obj)
                if cls is list:
                    return lambda vals: [s(vals) for s in subs]
                return lambda vals: cls(s(vals) for s in subs)
            raise TypeError(
                f"fetch argument {obj!r} of type {type(obj).__name__} is not a tensor, an "
                "operation, a name, or a list/tuple/dict/namedtuple of them"
            )

        self._build = compile_(fetches)

    def build(self, values: list):
        return self._build(values)


class SessionBase:
    """What every session class shares (the local Session and other runtimes' sessions, such as
    rill.distributed's grpc:// one): the `with` protocol, `as_default`, closing on collection,
    and the cache of fetch structures. Subclasses set `graph` and `_fetch_cache` and define
    `close()`."""

    def __enter__(self):
        from rill.graph.graph import default_session

        self._default_ctx = default_session(self)
        self._default_ctx.__enter__()
        self._graph_ctx = self.graph.as_default()
        self._graph_ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._graph_ctx.__exit__(*exc)
        self._default_ctx.__exit__(*exc)
        self.close()
        return False

    def as_default(self):
        from rill.graph.graph import default_session

        return default_session(self)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _mapper(self, fetches) -> FetchMapper:
        try:
            cached = self._fetch_cache.get(fetches)
        except TypeError:  # an unhashable fetch structure (a list, a dict)
            return FetchMapper(self.graph, fetches)
        if cached is None:
            cached = FetchMapper(self.graph, fetches)
            if len(self._fetch_cache) > 4096:
                self._fetch_cache.clear()
            self._fetch_cache[fetches] = cached
        return cached
