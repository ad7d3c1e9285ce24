"""ONNX import rules: the ai.onnx.ml domain, as scikit-learn models converted by skl2onnx use it.

Binarizer, ArrayFeatureExtractor, Scaler, Normalizer, Imputer, OneHotEncoder, FeatureVectorizer,
LinearRegressor and LinearClassifier are compositions of TensorFlow ops. LabelEncoder and
CategoryMapper build rill's _OnnxLabelEncoder; the tree ensembles (TreeEnsemble of opset 5,
TreeEnsembleRegressor and TreeEnsembleClassifier of opsets 1 and 3) bring their trees to the one
node table of rill's _OnnxTreeEnsemble (rill.graph.ops.onnx_ml_ops), which walks every row
through every tree at once, and compose base values, post transforms and class labels around it.

Where the specification leaves a case open, rill computes what onnxruntime does: a target no
leaf reached scores 0 under MIN and MAX; PROBIT is onnxruntime's approximation of
√2·erf⁻¹(2p - 1). A two-class TreeEnsembleClassifier follows onnxruntime's rules as found by
probing onnxruntime 1.31/1.32 with small hand-made ensembles (every class-id set, weight sign,
base-value count and post transform), not the specification, which leaves the case open; they
are spelled out at _binary_classifier, and the one form onnxruntime leaves partly unwritten
(PROBIT where a row keeps one score) is refused.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, i64, op
from rill.graph.ops.logging_ops import assert_op
from rill.graph.ops.onnx_ml_ops import LEAF, TREE_MODES, tree_depth

_ML = "ai.onnx.ml"
_F32, _I64 = dtypes.float32, dtypes.int64
_POST = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
_AGGREGATE = ("AVERAGE", "SUM", "MIN", "MAX")

# -- shared pieces ------------------------------------------------------------------------------


def _cast(t, dt):
    return t if t.dtype == dt else op("Cast", [t], {"DstT": dt})


def _rows(x):
    """x as [N, F] float32 (a 1-D x is one row), as the ai.onnx.ml scorers read it."""
    x = _cast(x, _F32)
    return op("Reshape", [x, i64([1, -1])]) if x.shape.rank == 1 else x


def _probit(s):
    """√2 · erf⁻¹(2s - 1) by onnxruntime's closed-form approximation of erf⁻¹."""
    dt = s.dtype
    y = op("Sub", [op("Mul", [s, const(2, dt)]), const(1, dt)])
    sign = op("Sign", [y])
    sign = op("SelectV2", [op("Equal", [sign, const(0, dt)]), const(1, dt), sign])
    ln = op("Log", [op("Mul", [op("Sub", [const(1, dt), y]), op("AddV2", [const(1, dt), y])])])
    v = op("AddV2", [const(2 / (np.pi * 0.147), dt), op("Mul", [const(0.5, dt), ln])])
    v2 = op("Mul", [const(1 / 0.147, dt), ln])
    v3 = op("Sub", [op("Sqrt", [op("Sub", [op("Square", [v]), v2])]), v])
    return op("Mul", [const(1.41421356, dt), op("Mul", [sign, op("Sqrt", [v3])])])


def _post_transform(s, how: str):
    """The ai.onnx.ml post transform of scores s [N, K]."""
    if how == "NONE":
        return s
    if how == "LOGISTIC":
        return op("Sigmoid", [s])
    if how == "SOFTMAX":
        return op("Softmax", [s])
    if how == "SOFTMAX_ZERO":
        # Scores within 1e-7 of 0 take no part: they become 0 and add nothing to the sum.
        dt = s.dtype
        top = op("Max", [s, const(-1, dtypes.int32)], {"keep_dims": True})
        zero = op("LessEqual", [op("Abs", [s]), const(1e-7, dt)])
        e = op("SelectV2", [zero, const(0, dt), op("Exp", [op("Sub", [s, top])])])
        total = op("Sum", [e, const(-1, dtypes.int32)], {"keep_dims": True})
        return op("RealDiv", [e, total])
    if how == "PROBIT":
        return _probit(s)
    raise OnnxImportError(f"post_transform {how!r} is not one of {', '.join(_POST)}")


def _column(t, j: int):
    return op("GatherV2", [t, i64(j), i64(1)])


def _pair(a, b):
    return op("Pack", [[a, b]], {"axis": 1})


def _strings(values):
    return const(np.asarray([v.encode("utf-8") for v in values], object), dtypes.string)


