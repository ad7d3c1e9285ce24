"""CPU kernels for rill.graph.ops.onnx_ml_ops: the tree walk of ai.onnx.ml's tree ensembles and
LabelEncoder's map (numpy).

The tree walk is vectorised over rows and trees: one step moves every (row, tree) pair that is
not yet at a leaf one level down, so a batch costs as many numpy passes as the deepest tree.
Comparisons are in float64, which holds every float32, float64 and int32 value exactly, so they
decide as comparisons in the input's own type do. String elements arrive as bytes or str; string
outputs are UTF-8 bytes, as rill's other string kernels make."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.onnx_ml_ops import LEAF, tree_depth
from rill.graph.shapes import TensorShape

_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)  # TREE_MODES' order

# -- tree ensembles -----------------------------------------------------------------------------


def _members(nodes, values):
    """A test `(node ids, feature values) → bool array` of set membership, vectorised: each
    (node, value) pair becomes one integer key, node · |distinct values| + value's rank."""
    distinct = np.unique(np.asarray(values, np.float64))
    if distinct.size == 0:
        return lambda nid, v: np.zeros(len(v), bool)
    ranks = np.searchsorted(distinct, np.asarray(values, np.float64))
    keys = np.sort(np.asarray(nodes, np.int64) * distinct.size + ranks)

    def test(nid, v):
        r = np.minimum(np.searchsorted(distinct, v), distinct.size - 1)
        key = nid * distinct.size + r
        at = np.minimum(np.searchsorted(keys, key), keys.size - 1)
        return (distinct[r] == v) & (keys[at] == key)

    return test


@register_kernel("_OnnxTreeEnsemble", expensive=True)
def onnx_tree_ensemble(T, U, n_targets, aggregate, nodes_featureids, nodes_modes, nodes_values,
                       nodes_truenodeids, nodes_falsenodeids, nodes_missing_tracks_true,
                       tree_roots, leaf_nodes, leaf_targets, leaf_weights, member_nodes,
                       member_values):  # fmt: skip
    try:
        depth = tree_depth(nodes_modes, nodes_truenodeids, nodes_falsenodeids, tree_roots)
    except ValueError as e:
        raise InvalidArgumentError(f"TreeEnsemble: {e}") from None
    feature = np.asarray(nodes_featureids, np.int64)
    mode = np.asarray(nodes_modes, np.int64)
    value = np.asarray(nodes_values, np.float64)
    kids = np.stack([np.asarray(nodes_falsenodeids, np.int64),
                     np.asarray(nodes_truenodeids, np.int64)])  # fmt: skip
    tracks = np.asarray(nodes_missing_tracks_true, bool)
    is_leaf = mode == LEAF
    kids[:, is_leaf] = np.flatnonzero(is_leaf)
    roots = np.asarray(tree_roots, np.int64)
    member = _members(member_nodes, member_values)
    # The weights of leaf i are entries start[i]..start[i + 1] of `targets` and `weights`.
    order = np.argsort(np.asarray(leaf_nodes, np.int64), kind="stable")
    targets = np.asarray(leaf_targets, np.int64)[order]
    weights = np.asarray(leaf_weights, np.float64)[order]
    start = np.searchsorted(np.asarray(leaf_nodes, np.int64)[order], np.arange(len(mode) + 1))
    if ((targets < 0) | (targets >= n_targets)).any():
        raise InvalidArgumentError(f"TreeEnsemble: a leaf's target is outside [0, {n_targets})")
    used = np.unique(feature[~is_leaf])
    need = int(used[-1]) + 1 if used.size else 0
    if used.size and used[0] < 0:
        raise InvalidArgumentError(f"TreeEnsemble: negative feature id {int(used[0])}")

    def compare(nid, v):
        m, s = mode[nid], value[nid]
        go = np.select(
            [m == _LEQ, m == _LT, m == _GTE, m == _GT, m == _EQ, m == _NEQ],
            [v <= s, v < s, v >= s, v > s, v == s, v != s],
            default=False,
        )
        mem = m == _MEMBER
        if mem.any():
            go[mem] = member(nid[mem], v[mem])
        return go | (tracks[nid] & np.isnan(v))

    def compute(x):
        if x.ndim != 2:
            raise InvalidArgumentError(
                f"TreeEnsemble: X must be [N, F], got {TensorShape(x.shape)}"
            )
        if x.shape[1] < need:
            raise InvalidArgumentError(
                f"TreeEnsemble: the trees read feature {need - 1}, but X has {x.shape[1]}"
            )
        n = x.shape[0]
        xf = x.astype(np.float64)
        at = np.tile(roots, n)
        rows = np.repeat(np.arange(n), roots.size)
        for _ in range(depth):
            walk = np.flatnonzero(~is_leaf[at])
            if walk.size == 0:
                break
            nid = at[walk]
            go = compare(nid, xf[rows[walk], feature[nid]])
            at[walk] = kids[go.astype(np.int64), nid]
        # Every leaf weight of the leaves reached, as (row, target, weight).
        count = start[at + 1] - start[at]
        first = np.repeat(start[at] - np.cumsum(count) + count, count)
        entry = first + np.arange(first.size)
        flat = np.repeat(rows, count) * n_targets + targets[entry]
        w = weights[entry]
        size = n * n_targets
        hit = np.bincount(flat, minlength=size) > 0
        if aggregate in ("SUM", "AVERAGE"):
            out = np.bincount(flat, weights=w, minlength=size)
            if aggregate == "AVERAGE" and roots.size:
                out /= roots.size
        else:
            pick = np.minimum if aggregate == "MIN" else np.maximum
            out = np.full(size, np.inf if aggregate == "MIN" else -np.inf)
            pick.at(out, flat, w)
            out[~hit] = 0
        shape = (n, n_targets)
        return out.reshape(shape).astype(U.np), hit.reshape(shape)

    return compute


