"""rill's own ops for the ai.onnx.ml operators that no TensorFlow op or short composition computes
(names start with "_"; the ONNX importer builds them, users do not): _OnnxTreeEnsemble (the tree
walk and the per-target aggregation of every tree ensemble: TreeEnsemble, TreeEnsembleRegressor,
TreeEnsembleClassifier) and _OnnxLabelEncoder (a static map of int64, float or string keys to
values, for LabelEncoder and CategoryMapper).

The import rules bring every tree form to one node table: node i compares feature
`nodes_featureids[i]` of a row by `nodes_modes[i]` (TREE_MODES) with `nodes_values[i]` (or, for
MEMBER, with the set of `member_values` whose `member_nodes` entry is i) and goes on to
`nodes_truenodeids[i]` or `nodes_falsenodeids[i]`; a LEAF node adds the `leaf_weights` whose
`leaf_nodes` entry is it to their `leaf_targets`. `tree_depth` checks such a table.

>>> tree_depth([0, 7, 7], [1, 1, 2], [2, 1, 2], [0])
1
"""

from __future__ import annotations

import numpy as np

from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["TREE_MODES", "tree_depth"]

# ONNX's TreeEnsemble (ai.onnx.ml opset 5) numbers the modes 0..6; rill adds LEAF.
TREE_MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ",
              "BRANCH_MEMBER", "LEAF")  # fmt: skip
LEAF = TREE_MODES.index("LEAF")


def tree_depth(modes, true_ids, false_ids, roots) -> int:
    """The most comparisons any path from a root to a leaf takes.

    Raises:
        ValueError: for a child or root index out of range, or a cycle.
    """
    modes = np.asarray(modes, np.int64)
    size = len(modes)
    kids = np.stack([np.asarray(true_ids, np.int64), np.asarray(false_ids, np.int64)], axis=1)
    frontier = np.asarray(roots, np.int64)
    if ((frontier < 0) | (frontier >= size)).any():
        raise ValueError(f"a tree root is not a node index in [0, {size})")
    branch = modes != LEAF
    bad = branch & ((kids < 0) | (kids >= size)).any(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"node {i} has a child {kids[i].tolist()} outside [0, {size})")
    depth = 0
    while True:
        frontier = frontier[branch[frontier]]
        if frontier.size == 0:
            return depth
        depth += 1
        if depth > size:
            raise ValueError("the trees have a cycle: a path longer than the node count")
        frontier = np.unique(kids[frontier].ravel())


def _tree_shape(op):
    s = op._inputs[0].shape
    if s.rank not in (None, 2):
        raise ValueError(f"a tree ensemble takes a [N, F] input, got {s}")
    n = s[0] if s.rank == 2 else None
    out = TensorShape([n, op.attrs["n_targets"]])
    return [out, out]


defop(
    "_OnnxTreeEnsemble",
    inputs=["x: T"],
    outputs=["scores: U", "hit: bool"],
    attrs=[
        "T: {float16, float32, float64, int32, int64}",
        "U: {float16, float32, float64}",
        "n_targets: int >= 0",
        "aggregate: {'SUM', 'AVERAGE', 'MIN', 'MAX'} = 'SUM'",
        "nodes_featureids: list(int)",
        "nodes_modes: list(int)",
        "nodes_values: list(float)",
        "nodes_truenodeids: list(int)",
        "nodes_falsenodeids: list(int)",
        "nodes_missing_tracks_true: list(int)",
        "tree_roots: list(int)",
        "leaf_nodes: list(int)",
        "leaf_targets: list(int)",
        "leaf_weights: list(float)",
        "member_nodes: list(int) = []",
        "member_values: list(float) = []",
    ],
    shape=_tree_shape,
    doc="The trees of an ai.onnx.ml tree ensemble, every row walked from every root to a leaf "
    "(a branch goes true where its comparison holds, or where the feature is NaN and "
    "nodes_missing_tracks_true is set); per row and target, the leaf weights aggregated over "
    "the trees (SUM, AVERAGE: the sum over the tree count, MIN, MAX), 0 where no leaf reached "
    "gives the target a weight, and `hit`: whether one did.",
)


def _label_encoder_shape(op):
    return [op._inputs[0].shape]


defop(
    "_OnnxLabelEncoder",
    inputs=["x: T"],
    outputs=["y: U"],
    attrs=[
        "T: {int16, int32, int64, float32, float64, string}",
        "U: {int16, int32, int64, float32, float64, string}",
        "keys_int64s: list(int) = []",
        "keys_floats: list(float) = []",
        "keys_strings: list(string) = []",
        "values_int64s: list(int) = []",
        "values_floats: list(float) = []",
        "values_strings: list(string) = []",
        "default_int64: int = -1",
        "default_float: float = 0",
        "default_string: string = '_Unused'",
    ],
    shape=_label_encoder_shape,
    doc="ai.onnx.ml's LabelEncoder: each element of x replaced by the value at its key's place "
    "(keys of x's kind, values of y's), or by the default of y's kind where no key matches; "
    "float keys compare in x's dtype, and a NaN key matches NaN.",
)


def _svm_probability_shape(op):
    s = op._inputs[0].shape
    n = s[0] if s.rank == 2 else None
    return [TensorShape([n, op.attrs["classes"]])]


defop(
    "_OnnxSvmProbability",
    inputs=["pair_scores: float"],
    outputs=["probabilities: float"],
    attrs=["classes: int >= 2", "prob_a: list(float)", "prob_b: list(float)"],
    shape=_svm_probability_shape,
    doc="ai.onnx.ml SVMClassifier's class probabilities from its one-vs-one decision values "
    "[N, classes·(classes-1)/2] (pairs (0,1), (0,2), ..., (1,2), ...): Platt's sigmoid "
    "1 - σ(a·s + b) per pair, clipped to [1e-7, 1 - 1e-7], coupled into class probabilities "
    "by Wu, Lin and Weng's iterative method as libsvm and onnxruntime run it (float32, at most "
    "100 iterations, stopping once every |Qp_i - pQp| < 0.005 / classes).",
)