def _labels(classlabels_ints, classlabels_strings, what: str):
    if classlabels_strings:
        return _strings(classlabels_strings)
    if classlabels_ints is None:
        raise OnnxImportError(f"{what} has neither classlabels_int64s nor classlabels_strings")
    return i64(classlabels_ints)


def _pick(labels, index):
    return op("GatherV2", [labels, as_index(index), i64(0)])


def as_index(t):
    return _cast(t, _I64)


# -- element-wise and feature ops -------------------------------------------------------------


@register_onnx_import("Binarizer", domain=_ML)
def binarizer(n, x, *, threshold=0.0):
    return _cast(op("Greater", [x, const(threshold, x.dtype)]), x.dtype)


@register_onnx_import("ArrayFeatureExtractor", domain=_ML)
def array_feature_extractor(n, x, y):
    y = op("Reshape", [as_index(y), i64([-1])])
    out = op("GatherV2", [x, y, i64(-1)])
    return op("Reshape", [out, i64([1, -1])]) if x.shape.rank == 1 else out


@register_onnx_import("Scaler", domain=_ML)
def scaler(n, x, *, offset=None, scale=None):
    x = _cast(x, _F32)
    if offset:
        x = op("Sub", [x, const(np.asarray(offset, np.float32))])
    if scale:
        x = op("Mul", [x, const(np.asarray(scale, np.float32))])
    return x


@register_onnx_import("Normalizer", domain=_ML)
def normalizer(n, x, *, norm="MAX"):
    x = _cast(x, _F32)
    axis = const(-1, dtypes.int32)
    if norm == "MAX":
        d = op("Max", [x, axis], {"keep_dims": True})
    elif norm == "L1":
        d = op("Sum", [op("Abs", [x]), axis], {"keep_dims": True})
    elif norm == "L2":
        d = op("Sqrt", [op("Sum", [op("Square", [x]), axis], {"keep_dims": True})])
    else:
        raise OnnxImportError(f"norm {norm!r} is not one of MAX, L1, L2")
    # A row whose norm (or maximum) is 0 stays as it is, as in onnxruntime (a text no word of
    # the vocabulary: a TF-IDF row of zeros).
    zero = op("Equal", [d, const(0.0, _F32)])
    return op("RealDiv", [x, op("SelectV2", [zero, const(1.0, _F32), d])])


@register_onnx_import("Imputer", domain=_ML)
def imputer(n, x, *, imputed_value_floats=None, imputed_value_int64s=None,
            replaced_value_float=0.0, replaced_value_int64=0):  # fmt: skip
    if x.dtype.is_floating:
        values, replaced = imputed_value_floats, replaced_value_float
    else:
        values, replaced = imputed_value_int64s, replaced_value_int64
    if not values:
        raise OnnxImportError(
            f"Imputer of a {x.dtype.name} input needs imputed_value_"
            f"{'floats' if x.dtype.is_floating else 'int64s'}"
        )
    fill = const(np.asarray(values), x.dtype)
    if x.dtype.is_floating and np.isnan(replaced):
        missing = op("IsNan", [x])
    else:
        missing = op("Equal", [x, const(replaced, x.dtype)])
    return op("SelectV2", [missing, op("BroadcastTo", [fill, op("Shape", [x])]), x])


@register_onnx_import("OneHotEncoder", domain=_ML)
def one_hot_encoder(n, x, *, cats_int64s=None, cats_strings=None, zeros=1):
    if x.dtype == dtypes.string:
        if not cats_strings:
            raise OnnxImportError("OneHotEncoder of strings needs cats_strings")
        x = _encode(x, cats_strings, list(range(len(cats_strings))), -1, _I64)
        cats = i64(list(range(len(cats_strings))))
    else:
        if not cats_int64s:
            raise OnnxImportError("OneHotEncoder of numbers needs cats_int64s")
        x = as_index(x)
        cats = i64(cats_int64s)
    hot = op("Equal", [op("ExpandDims", [x, const(-1, dtypes.int32)]), cats])
    if not zeros:
        # onnxruntime fails the run on a value outside the categories.
        known = op("All", [op("Any", [hot, const(-1, dtypes.int32)]),
                           op("Range", [const(0, dtypes.int32), op("Rank", [x]),
                                        const(1, dtypes.int32)])])  # fmt: skip
        check = assert_op(known, ["OneHotEncoder: a value is not among the categories (and "
                                  "zeros is 0)"], name="Check")  # fmt: skip
        with hot.graph.control_dependencies([check]):
            hot = op("Identity", [hot])
    return _cast(hot, _F32)