# -- LabelEncoder -------------------------------------------------------------------------------


def _text(v) -> str:
    if isinstance(v, str):
        return v
    try:
        return bytes(v).decode("utf-8")
    except (UnicodeDecodeError, TypeError):
        raise InvalidArgumentError(f"LabelEncoder: input holds {v!r}, not UTF-8 text") from None


@register_kernel("_OnnxLabelEncoder")
def onnx_label_encoder(T, U, keys_int64s, keys_floats, keys_strings, values_int64s,
                       values_floats, values_strings, default_int64, default_float,
                       default_string):  # fmt: skip
    if U.name == "string":
        values = np.empty(len(values_strings), object)
        values[:] = [s.encode("utf-8") for s in values_strings]
        default = default_string.encode("utf-8")
    elif U.is_floating:
        values, default = np.asarray(values_floats, U.np), U.np.type(default_float)
    else:
        values, default = np.asarray(values_int64s, U.np), U.np.type(default_int64)
    strings = T.name == "string"
    if strings:
        table = {k: values[i] for i, k in reversed(list(enumerate(keys_strings)))}
    else:
        keys = np.asarray(keys_floats if T.is_floating else keys_int64s, T.np)
        if len(keys) != len(values):
            raise InvalidArgumentError(f"LabelEncoder: {len(keys)} keys but {len(values)} values")
        nan = np.isnan(keys) if T.is_floating else np.zeros(len(keys), bool)
        nan_value = values[np.flatnonzero(nan)[0]] if nan.any() else default
        order = np.argsort(keys[~nan], kind="stable")
        sorted_keys, sorted_values = keys[~nan][order], values[~nan][order]
    if strings and len(keys_strings) != len(values):
        raise InvalidArgumentError(
            f"LabelEncoder: {len(keys_strings)} keys but {len(values)} values"
        )

    def compute(x):
        if strings:
            flat = [table.get(_text(v), default) for v in x.reshape(-1)]
            out = np.empty(len(flat), values.dtype)
            out[:] = flat
            return out.reshape(x.shape)
        at = np.minimum(np.searchsorted(sorted_keys, x), max(sorted_keys.size - 1, 0))
        if sorted_keys.size:
            found = sorted_keys[at] == x
            out = np.where(found, sorted_values[at], default)
        else:
            out = np.full(x.shape, default, values.dtype)
        if T.is_floating:
            out = np.where(np.isnan(x), nan_value, out)
        return np.asarray(out, values.dtype).reshape(x.shape)

    return compute


# -- SVMClassifier probabilities --------------------------------------------------------------


def _couple(k: int, r: np.ndarray) -> np.ndarray:
    """Class probabilities from pairwise ones r [k, k] (r[i, j] = P(i | i or j)), by libsvm's
    multiclass_probability in float32 and in onnxruntime's order of operations."""
    f = np.float32
    q = np.zeros((k, k), f)
    for i in range(k):
        for j in range(i):
            q[i, i] += r[j, i] * r[j, i]
            q[i, j] = q[j, i]
        for j in range(i + 1, k):
            q[i, i] += r[j, i] * r[j, i]
            q[i, j] = -r[j, i] * r[i, j]
    p = np.full(k, f(1) / f(k), f)
    qp = np.zeros(k, f)
    eps = f(0.005) / f(k)
    for _ in range(100):
        pqp = f(0)
        for i in range(k):
            qp[i] = f(0)
            for j in range(k):
                qp[i] += q[i, j] * p[j]
            pqp += p[i] * qp[i]
        if np.max(np.abs(qp - pqp)) < eps:
            break
        for i in range(k):
            diff = (-qp[i] + pqp) / q[i, i]
            p[i] += diff
            pqp = (pqp + diff * (diff * q[i, i] + f(2) * qp[i])) / (f(1) + diff) / (f(1) + diff)
            for j in range(k):
                qp[j] = (qp[j] + diff * q[i, j]) / (f(1) + diff)
                p[j] /= f(1) + diff
    return p


@register_kernel("_OnnxSvmProbability")
def onnx_svm_probability(classes, prob_a, prob_b):
    pairs = classes * (classes - 1) // 2
    if len(prob_a) < pairs or len(prob_b) < pairs:
        raise InvalidArgumentError(
            f"SVMClassifier: {classes} classes need {pairs} prob_a and prob_b, got "
            f"{len(prob_a)} and {len(prob_b)}"
        )
    a = np.asarray(prob_a[:pairs], np.float32)
    b = np.asarray(prob_b[:pairs], np.float32)
    upper = np.triu_indices(classes, 1)

    def compute(s):
        if s.ndim != 2 or s.shape[1] != pairs:
            raise InvalidArgumentError(
                f"SVMClassifier: expected [N, {pairs}] decision values, got {TensorShape(s.shape)}"
            )
        with np.errstate(over="ignore"):
            v = s.astype(np.float32) * a + b
            sig = np.where(v < 0, 1 - 1 / (1 + np.exp(v)), 1 / (1 + np.exp(-v))).astype(np.float32)
        r = np.clip(np.float32(1) - sig, np.float32(1e-7), np.float32(1 - 1e-7))
        out = np.empty((s.shape[0], classes), np.float32)
        for n in range(s.shape[0]):
            pr = np.zeros((classes, classes), np.float32)
            pr[upper] = r[n]
            pr[upper[1], upper[0]] = np.float32(1) - r[n]
            out[n] = _couple(classes, pr)
        return out

    return compute
