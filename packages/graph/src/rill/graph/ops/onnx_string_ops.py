"""rill's own ops for the ONNX string operators that no TensorFlow op or short composition
computes (names start with "_"; the ONNX importer builds them, users do not):
_OnnxStringNormalizer (stopword removal changes the length), _OnnxRegexFullMatch (RE2 semantics on
UTF-8 text, where TensorFlow's RegexFullMatch kernel matches bytes), _OnnxTfIdfVectorizer
(skip-gram counting) and _OnnxTokenizer (onnxruntime's com.microsoft Tokenizer, which
skl2onnx writes for scikit-learn's text vectorizers). Each computes what the ONNX operator of the same name specifies.

`re2_to_python` holds the RE2 subset rill matches: it rewrites an RE2 pattern into a Python `re`
pattern of the same meaning, and refuses what it cannot carry over.

>>> re2_to_python(r"\\w+$")
'[0-9A-Za-z_]+\\\\Z'
"""

from __future__ import annotations

import re

from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["Re2PatternError", "re2_to_python"]


def _normalizer_shape(op):
    s = op._inputs[0].shape
    if s.rank is None:
        return [TensorShape(None)]
    if s.rank == 1:
        return [TensorShape([None if op.attrs["stopwords"] else s[0]])]
    if s.rank == 2 and s[0] in (None, 1):
        return [TensorShape([1, None if op.attrs["stopwords"] else s[1]])]
    raise ValueError(f"StringNormalizer takes a [C] or [1, C] tensor, got {s}")


defop(
    "_OnnxStringNormalizer",
    inputs=["input: string"],
    outputs=["output: string"],
    attrs=[
        "case_change_action: {'NONE', 'LOWER', 'UPPER'} = 'NONE'",
        "is_case_sensitive: bool = false",
        "stopwords: list(string) = []",
    ],
    shape=_normalizer_shape,
    doc="ONNX's StringNormalizer: the strings of a [C] or [1, C] tensor less the stopwords "
    "(compared case-insensitively unless is_case_sensitive), then lower- or upper-cased (Unicode "
    "default case mapping); when every string is dropped, one empty string ([1] or [1, 1]).",
)

defop(
    "_OnnxRegexFullMatch",
    inputs=["input: string"],
    outputs=["output: bool"],
    attrs=["pattern: string"],
    shape=lambda op: [op._inputs[0].shape],
    doc="ONNX's RegexFullMatch: whether each UTF-8 string matches the RE2 pattern as a whole "
    "(the subset re2_to_python carries over to Python's re).",
)


def _tfidf_shape(op):
    s = op._inputs[0].shape
    width = max(op.attrs["ngram_indexes"], default=-1) + 1
    if s.rank is None:
        return [TensorShape(None)]
    if s.rank == 1:
        return [TensorShape([width])]
    if s.rank == 2:
        return [TensorShape([s[0], width])]
    raise ValueError(f"TfIdfVectorizer takes a [C] or [N, C] tensor, got {s}")


defop(
    "_OnnxTfIdfVectorizer",
    inputs=["input: T"],
    outputs=["output: float32"],
    attrs=[
        "T: {int32, int64, string}",
        "mode: {'TF', 'IDF', 'TFIDF'}",
        "min_gram_length: int >= 1",
        "max_gram_length: int >= 1",
        "max_skip_count: int >= 0",
        "ngram_counts: list(int)",
        "ngram_indexes: list(int)",
        "pool_int64s: list(int) = []",
        "pool_strings: list(string) = []",
        "weights: list(float) = []",
    ],
    shape=_tfidf_shape,
    doc="ONNX's TfIdfVectorizer: per row of a [C] or [N, C] input, the count of every pool "
    "n-gram (lengths min_gram_length..max_gram_length; items of an n-gram k + 1 apart for each "
    "skip k up to max_skip_count, a 1-gram counted once) at output[ngram_indexes[i]]; IDF "
    "clips counts to 1 and scales by weights, TFIDF scales by weights.",
)


def _tokenizer_shape(op):
    s = op._inputs[0].shape
    if s.rank is None:
        return [TensorShape(None)]
    if s.rank not in (1, 2):
        raise ValueError(f"Tokenizer takes a [C] or [N, C] tensor, got {s}")
    return [s.concatenate([None])]


defop(
    "_OnnxTokenizer",
    inputs=["input: string"],
    outputs=["output: string"],
    attrs=[
        "mark: bool = false",
        "mincharnum: int >= 0 = 1",
        "pad_value: string = '#'",
        "separators: list(string) = []",
        "tokenexp: string = ''",
    ],
    shape=_tokenizer_shape,
    doc="onnxruntime's com.microsoft Tokenizer: each string of a [C] or [N, C] tensor as its "
    "tokens along a new last axis, padded with pad_value to the most tokens of any string: the "
    "successive matches of the RE2 pattern tokenexp, or the pieces between matches of the "
    "separators (one empty separator: the characters); tokens of fewer than mincharnum "
    "characters dropped; with mark, 0x02 before and 0x03 after each string's tokens.",
)