@register_onnx_import("FeatureVectorizer", domain=_ML)
def feature_vectorizer(n, *xs, inputdimensions=None):
    if inputdimensions is None or len(inputdimensions) != len(xs):
        raise OnnxImportError(
            f"FeatureVectorizer has {len(xs)} inputs but inputdimensions {inputdimensions}"
        )
    parts = [op("Reshape", [_cast(x, _F32), i64([-1, d])]) for x, d in zip(xs, inputdimensions)]
    return parts[0] if len(parts) == 1 else op("ConcatV2", [parts, const(1, dtypes.int32)])


# -- label maps ---------------------------------------------------------------------------------


def _kind(dt) -> str:
    return "strings" if dt == dtypes.string else "floats" if dt.is_floating else "int64s"


def _encode(x, keys, values, default, out_dtype):
    """An _OnnxLabelEncoder of keys (of x's kind) → values (of out_dtype's kind)."""
    attrs = {"T": x.dtype, "U": out_dtype, f"keys_{_kind(x.dtype)}": list(keys),
             f"values_{_kind(out_dtype)}": list(values)}  # fmt: skip
    name = {"strings": "default_string", "floats": "default_float", "int64s": "default_int64"}
    attrs[name[_kind(out_dtype)]] = default
    if len(keys) != len(values):
        raise OnnxImportError(f"{len(keys)} keys but {len(values)} values")
    return op("_OnnxLabelEncoder", [x], attrs, name="LabelEncoder")


def _py(a: np.ndarray) -> list:
    if a.dtype.kind in "OSU":
        return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in a.ravel()]
    return a.ravel().tolist()


@register_onnx_import("LabelEncoder", domain=_ML)
def label_encoder(n, x, *, keys_int64s=None, keys_floats=None, keys_strings=None,
                  keys_tensor=None, values_int64s=None, values_floats=None, values_strings=None,
                  values_tensor=None, default_int64=-1, default_float=-0.0,
                  default_string="_Unused", default_tensor=None, classes_strings=None):  # fmt: skip
    if classes_strings is not None:  # opset 1: strings ↔ their index
        idx = list(range(len(classes_strings)))
        if x.dtype == dtypes.string:
            return _encode(x, classes_strings, idx, default_int64, _I64)
        return _encode(as_index(x), idx, classes_strings, default_string, dtypes.string)
    given = [k for k in (keys_int64s, keys_floats, keys_strings) if k is not None]
    if keys_tensor is not None:
        keys = _py(keys_tensor)
    elif len(given) == 1:
        keys = given[0]
    else:
        raise OnnxImportError("LabelEncoder needs exactly one of keys_int64s, keys_floats, "
                              "keys_strings, keys_tensor")  # fmt: skip
    if values_tensor is not None:
        out = dtypes.string if values_tensor.dtype.kind in "OSU" else \
            dtypes.as_dtype(values_tensor.dtype)  # fmt: skip
        values = _py(values_tensor)
    elif values_int64s is not None:
        out, values = _I64, values_int64s
    elif values_floats is not None:
        out, values = _F32, values_floats
    elif values_strings is not None:
        out, values = dtypes.string, values_strings
    else:
        raise OnnxImportError("LabelEncoder needs one of values_int64s, values_floats, "
                              "values_strings, values_tensor")  # fmt: skip
    if default_tensor is not None:
        default = _py(default_tensor)[0]
    else:
        default = {"strings": default_string, "floats": default_float,
                   "int64s": default_int64}[_kind(out)]  # fmt: skip
    if n.opset < 4 and x.dtype.is_floating:  # a NaN key matches nothing before opset 4
        keep = [i for i, k in enumerate(keys) if not np.isnan(k)]
        keys, values = [keys[i] for i in keep], [values[i] for i in keep]
    key_kind = "strings" if keys and isinstance(keys[0], str) else None
    if key_kind and x.dtype != dtypes.string or x.dtype == dtypes.string and keys and not key_kind:
        raise OnnxImportError(f"LabelEncoder's keys and its {x.dtype.name} input differ in kind")
    return _encode(x, keys, values, default, out)


