"""CPU kernels for rill.graph.ops.onnx_string_ops: ONNX's StringNormalizer, RegexFullMatch and
TfIdfVectorizer, as the ONNX specification describes them. String elements arrive as bytes or
str; the text is UTF-8, and string outputs are UTF-8 bytes as rill's other string kernels make."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.onnx_string_ops import Re2PatternError, re2_to_python
from rill.graph.shapes import TensorShape


def _text(op: str, v) -> str:
    if isinstance(v, str):
        return v
    try:
        return bytes(v).decode("utf-8")
    except (UnicodeDecodeError, TypeError):
        raise InvalidArgumentError(f"{op}: input holds {v!r}, which is not UTF-8 text") from None


def _strings(values: list[str], shape) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = [s.encode("utf-8") for s in values]
    return out.reshape(shape)


# -- StringNormalizer ---------------------------------------------------------------------------


@register_kernel("_OnnxStringNormalizer")
def onnx_string_normalizer(case_change_action, is_case_sensitive, stopwords):
    def fold(s: str) -> str:
        return s if is_case_sensitive else s.casefold()

    drop = {fold(w) for w in stopwords}
    change = {"LOWER": str.lower, "UPPER": str.upper}.get(case_change_action, lambda s: s)

    def compute(x):
        if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
            raise InvalidArgumentError(
                f"StringNormalizer: input must be [C] or [1, C], got {TensorShape(x.shape)}"
            )
        texts = (_text("StringNormalizer", v) for v in x.reshape(-1))
        kept = [change(s) for s in texts if fold(s) not in drop] or [""]
        return _strings(kept, (len(kept),) if x.ndim == 1 else (1, len(kept)))

    return compute


# -- RegexFullMatch -----------------------------------------------------------------------------


@register_kernel("_OnnxRegexFullMatch")
def onnx_regex_full_match(pattern):
    try:
        rx = re.compile(re2_to_python(pattern))
    except (Re2PatternError, re.error) as e:
        raise InvalidArgumentError(f"RegexFullMatch: {e}") from None

    def compute(x):
        flat = [rx.fullmatch(_text("RegexFullMatch", v)) is not None for v in x.reshape(-1)]
        return np.asarray(flat, dtype=bool).reshape(x.shape)

    return compute


# -- TfIdfVectorizer ----------------------------------------------------------------------------


@register_kernel("_OnnxTfIdfVectorizer", expensive=True)
def onnx_tfidf_vectorizer(T, mode, min_gram_length, max_gram_length, max_skip_count,
                          ngram_counts, ngram_indexes, pool_int64s, pool_strings, weights):  # fmt: skip
    pool = [s.encode("utf-8") for s in pool_strings] if pool_strings else list(pool_int64s)
    starts = [*ngram_counts, len(pool)]
    # n-gram (a tuple of items) → the indexes i (into ngram_indexes and weights) that hold it.
    where: dict[tuple, list[int]] = defaultdict(list)
    count = 0
    for k in range(len(ngram_counts)):
        lo, hi, n = starts[k], starts[k + 1], k + 1
        if not 0 <= lo <= hi <= len(pool) or (hi - lo) % n:
            raise InvalidArgumentError(
                f"TfIdfVectorizer: ngram_counts {ngram_counts} do not split a pool of "
                f"{len(pool)} items into whole n-grams"
            )
        for p in range(lo, hi, n):
            if min_gram_length <= n <= max_gram_length:
                where[tuple(pool[p : p + n])].append(count)
            count += 1
    if count != len(ngram_indexes) or (weights and len(weights) != count):
        raise InvalidArgumentError(
            f"TfIdfVectorizer: the pool holds {count} n-grams, but ngram_indexes has "
            f"{len(ngram_indexes)} entries and weights {len(weights)}"
        )
    if any(i < 0 for i in ngram_indexes):
        raise InvalidArgumentError(f"TfIdfVectorizer: negative entry in ngram_indexes "
                                   f"{ngram_indexes}")  # fmt: skip
    width = max(ngram_indexes, default=-1) + 1
    scale = np.asarray(weights if weights and mode != "TF" else [1.0] * count, np.float32)
    target = np.asarray(ngram_indexes, np.int64)

    def row_counts(row: list) -> np.ndarray:
        counts = np.zeros(count, np.float32)
        size = len(row)
        for n in range(min_gram_length, max_gram_length + 1):
            # A 1-gram is the same for every skip: counted once.
            for skip in range(max_skip_count + 1 if n > 1 else 1):
                step = skip + 1
                for start in range(size - (n - 1) * step):
                    for i in where.get(tuple(row[start : start + (n - 1) * step + 1 : step]), ()):
                        counts[i] += 1
        if mode == "IDF":
            counts = np.minimum(counts, 1)
        out = np.zeros(width, np.float32)
        np.add.at(out, target, counts * scale)
        return out

    def compute(x):
        if x.ndim not in (1, 2):
            raise InvalidArgumentError(
                f"TfIdfVectorizer: input must be [C] or [N, C], got {TensorShape(x.shape)}"
            )
        rows = list(x) if x.ndim == 2 else [x]
        if pool_strings:
            items = [[_text("TfIdfVectorizer", v).encode("utf-8") for v in r] for r in rows]
        else:
            items = [[int(v) for v in r] for r in rows]
        out = np.zeros((len(items), width), np.float32)
        for r, row in enumerate(items):
            out[r] = row_counts(row)
        return out[0] if x.ndim == 1 else out

    return compute


# -- Tokenizer (com.microsoft) ------------------------------------------------------------------


@register_kernel("_OnnxTokenizer")
def onnx_tokenizer(mark, mincharnum, pad_value, separators, tokenexp):
    def compiled(pattern: str):
        try:
            return re.compile(re2_to_python(pattern))
        except (Re2PatternError, re.error) as e:
            raise InvalidArgumentError(f"Tokenizer: {e}") from None

    if tokenexp:
        rx = compiled(tokenexp)

        def split(s: str) -> list[str]:
            # Successive leftmost matches, each search starting after the previous token (one
            # character on where nothing matched): finditer's order; empty matches are no tokens.
            return [m.group(0) for m in rx.finditer(s) if m.group(0)]

    elif list(separators) == [""]:

        def split(s: str) -> list[str]:
            return list(s)

    elif separators:
        rx = compiled("|".join(f"(?:{sep})" for sep in separators))

        def split(s: str) -> list[str]:
            return [t for t in rx.split(s) if t]

    else:
        raise InvalidArgumentError("Tokenizer needs tokenexp or separators")

    def compute(x):
        if x.ndim not in (1, 2):
            raise InvalidArgumentError(
                f"Tokenizer: input must be [C] or [N, C], got {TensorShape(x.shape)}"
            )
        rows = []
        for v in x.reshape(-1):
            tokens = [t for t in split(_text("Tokenizer", v)) if len(t) >= mincharnum]
            if mark and tokens:
                tokens = ["\x02", *tokens, "\x03"]
            rows.append(tokens)
        width = max((len(r) for r in rows), default=0)
        flat = [t for r in rows for t in r + [pad_value] * (width - len(r))]
        return _strings(flat, (*x.shape, width))

    return compute