# -- RE2 patterns as Python re patterns -----------------------------------------------------------


class Re2PatternError(ValueError):
    """An RE2 pattern that rill does not match: a feature Python's re lacks or reads otherwise."""


_WORD = "0-9A-Za-z_"
_SPACE = r"\t\n\f\r "  # RE2's \s; Python's adds \v
_IN_CLASS = {"d": "0-9", "s": _SPACE, "w": _WORD}
_PERL = {"d": "[0-9]", "D": "[^0-9]", "s": f"[{_SPACE}]", "S": f"[^{_SPACE}]",
         "w": f"[{_WORD}]", "W": f"[^{_WORD}]",
         "b": f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))",
         "B": f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"}  # fmt: skip
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": r"\x00-\x7f", "blank": r"\t ",
    "cntrl": r"\x00-\x1f\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
    "punct": r"!-/:-@\[-`{-~", "space": r"\t\n\v\f\r ", "upper": "A-Z", "word": _WORD,
    "xdigit": "0-9A-Fa-f",
}  # fmt: skip
_ESCAPE_KEPT = set("afnrtv")  # the same control characters in both
_QUANTIFIER = re.compile(r"\{(\d+)(,\d*)?\}")


def _refuse(pattern: str, what: str) -> Re2PatternError:
    return Re2PatternError(f"RE2 pattern {pattern!r}: {what}")


def _escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """The Python text for the escape at pattern[i] (a backslash), and the index after it."""
    if i + 1 >= len(pattern):
        raise _refuse(pattern, "ends in a lone backslash")
    c = pattern[i + 1]
    if not c.isalnum():
        return re.escape(c), i + 2
    if c in _ESCAPE_KEPT:
        return "\\" + c, i + 2
    if c == "x":
        if pattern.startswith("{", i + 2):
            end = pattern.find("}", i + 3)
            digits = pattern[i + 3 : end] if end > 0 else ""
            if not re.fullmatch("[0-9A-Fa-f]{1,6}", digits) or int(digits, 16) > 0x10FFFF:
                raise _refuse(pattern, f"bad escape \\x{{{digits}}}")
            return re.escape(chr(int(digits, 16))), end + 1
        return pattern[i : i + 4], i + 4
    if in_class and c in _IN_CLASS:
        return _IN_CLASS[c], i + 2
    if not in_class and c in _PERL:
        return _PERL[c], i + 2
    if not in_class and c == "A":
        return r"\A", i + 2
    if not in_class and c == "z":
        return r"\Z", i + 2
    if c.isdigit():
        raise _refuse(pattern, f"\\{c}: backreferences and octal escapes are not RE2 syntax "
                      "that rill matches")  # fmt: skip
    if c in "pP":
        raise _refuse(pattern, f"\\{c}: Unicode classes are not supported by rill")
    where = " inside a character class" if in_class else ""
    raise _refuse(pattern, f"\\{c}{where} is not supported by rill (Python's re reads it "
                  "otherwise or not at all)")  # fmt: skip


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    """The Python text for the class opening at pattern[i], and the index after its ']'."""
    out = ["["]
    i += 1
    if pattern.startswith("^", i):
        out.append("^")
        i += 1
    first = True
    while True:
        if i >= len(pattern):
            raise _refuse(pattern, "missing ]")
        c = pattern[i]
        if c == "]" and not first:
            out.append("]")
            return "".join(out), i + 1
        first = False
        if c == "\\" or pattern.startswith("[:", i):
            if c == "\\":
                text, i = _escape(pattern, i, in_class=True)
            else:
                end = pattern.find(":]", i + 2)
                name = pattern[i + 2 : end] if end > 0 else ""
                if name not in _POSIX:
                    raise _refuse(pattern, f"[:{name}:] is not a POSIX class rill supports")
                text, i = _POSIX[name], end + 2
            out.append(text)
            if len(text) > 2 and pattern.startswith("-", i) and not pattern.startswith("-]", i):
                out.append(r"\-")  # after a class, '-' is literal, not a range
                i += 1
            continue
        # Literal in both; escaped so Python does not read a nested set or set operation.
        out.append("\\" + c if c in "[&~|" else c)
        i += 1