@register_onnx_import("CategoryMapper", domain=_ML)
def category_mapper(n, x, *, cats_int64s=None, cats_strings=None, default_int64=-1,
                    default_string="_Unused"):  # fmt: skip
    if cats_int64s is None or cats_strings is None or len(cats_int64s) != len(cats_strings):
        raise OnnxImportError("CategoryMapper needs cats_int64s and cats_strings of one length")
    if x.dtype == dtypes.string:
        return _encode(x, cats_strings, cats_int64s, default_int64, _I64)
    return _encode(as_index(x), cats_int64s, cats_strings, default_string, dtypes.string)


# -- linear models ------------------------------------------------------------------------------


def _linear(x, coefficients, intercepts, what: str):
    x = _rows(x)
    coef = np.asarray(coefficients, np.float32)
    width = x.shape[1] if x.shape.rank == 2 else None
    if width is None:
        raise OnnxImportError(f"{what}: the feature count of X must be known at import")
    if coef.size % width:
        raise OnnxImportError(f"{what}: {coef.size} coefficients for {width} features")
    w = const(coef.reshape(-1, width).T)
    s = op("MatMul", [x, w])
    if intercepts:
        b = np.asarray(intercepts, np.float32)
        if b.size not in (1, coef.size // width):
            raise OnnxImportError(f"{what}: {b.size} intercepts for {coef.size // width} scores")
        s = op("AddV2", [s, const(b)])
    return s, coef.size // width


@register_onnx_import("LinearRegressor", domain=_ML)
def linear_regressor(n, x, *, coefficients=None, intercepts=None, targets=1,
                     post_transform="NONE"):  # fmt: skip
    s, k = _linear(x, coefficients or [], intercepts, "LinearRegressor")
    if k != targets:
        raise OnnxImportError(f"LinearRegressor: {k} coefficient rows for {targets} targets")
    return _post_transform(s, post_transform)


@register_onnx_import("LinearClassifier", domain=_ML)
def linear_classifier(n, x, *, coefficients, classlabels_ints=None, classlabels_strings=None,
                      intercepts=None, multi_class=0, post_transform="NONE"):  # fmt: skip
    labels = _labels(classlabels_ints, classlabels_strings, "LinearClassifier")
    classes = labels.shape[0]
    s, k = _linear(x, coefficients, intercepts, "LinearClassifier")
    if k == 1:
        # One score s for two classes: onnxruntime scores [1 - p, p], p = σ(s) under LOGISTIC
        # and s itself under NONE, SOFTMAX and SOFTMAX_ZERO; labelled by s > 0.
        if classes != 2:
            raise OnnxImportError(f"LinearClassifier: one score row for {classes} class labels")
        if post_transform == "PROBIT":
            raise OnnxImportError(
                "LinearClassifier: PROBIT of a one-score binary classifier is refused: "
                "onnxruntime and onnx's reference disagree on its scores"
            )
        s1 = _column(s, 0)
        p = op("Sigmoid", [s1]) if post_transform == "LOGISTIC" else s1
        label = _pick(labels, op("Greater", [s1, const(0.0, _F32)]))
        return [label, _pair(op("Sub", [const(1.0, _F32), p]), p)]
    if k != classes:
        raise OnnxImportError(f"LinearClassifier: {k} score rows for {classes} class labels")
    scores = _post_transform(s, post_transform)
    return [_pick(labels, op("ArgMax", [scores, const(1, dtypes.int32)])), scores]


# -- tree ensembles -----------------------------------------------------------------------------


def _same_lengths(what: str, **arrays) -> int:
    sizes = {k: len(v) for k, v in arrays.items() if v is not None}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{k} has {v}" for k, v in sizes.items())
        raise OnnxImportError(f"{what} attributes disagree in length: {listed}")
    return next(iter(sizes.values()), 0)


def _ensemble(x, table: dict, n_targets: int, aggregate: str, out_dtype):
    """(scores, hit), each [N, n_targets], of an _OnnxTreeEnsemble over the node table."""
    try:
        tree_depth(table["nodes_modes"], table["nodes_truenodeids"],
                   table["nodes_falsenodeids"], table["tree_roots"])  # fmt: skip
    except ValueError as e:
        raise OnnxImportError(f"malformed trees: {e}") from None
    if x.dtype not in (dtypes.float16, _F32, dtypes.float64, dtypes.int32, _I64):
        raise OnnxImportError(f"tree ensembles take float or int input, not {x.dtype.name}")
    x = op("Reshape", [x, i64([1, -1])]) if x.shape.rank == 1 else x
    attrs = {"T": x.dtype, "U": out_dtype, "n_targets": n_targets, "aggregate": aggregate,
             **table}  # fmt: skip
    return op("_OnnxTreeEnsemble", [x], attrs, name="TreeEnsemble")


def _with_sets(modes, membership_values) -> tuple[list, list]:
    """(member_nodes, member_values) from NaN-separated membership_values, one set per MEMBER
    node in node order."""
    member = [i for i, m in enumerate(modes) if m == TREE_MODES.index("BRANCH_MEMBER")]
    if not member:
        return [], []
    if membership_values is None:
        raise OnnxImportError("BRANCH_MEMBER nodes need membership_values")
    values = np.asarray(membership_values, np.float64).ravel()
    sets = np.split(values, np.flatnonzero(np.isnan(values)))
    sets = [s[1:] if k else s for k, s in enumerate(sets)]
    if sets and sets[-1].size == 0 and len(sets) == len(member) + 1:
        sets.pop()
    if len(sets) != len(member):
        raise OnnxImportError(
            f"membership_values holds {len(sets)} NaN-separated sets for {len(member)} "
            "BRANCH_MEMBER nodes"
        )
    nodes = [i for i, s in zip(member, sets) for _ in range(s.size)]
    return nodes, np.concatenate(sets).tolist() if sets else []


@register_onnx_import("TreeEnsemble", domain=_ML)
def tree_ensemble(n, x, *, nodes_featureids, nodes_modes, nodes_splits, nodes_truenodeids,
                  nodes_falsenodeids, nodes_trueleafs, nodes_falseleafs, leaf_targetids,
                  leaf_weights, tree_roots, aggregate_function=1, post_transform=0,
                  n_targets=None, nodes_hitrates=None, nodes_missing_value_tracks_true=None,
                  membership_values=None):  # fmt: skip
    modes = np.asarray(nodes_modes).ravel().astype(np.int64).tolist()
    size = _same_lengths("TreeEnsemble", nodes_featureids=nodes_featureids, nodes_modes=modes,
                         nodes_splits=np.ravel(nodes_splits), nodes_truenodeids=nodes_truenodeids,
                         nodes_falsenodeids=nodes_falsenodeids, nodes_trueleafs=nodes_trueleafs,
                         nodes_falseleafs=nodes_falseleafs,
                         nodes_missing_value_tracks_true=nodes_missing_value_tracks_true)  # fmt: skip
    leaves = _same_lengths("TreeEnsemble", leaf_targetids=leaf_targetids,
                           leaf_weights=np.ravel(leaf_weights))  # fmt: skip
    bad = sorted({m for m in modes if not 0 <= m < LEAF})
    if bad:
        raise OnnxImportError(f"unknown nodes_modes {bad} (0..6 are BRANCH_LEQ..BRANCH_MEMBER)")
    if not 0 <= aggregate_function < len(_AGGREGATE):
        raise OnnxImportError(f"unknown aggregate_function {aggregate_function}")
    if not 0 <= post_transform < len(_POST):
        raise OnnxImportError(f"unknown post_transform {post_transform}")

    def child(ids, is_leaf):
        return [size + i if leaf else i for i, leaf in zip(ids, is_leaf)]

    member_nodes, member_values = _with_sets(modes, membership_values)
    table = {
        "nodes_featureids": list(nodes_featureids) + [0] * leaves,
        "nodes_modes": modes + [LEAF] * leaves,
        "nodes_values": np.ravel(nodes_splits).astype(np.float64).tolist() + [0.0] * leaves,
        "nodes_truenodeids": child(nodes_truenodeids, nodes_trueleafs) + [0] * leaves,
        "nodes_falsenodeids": child(nodes_falsenodeids, nodes_falseleafs) + [0] * leaves,
        "nodes_missing_tracks_true": list(nodes_missing_value_tracks_true or [0] * size)
        + [0] * leaves,
        "tree_roots": list(tree_roots),
        "leaf_nodes": list(range(size, size + leaves)),
        "leaf_targets": list(leaf_targetids),
        "leaf_weights": np.ravel(leaf_weights).astype(np.float64).tolist(),
        "member_nodes": member_nodes,
        "member_values": member_values,
    }
    targets = n_targets if n_targets is not None else max(leaf_targetids, default=-1) + 1
    out = x.dtype if x.dtype.is_floating else dtypes.float32
    scores, _ = _ensemble(x, table, targets, _AGGREGATE[aggregate_function], out)
    return _post_transform(scores, _POST[post_transform])


def _classic_table(what: str, attrs: dict, entries: tuple) -> dict:
    """The node table of a TreeEnsembleRegressor / Classifier: nodes by (tree id, node id),
    children by node id within the tree, weights (tree, node, target, weight) on LEAF nodes."""
    values = attrs["nodes_values_as_tensor"]
    values = attrs["nodes_values"] if values is None else np.ravel(values).tolist()
    tree_ids, node_ids = attrs["nodes_treeids"], attrs["nodes_nodeids"]
    size = _same_lengths(what, nodes_treeids=tree_ids, nodes_nodeids=node_ids,
                         nodes_featureids=attrs["nodes_featureids"],
                         nodes_modes=attrs["nodes_modes"], nodes_values=values,
                         nodes_truenodeids=attrs["nodes_truenodeids"],
                         nodes_falsenodeids=attrs["nodes_falsenodeids"],
                         nodes_missing_value_tracks_true=attrs["nodes_missing_value_tracks_true"])  # fmt: skip
    if size == 0 or tree_ids is None or node_ids is None:
        raise OnnxImportError(f"{what} has no nodes (nodes_treeids, nodes_nodeids, ...)")
    modes = []
    for m in attrs["nodes_modes"]:
        if m not in TREE_MODES or m == "BRANCH_MEMBER":
            raise OnnxImportError(
                f"{what}: unknown nodes_modes entry {m!r} (expected one of "
                f"{', '.join(t for t in TREE_MODES if t != 'BRANCH_MEMBER')})"
            )
        modes.append(TREE_MODES.index(m))
    where = {}
    for i, key in enumerate(zip(tree_ids, node_ids)):
        if key in where:
            raise OnnxImportError(f"{what}: tree {key[0]} has node id {key[1]} twice")
        where[key] = i

    def find(tree, node, role):
        i = where.get((tree, node))
        if i is None:
            raise OnnxImportError(f"{what}: {role} names node {node} of tree {tree}, which "
                                  "the nodes_* attributes do not define")  # fmt: skip
        return i

    true_ids, false_ids = [], []
    is_child = [False] * size
    for i, (t, m) in enumerate(zip(tree_ids, modes)):
        if m == LEAF:
            true_ids.append(i)
            false_ids.append(i)
            continue
        a = find(t, attrs["nodes_truenodeids"][i], f"node {node_ids[i]}'s true branch")
        b = find(t, attrs["nodes_falsenodeids"][i], f"node {node_ids[i]}'s false branch")
        true_ids.append(a)
        false_ids.append(b)
        is_child[a] = is_child[b] = True
    roots = {}
    for i, t in enumerate(tree_ids):
        if not is_child[i]:
            if t in roots:
                raise OnnxImportError(f"{what}: tree {t} has two roots (nodes "
                                      f"{node_ids[roots[t]]} and {node_ids[i]})")  # fmt: skip
            roots[t] = i
    if set(roots) != set(tree_ids):
        raise OnnxImportError(f"{what}: a tree has no root (its nodes form a cycle)")
    e_trees, e_nodes, e_ids, e_weights = entries
    count = _same_lengths(what, treeids=e_trees, nodeids=e_nodes, ids=e_ids, weights=e_weights)
    leaf_nodes = []
    for k in range(count):
        i = find(e_trees[k], e_nodes[k], "a weight")
        if modes[i] != LEAF:
            raise OnnxImportError(
                f"{what}: a weight is on node {e_nodes[k]} of tree {e_trees[k]}, not a LEAF"
            )
        leaf_nodes.append(i)
    missing = attrs["nodes_missing_value_tracks_true"]
    return {
        "nodes_featureids": list(attrs["nodes_featureids"]),
        "nodes_modes": modes,
        "nodes_values": [float(v) for v in values],
        "nodes_truenodeids": true_ids,
        "nodes_falsenodeids": false_ids,
        "nodes_missing_tracks_true": list(missing) if missing else [0] * size,
        "tree_roots": [roots[t] for t in sorted(roots)],
        "leaf_nodes": leaf_nodes,
        "leaf_targets": list(e_ids or []),
        "leaf_weights": [float(w) for w in (e_weights if e_weights is not None else [])],
    }


def _tensor_or_list(tensor, values):
    return np.ravel(tensor).tolist() if tensor is not None else values


_CLASSIC = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
            "nodes_values_as_tensor", "nodes_truenodeids", "nodes_falsenodeids",
            "nodes_missing_value_tracks_true")  # fmt: skip


