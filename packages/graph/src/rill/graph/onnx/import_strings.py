"""ONNX import rules: strings (StringNormalizer, StringSplit, StringConcat, RegexFullMatch,
TfIdfVectorizer, and onnxruntime's com.microsoft Tokenizer, which skl2onnx writes for
scikit-learn's TfidfVectorizer and CountVectorizer).

StringConcat and StringSplit compose TensorFlow's StringJoin and StringSplitV2 (which work on the
UTF-8 bytes, whose split points are character boundaries). StringNormalizer, RegexFullMatch and
TfIdfVectorizer import as rill's own ops of rill.graph.ops.onnx_string_ops: stopword removal
changes the length, RE2 matches UTF-8 characters where TensorFlow's kernel matches bytes, and
n-grams with skips have no TensorFlow op. RegexFullMatch takes the RE2 subset that
`re2_to_python` carries over to Python's re, and refuses the rest at import, naming the feature.
"""

from __future__ import annotations

import re

import numpy as np
import onnx.defs

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op
from rill.graph.ops.onnx_string_ops import Re2PatternError, re2_to_python

# Locales whose case mapping differs from Unicode's default one (dotted and dotless i, and
# Lithuanian's retained dot), which rill's case change uses.
_SPECIAL_CASE_LOCALES = ("tr", "az", "lt")


@register_onnx_import("StringConcat")
def string_concat(n, x, y):
    return op("StringJoin", [[x, y]])


@register_onnx_import("StringSplit")
def string_split(n, x, *, delimiter="", maxsplit=None):
    """Each string's pieces along a new last axis, padded with "" to the most pieces of any, and
    the count of pieces; an empty delimiter splits on runs of whitespace."""
    i64 = dtypes.int64
    shape = op("Shape", [x], {"out_type": i64})
    flat = op("Reshape", [x, const([-1], i64)])
    limit = -1 if maxsplit is None or maxsplit < 0 else int(maxsplit)
    sep = const(np.asarray(delimiter.encode("utf-8"), object), dtypes.string)
    indices, values, dense_shape = op("StringSplitV2", [flat, sep], {"maxsplit": limit})
    padded = op("SparseToDense", [indices, dense_shape, values, const(np.asarray(b"", object))])
    width = op("StridedSlice", [dense_shape, const([1], i64), const([2], i64), const([1], i64)])
    substrings = op("Reshape", [padded, op("ConcatV2", [[shape, width], const(0, dtypes.int32)])])
    rows = op("StridedSlice", [indices, const([0, 0], i64), const([0, 1], i64),
                               const([1, 1], i64)], {"end_mask": 1, "shrink_axis_mask": 2})  # fmt: skip
    num_rows = op("StridedSlice", [dense_shape, const([0], i64), const([1], i64),
                                   const([1], i64)], {"shrink_axis_mask": 1})  # fmt: skip
    ones = op("OnesLike", [rows])
    counts = op("Reshape", [op("UnsortedSegmentSum", [ones, rows, num_rows]), shape])
    if x.shape.rank is not None:
        substrings.set_shape(x.shape.concatenate([None]))
        counts.set_shape(x.shape)
    return [substrings, counts]


def _check_re2(pattern: str) -> None:
    """Refuses, at import, an RE2 pattern rill cannot match (naming the feature) or an invalid
    one."""
    try:
        re.compile(re2_to_python(pattern))
    except Re2PatternError as e:
        raise OnnxImportError(str(e)) from None
    except re.error as e:
        raise OnnxImportError(f"RE2 pattern {pattern!r} is not a valid pattern: {e}") from None


@register_onnx_import("RegexFullMatch")
def regex_full_match(n, x, *, pattern):
    _check_re2(pattern)
    return op("_OnnxRegexFullMatch", [x], {"pattern": pattern}, name="RegexFullMatch")


@register_onnx_import("StringNormalizer")
def string_normalizer(n, x, *, case_change_action="NONE", is_case_sensitive=0, stopwords=(),
                      locale=""):  # fmt: skip
    """Stopwords removed, then the case changed; case changes follow Unicode's default mapping,
    which is every locale's but Turkish, Azeri and Lithuanian ones (refused)."""
    if case_change_action not in ("NONE", "LOWER", "UPPER"):
        raise OnnxImportError(f"case_change_action must be NONE, LOWER or UPPER, got "
                              f"{case_change_action!r}")  # fmt: skip
    language = re.split("[-_.@]", locale.lower())[0]
    if language in _SPECIAL_CASE_LOCALES and (case_change_action != "NONE" or
                                              (stopwords and not is_case_sensitive)):  # fmt: skip
        raise OnnxImportError(
            f"locale {locale!r} changes case other than Unicode's default mapping, which is the "
            "one rill uses; rill imports StringNormalizer with other locales"
        )
    r = x.shape.rank
    if r is not None and not (r == 1 or (r == 2 and x.shape[0] in (None, 1))):
        raise OnnxImportError(f"StringNormalizer takes a [C] or [1, C] tensor, got {x.shape}")
    attrs = {"case_change_action": case_change_action,
             "is_case_sensitive": bool(is_case_sensitive), "stopwords": list(stopwords)}  # fmt: skip
    return op("_OnnxStringNormalizer", [x], attrs, name="StringNormalizer")