def _group(pattern: str, i: int, multiline: bool) -> tuple[str, int, bool]:
    """For a '(' at pattern[i]: its Python text, the index after it, and whether `$` inside
    the group is multiline."""
    if not pattern.startswith("(?", i):
        return "(", i + 1, multiline
    rest = pattern[i + 2 :]
    if rest.startswith(":"):
        return "(?:", i + 3, multiline
    m = re.match(r"P?<([A-Za-z_][A-Za-z0-9_]*)>", rest)
    if m:
        return f"(?P<{m.group(1)}>", i + 2 + m.end(), multiline
    m = re.match(r"([A-Za-z]*)(?:-([A-Za-z]*))?([:)])", rest)
    if m is None:
        raise _refuse(pattern, f"the group {pattern[i : i + 4]!r}... (lookaround, atomic, "
                      "conditional or comment groups) is not RE2 syntax")  # fmt: skip
    on, off, close = m.group(1), m.group(2) or "", m.group(3)
    bad = set(on + off) - set("ims")
    if bad:
        raise _refuse(pattern, f"flag(s) {''.join(sorted(bad))} are not supported by rill "
                      "(RE2 has i, m, s and U; U, ungreedy, has no Python equivalent)")  # fmt: skip
    if "m" in on:
        multiline = True
    if "m" in off:
        multiline = False
    text = f"(?{on}{'-' + off if off else ''}{close}"
    if close == ")" and i != 0:
        raise _refuse(pattern, "flags that apply to the rest of a group are supported only at "
                      "the start of the pattern; use a scoped group such as (?i:...)")  # fmt: skip
    if close == ")" and off:
        raise _refuse(pattern, "flags at the start of the pattern cannot be turned off")
    return text, i + 2 + m.end(), multiline


def re2_to_python(pattern: str) -> str:
    """A Python `re` pattern that matches what the RE2 `pattern` matches.

    Perl classes (\\d \\s \\w \\b) and POSIX classes are ASCII as in RE2; `$` is the end of the
    text unless multiline; \\z and \\x{...} are rewritten. Python reads otherwise or lacks, so
    this refuses: backreferences and octal escapes, \\p / \\P Unicode classes, \\C, \\Q...\\E,
    the U flag, and flags that apply to the rest of a group other than at the pattern's start.
    It also refuses a group repeated without bound (*, +, {n,}) that itself holds a repetition
    or an alternation, such as (a+)+ or (a|ab)*: RE2 matches in time linear in the text, while
    Python's backtracking `re` can take time exponential in it on such a pattern, so a model's
    pattern could hang the step. (Bounded repetitions, nested ones included, cost at most a
    power of the text's length.)

    Raises:
        Re2PatternError: for a pattern that uses such a feature, naming it.

    >>> re2_to_python(r"a{,2}\\d")
    'a\\\\{,2}[0-9]'
    """
    out: list[str] = []
    stack: list[bool] = []
    # Per open group: whether it holds a repetition or an alternation; and that of the group
    # that closed last, while the next token may repeat it.
    varies: list[bool] = [False]
    closed_varies = after_group_varies = False
    multiline = False
    after_repeat = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        repeat = False
        many = False  # an unbounded repetition (*, +, {n,})
        fixed = False  # a repetition of an exact count
        closed = False
        if c == "\\":
            text, i = _escape(pattern, i, in_class=False)
        elif c == "[":
            text, i = _char_class(pattern, i)
        elif c == "(":
            stack.append(multiline)
            text, i, inner = _group(pattern, i, multiline)
            if text.endswith(")"):  # flags for the whole pattern
                stack.pop()
            else:
                varies.append(False)
            multiline = inner
        elif c == ")":
            if not stack:
                raise _refuse(pattern, "unmatched )")
            multiline = stack.pop()
            closed, closed_varies = True, varies.pop()
            varies[-1] = varies[-1] or closed_varies
            text, i = ")", i + 1
        elif c == "|":
            varies[-1] = True
            text, i = c, i + 1
        elif c == "$":
            text, i = ("$" if multiline else r"\Z"), i + 1
        elif c in "*+?":
            if c == "+" and after_repeat:
                raise _refuse(pattern, "possessive repetition (*+, ++, ?+) is not RE2 syntax")
            text, i, repeat = c, i + 1, not (c == "?" and after_repeat)  # a? after a*: lazy
            many = repeat and c != "?"
        elif c == "{":
            m = _QUANTIFIER.match(pattern, i)
            if m:
                text, i, repeat = m.group(0), m.end(), True
                least, most = int(m.group(1)), m.group(2)  # {n}, {n,} or {n,m}
                many = most == ","
                fixed = most is None or (not many and int(most[1:]) == least)
            else:
                text, i = r"\{", i + 1  # not a repetition in RE2: literal
        else:
            text, i = c, i + 1
        if many:
            if after_group_varies:
                raise _refuse(pattern, "a group that repeats and itself holds a repetition or an "
                              "alternation (such as (a+)+ or (a|ab)*) is refused: Python's "
                              "backtracking re can take time exponential in the text on it, "
                              "where RE2 is linear")  # fmt: skip
        if repeat and not fixed:
            varies[-1] = True
        after_group_varies = closed and closed_varies
        after_repeat = repeat
        out.append(text)
    return "".join(out)