@register_onnx_import("TreeEnsembleRegressor", domain=_ML)
def tree_ensemble_regressor(n, x, *, aggregate_function="SUM", base_values=None,
                            base_values_as_tensor=None, n_targets=None, nodes_falsenodeids=None,
                            nodes_featureids=None, nodes_hitrates=None,
                            nodes_hitrates_as_tensor=None, nodes_missing_value_tracks_true=None,
                            nodes_modes=None, nodes_nodeids=None, nodes_treeids=None,
                            nodes_truenodeids=None, nodes_values=None,
                            nodes_values_as_tensor=None, post_transform="NONE", target_ids=None,
                            target_nodeids=None, target_treeids=None, target_weights=None,
                            target_weights_as_tensor=None):  # fmt: skip
    local = locals()
    what = "TreeEnsembleRegressor"
    if aggregate_function not in _AGGREGATE:
        raise OnnxImportError(f"{what}: unknown aggregate_function {aggregate_function!r}")
    weights = _tensor_or_list(target_weights_as_tensor, target_weights)
    table = _classic_table(what, {k: local[k] for k in _CLASSIC},
                           (target_treeids, target_nodeids, target_ids, weights))  # fmt: skip
    targets = n_targets if n_targets is not None else max(target_ids or [0]) + 1
    scores, hit = _ensemble(x, table, targets, aggregate_function, _F32)
    base = _tensor_or_list(base_values_as_tensor, base_values)
    if base and len(base) == targets:
        # onnxruntime adds a target's base value only where some leaf reached gave it a weight.
        with_base = op("AddV2", [scores, const(np.asarray(base, np.float32))])
        scores = op("SelectV2", [hit, with_base, scores])
    elif base:
        raise OnnxImportError(f"{what}: {len(base)} base_values for {targets} targets")
    return _post_transform(scores, post_transform)