@register_onnx_import("TfIdfVectorizer")
def tfidf_vectorizer(n, x, *, mode, min_gram_length, max_gram_length, max_skip_count,
                     ngram_counts, ngram_indexes, pool_int64s=None, pool_strings=None,
                     weights=None):  # fmt: skip
    if mode not in ("TF", "IDF", "TFIDF"):
        raise OnnxImportError(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    if (pool_int64s is None) == (pool_strings is None):
        raise OnnxImportError("exactly one of pool_int64s and pool_strings must be given")
    if pool_strings is not None and x.dtype != dtypes.string:
        raise OnnxImportError(f"pool_strings needs a string input, got {x.dtype.name}")
    if pool_int64s is not None and x.dtype not in (dtypes.int32, dtypes.int64):
        raise OnnxImportError(f"pool_int64s needs an int32 or int64 input, got {x.dtype.name}")
    if not 1 <= min_gram_length <= max_gram_length or max_skip_count < 0:
        raise OnnxImportError(
            f"needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got "
            f"{min_gram_length}, {max_gram_length} and {max_skip_count}"
        )
    if x.shape.rank not in (None, 1, 2):
        raise OnnxImportError(f"TfIdfVectorizer takes a [C] or [N, C] tensor, got {x.shape}")
    attrs = {
        "T": x.dtype,
        "mode": mode,
        "min_gram_length": int(min_gram_length),
        "max_gram_length": int(max_gram_length),
        "max_skip_count": int(max_skip_count),
        "ngram_counts": [int(c) for c in ngram_counts],
        "ngram_indexes": [int(i) for i in ngram_indexes],
        "pool_int64s": [int(v) for v in pool_int64s or ()],
        "pool_strings": list(pool_strings or ()),
        "weights": [float(w) for w in weights or ()],
    }
    return op("_OnnxTfIdfVectorizer", [x], attrs, name="TfIdfVectorizer")


# -- onnxruntime's Tokenizer (com.microsoft), which skl2onnx writes for text vectorizers ---------

_MS = "com.microsoft"
if not onnx.defs.has("Tokenizer", _MS):
    _S = onnx.defs.OpSchema
    onnx.defs.register_schema(
        _S(
            "Tokenizer",
            _MS,
            1,
            "onnxruntime's contrib op Tokenizer",
            inputs=[_S.FormalParameter("X", "T")],
            outputs=[_S.FormalParameter("Y", "T")],
            type_constraints=[("T", ["tensor(string)"], "")],
            attributes=[
                _S.Attribute("mark", _S.AttrType.INT, required=True),
                _S.Attribute("mincharnum", _S.AttrType.INT, required=True),
                _S.Attribute("pad_value", _S.AttrType.STRING, required=True),
                _S.Attribute("separators", _S.AttrType.STRINGS, required=False),
                _S.Attribute("tokenexp", _S.AttrType.STRING, required=False),
            ],
        )
    )


@register_onnx_import("Tokenizer", _MS)
def tokenizer(n, x, *, mark, mincharnum, pad_value, separators=(), tokenexp=""):
    """Each string's tokens along a new last axis (rill's _OnnxTokenizer): the RE2 pattern
    tokenexp's matches, or the pieces between separators."""
    if bool(tokenexp) == bool(separators):
        raise OnnxImportError("Tokenizer takes exactly one of tokenexp and separators")
    for p in [tokenexp] if tokenexp else [s for s in separators if s]:
        _check_re2(p)
    if mincharnum < 1:
        raise OnnxImportError(f"Tokenizer's mincharnum must be at least 1, got {mincharnum}")
    attrs = {"mark": bool(mark), "mincharnum": int(mincharnum), "pad_value": pad_value,
             "separators": list(separators), "tokenexp": tokenexp}  # fmt: skip
    return op("_OnnxTokenizer", [x], attrs, name="Tokenizer")