@register_onnx_import("TreeEnsembleClassifier", domain=_ML)
def tree_ensemble_classifier(n, x, *, base_values=None, base_values_as_tensor=None,
                             class_ids=None, class_nodeids=None, class_treeids=None,
                             class_weights=None, class_weights_as_tensor=None,
                             classlabels_int64s=None, classlabels_strings=None,
                             nodes_falsenodeids=None, nodes_featureids=None, nodes_hitrates=None,
                             nodes_hitrates_as_tensor=None, nodes_missing_value_tracks_true=None,
                             nodes_modes=None, nodes_nodeids=None, nodes_treeids=None,
                             nodes_truenodeids=None, nodes_values=None,
                             nodes_values_as_tensor=None, post_transform="NONE"):  # fmt: skip
    local = locals()
    what = "TreeEnsembleClassifier"
    labels = _labels(classlabels_int64s, classlabels_strings, what)
    classes = int(labels.shape[0])
    weights = _tensor_or_list(class_weights_as_tensor, class_weights) or []
    table = _classic_table(what, {k: local[k] for k in _CLASSIC},
                           (class_treeids, class_nodeids, class_ids, weights))  # fmt: skip
    if post_transform not in _POST:
        raise OnnxImportError(f"{what}: unknown post_transform {post_transform!r}")
    s, hit = _ensemble(x, table, classes, "SUM", _F32)
    base = np.asarray(_tensor_or_list(base_values_as_tensor, base_values) or [], np.float32)
    if base.size not in (0, 1, classes) or (base.size == 1 and classes > 2):
        raise OnnxImportError(f"{what}: {base.size} base_values for {classes} classes")
    if classes > 2 or classes < 2:
        if base.size:
            s = op("AddV2", [s, const(base)])
            hit = op("LogicalOr", [hit, const(np.ones(classes, bool))])
        ranked = op("SelectV2", [hit, s, const(-np.inf, _F32)])
        label = _pick(labels, op("ArgMax", [ranked, const(1, dtypes.int32)]))
        return [label, _post_transform(s, post_transform)]
    return _binary_classifier(s, hit, base, labels, table, post_transform)


def _binary_classifier(s, hit, base, labels, table: dict, post_transform: str):
    """onnxruntime's two-class TreeEnsembleClassifier, as probed (onnxruntime 1.31 and 1.32).

    Per row: sums s0, s1 and whether some leaf reached weighs class 0 (h0) or class 1 (h1); a
    class no leaf weighed scores 0. "Binary" means every weight is for one class; then the label
    is class 1 where p > 0.5 (all weights ≥ 0) or p > 0 (some negative), p being s1 if h1, else
    s0. Otherwise the label is p > 0 as the index 0 or 1 itself (onnxruntime's int64 output is 0
    or 1 whatever classlabels_int64s say; string labels are looked up). Base values: two make
    s1 = b1 + s0 (class 1's sums dropped) and s0 = -s1 where h1, else s0 + b0 and s1 + b1; one
    adds b0 to s0. With fewer than two base values a row without h1 keeps one score v = s0,
    widened to [1 - v, v] (binary, weights ≥ 0), [-v, v] (binary with negative weights, or no
    base values), [σ(-v), σ(v)] (either, under LOGISTIC) or [v, 0] (one base value, not binary;
    untransformed); a row with two scores takes the post transform of both.
    """
    ids = set(table["leaf_targets"])
    weights = table["leaf_weights"]
    binary, positive = len(ids) == 1, all(w >= 0 for w in weights)
    weighed = {n for n, t in zip(table["leaf_nodes"], table["leaf_targets"]) if t == 1}
    leaves = {i for i, m in enumerate(table["nodes_modes"]) if m == LEAF}
    one_score = base.size != 2 and bool(leaves - weighed)
    if one_score and post_transform == "PROBIT":
        raise OnnxImportError(
            "TreeEnsembleClassifier: PROBIT of a two-class ensemble whose rows may keep one "
            "score is refused: onnxruntime leaves the second score column unwritten there"
        )
    s0, s1 = _column(s, 0), _column(s, 1)
    h0, h1 = _column(hit, 0), _column(hit, 1)
    zero = const(0.0, _F32)
    if base.size == 2:
        t1 = op("AddV2", [s0, const(base[1])])
        s1 = op("SelectV2", [h1, t1, op("AddV2", [s1, const(base[1])])])
        s0 = op("SelectV2", [h1, op("Neg", [t1]), op("AddV2", [s0, const(base[0])])])
    elif base.size == 1:
        s0 = op("AddV2", [s0, const(base[0])])
    v0, v1 = op("SelectV2", [h0, s0, zero]), op("SelectV2", [h1, s1, zero])
    p = op("SelectV2", [h1, s1, v0])
    up = op("Greater", [p, const(0.5 if binary and positive else 0.0, _F32)])
    if binary or labels.dtype == dtypes.string:
        label = _pick(labels, up)
    else:
        label = _cast(up, _I64)
    scores = _post_transform(_pair(v0, v1), post_transform)
    if not one_score:
        return [label, scores]
    if not binary and base.size == 1:
        one = _pair(v0, op("ZerosLike", [v0]))
    elif post_transform == "LOGISTIC":
        one = _pair(op("Sigmoid", [op("Neg", [v0])]), op("Sigmoid", [v0]))
    elif binary and positive:
        one = _pair(op("Sub", [const(1.0, _F32), v0]), v0)
    else:
        one = _pair(op("Neg", [v0]), v0)
    two = op("ExpandDims", [h1, const(-1, dtypes.int32)])
    return [label, op("SelectV2", [two, scores, one])]


# -- ZipMap ---------------------------------------------------------------------------------------


@register_onnx_import("ZipMap", domain=_ML)
def zip_map(n, x, *, classlabels_int64s=None, classlabels_strings=None):
    """A classifier's probabilities [N, C] with the class labels as keys: ONNX's value is a
    sequence of maps, one {label: probability} per row, which rill's graphs have no type for.
    The import gives the [N, C] float tensor itself, its columns in classlabels order; the ONNX
    backend (rill.graph.onnx.backend) hands out onnxruntime's list of dicts for a graph output
    that ZipMap makes. (skl2onnx ends every classifier with one unless told zipmap=False.)"""
    if (classlabels_int64s is None) == (classlabels_strings is None):
        raise OnnxImportError("ZipMap takes exactly one of classlabels_int64s and "
                              "classlabels_strings")  # fmt: skip
    count = len(classlabels_int64s if classlabels_int64s is not None else classlabels_strings)
    if x.dtype != _F32:
        raise OnnxImportError(f"ZipMap takes float32 scores, got {x.dtype.name}")
    if x.shape.rank is not None and (x.shape.rank != 2 or x.shape[1] not in (None, count)):
        raise OnnxImportError(
            f"ZipMap's input must be [N, {count}] (one column per class label), got {x.shape}"
        )
    return op("Identity", [x])
