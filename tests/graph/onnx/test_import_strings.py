"""import_onnx of the string ops (StringConcat, StringSplit, StringNormalizer, RegexFullMatch,
TfIdfVectorizer) beyond onnx's node suite: non-ASCII UTF-8, empty strings, maxsplit, skips,
2-D and string inputs, against onnx's ReferenceEvaluator or hand-computed results; bad input
gives an error that names the node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

from rill.exec import Session
from rill.graph.errors import InvalidArgumentError
from rill.graph.onnx import import_onnx
from rill.graph.onnx.backend import prepare
from rill.graph.onnx.importer import OnnxImportError
from rill.graph.ops.onnx_string_ops import Re2PatternError, re2_to_python


def vi(name, elem=TP.STRING, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def model(node, inputs, outputs, opset=20):
    g = oh.make_graph([node], "t", inputs, outputs)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])


def strings(v) -> np.ndarray:
    a = np.empty(np.shape(v), dtype=object)
    a[...] = v
    return a


def run(m, *feeds):
    return prepare(m).run(list(feeds))


def check_reference(m, *feeds):
    """rill's outputs equal onnx's ReferenceEvaluator's, in shape, dtype kind and value."""
    got = run(m, *feeds)
    names = [i.name for i in m.graph.input]
    want = ReferenceEvaluator(m).run(None, dict(zip(names, feeds)))
    for a, b in zip(got, want):
        assert a.shape == b.shape, (a.shape, b.shape)
        if b.dtype.kind in "OUS":
            assert a.dtype == object
            assert a.tolist() == np.asarray(b, object).tolist()
        else:
            assert a.dtype == b.dtype, (a.dtype, b.dtype)
            np.testing.assert_allclose(a, b)
    return got


# -- StringConcat -------------------------------------------------------------------------------


def test_concat_utf8_empty_strings_and_broadcasting():
    m = model(oh.make_node("StringConcat", ["x", "y"], ["z"]), [vi("x"), vi("y")], [vi("z")])
    x = strings([["Grüße, ", ""], ["", "日本"]])
    y = strings(["wörld", "語"])
    (z,) = check_reference(m, x, y)
    assert z.tolist() == [["Grüße, wörld", "語"], ["wörld", "日本語"]]


# -- StringSplit --------------------------------------------------------------------------------


def split_model(**attrs):
    node = oh.make_node("StringSplit", ["x"], ["y", "n"], **attrs)
    return model(node, [vi("x")], [vi("y"), vi("n", TP.INT64)])


def test_split_on_a_multibyte_delimiter_with_maxsplit():
    x = strings([["a→b→c", ""], ["→", "ü→→ß"]])
    y, n = check_reference(split_model(delimiter="→", maxsplit=1), x)
    assert y.tolist() == [[["a", "b→c"], ["", ""]], [["", ""], ["ü", "→ß"]]]
    assert n.tolist() == [[2, 1], [2, 2]]


def test_split_on_whitespace_keeps_the_rest_after_maxsplit():
    x = strings(["  a  b  c  ", "", "   ", "x\ty\nz"])
    y, n = check_reference(split_model(maxsplit=1), x)
    assert y.tolist() == [["a", "b  c  "], ["", ""], ["", ""], ["x", "y\nz"]]
    assert n.tolist() == [2, 0, 0, 2]


def test_split_of_a_scalar_and_of_empty_strings_with_a_delimiter():
    y, n = run(split_model(delimiter=","), strings("é,,e"))  # the reference fails on 0-d input
    assert y.tolist() == ["é", "", "e"] and n.shape == () and n == 3
    y, n = check_reference(split_model(delimiter=","), strings(["", ","]))
    assert y.tolist() == [["", ""], ["", ""]] and n.tolist() == [1, 2]


# -- StringNormalizer ---------------------------------------------------------------------------


def normalizer_model(**attrs):
    node = oh.make_node("StringNormalizer", ["x"], ["y"], name="norm", **attrs)
    return model(node, [vi("x")], [vi("y")], opset=10)


def test_normalizer_case_insensitive_stopwords_in_utf8():
    # Hand-computed: onnx's ReferenceEvaluator also strips accents, which the spec does not ask.
    m = normalizer_model(stopwords=["ÉTÉ", "monday"], case_change_action="UPPER")
    (y,) = run(m, strings(["été", "Été", "Monday", "straße", "", "mondays"]))
    assert y.tolist() == ["STRASSE", "", "MONDAYS"]


def test_normalizer_case_sensitive_keeps_other_cases_and_lowers():
    m = normalizer_model(stopwords=["Monday"], is_case_sensitive=1, case_change_action="LOWER")
    (y,) = check_reference(m, strings([["Monday", "MONDAY", "Tuesday"]]))
    assert y.tolist() == [["monday", "tuesday"]]


def test_normalizer_dropping_everything_gives_one_empty_string():
    m = normalizer_model(stopwords=["a", "b"])
    assert run(m, strings([["A", "b"]]))[0].tolist() == [[""]]
    assert run(m, strings(["a"]))[0].tolist() == [""]


def test_normalizer_refuses_more_than_one_row():
    g, inputs, outputs = import_onnx(normalizer_model(stopwords=["a"]))
    with Session(graph=g) as s, pytest.raises(InvalidArgumentError,
                                              match=r"(?s)\[C\] or \[1, C\].*norm"):  # fmt: skip
        s.run(outputs["y"], {inputs["x"]: strings([["a"], ["b"]])})
    m = normalizer_model()
    m.graph.input[0].CopyFrom(vi("x", shape=[2, 3]))
    with pytest.raises(OnnxImportError, match=r"'norm'.*\[C\] or \[1, C\]"):
        import_onnx(m)


def test_normalizer_refuses_a_turkish_locale_for_case_changes():
    m = normalizer_model(case_change_action="LOWER", locale="tr_TR.UTF-8")
    with pytest.raises(OnnxImportError, match=r"'norm'.*locale 'tr_TR.UTF-8'"):
        import_onnx(m)
    run(normalizer_model(case_change_action="LOWER", locale="de_DE"), strings(["A"]))


# -- RegexFullMatch -----------------------------------------------------------------------------


def regex_model(pattern):
    node = oh.make_node("RegexFullMatch", ["x"], ["y"], name="rx", pattern=pattern)
    return model(node, [vi("x")], [vi("y", TP.BOOL)])


@pytest.mark.parametrize(
    "pattern, texts, want",
    [
        # RE2 matches UTF-8 characters: '.' is one character, not one byte.
        (r"^.$", ["é", "日", "ab", ""], [True, True, False, False]),
        # \w, \d, \s and \b are ASCII in RE2.
        (r"\w+", ["abc_9", "café", ""], [True, False, False]),
        (r"\d+", ["123", "١٢٣"], [True, False]),
        (r"a\sb", ["a b", "a\vb", "a\u00a0b"], [True, False, False]),
        (r".*\bé", ["x é", "xé"], [False, True]),  # é is not a word character
        # $ is the end of the text, not before a final newline.
        (r"abc$\n?", ["abc", "abc\n"], [True, False]),
        (r"(?m)abc$\n?", ["abc\n"], [True]),
        (r"(?i)ÉTÉ", ["été", "ete"], [True, False]),
        (r"[[:upper:]]+[\w-.]*", ["AB-x.y", "ab"], [True, False]),
        (r"\x{263A}+", ["☺☺"], [True]),
        (r"a{,2}", ["a{,2}", "aa"], [True, False]),
    ],
)
def test_regex_follows_re2(pattern, texts, want):
    (y,) = run(regex_model(pattern), strings(texts))
    assert y.tolist() == want


def test_regex_agrees_with_the_reference_on_common_patterns():
    x = strings([["user@gmail.com", "a.b@yahoo.com"], ["x@hotmail.com", "@gmail.com"]])
    check_reference(regex_model(r"[\w.\-]{1,25}@(yahoo|gmail)\.com"), x)
    check_reference(regex_model(r"(?i)[A-Z]+\d*"), strings(["abc12", "ABC", "12"]))


@pytest.mark.parametrize(
    "pattern, what",
    [
        (r"(a)\1", "backreferences"),
        (r"a(?=b)", "lookaround"),
        (r"\pL+", "Unicode classes"),
        (r"(?U)a+", "flag"),
        (r"a(?i)b", "start of the pattern"),
        (r"a*+", "possessive"),
        (r"[[:nope:]]", "POSIX class"),
        (r"(a", "not a valid pattern"),
    ],
)
def test_regex_refuses_what_python_reads_otherwise(pattern, what):
    with pytest.raises(OnnxImportError, match=rf"'rx'.*RegexFullMatch.*{what}"):
        import_onnx(regex_model(pattern))


@pytest.mark.parametrize(
    "pattern", [r"(a+)+$", r"(a|ab)*c", r"(\w+\s?)*$", r"(?:x+y?){2,}", r"((ab)+c)+"]
)
def test_regex_refuses_an_unbounded_repetition_of_a_varying_group(pattern):
    # Python's backtracking re takes time exponential in the text on these (RE2: linear), so a
    # model's pattern could hang the step: refused at import, naming the node.
    with pytest.raises(OnnxImportError, match=r"'rx'.*RegexFullMatch.*exponential"):
        import_onnx(regex_model(pattern))


@pytest.mark.parametrize(
    "pattern, texts, want",
    [(r"(ab)+", ["abab", "aba"], [True, False]), (r"(a|b){3}", ["aba", "ab"], [True, False]),
     (r"(a+){2}", ["aaa", "a"], [True, False]), (r"(a{2})+", ["aaaa", "aaa"], [True, False])],
)  # fmt: skip
def test_regex_keeps_repetitions_that_cannot_blow_up(pattern, texts, want):
    (y,) = run(regex_model(pattern), strings(texts))
    assert y.tolist() == want


def test_re2_translation_is_refused_with_the_pattern_named():
    with pytest.raises(Re2PatternError, match=r"'\\\\Qa\\\\E'"):
        re2_to_python(r"\Qa\E")


def test_regex_refuses_text_that_is_not_utf8():
    g, inputs, outputs = import_onnx(regex_model("a"))
    with Session(graph=g) as s, pytest.raises(InvalidArgumentError, match=r"(?s)not UTF-8.*rx"):
        s.run(outputs["y"], {inputs["x"]: strings([b"\xff"])})


# -- TfIdfVectorizer ----------------------------------------------------------------------------


def tfidf_model(elem, shape=None, **attrs):
    node = oh.make_node("TfIdfVectorizer", ["x"], ["y"], name="tfidf", **attrs)
    return model(node, [vi("x", elem, shape)], [vi("y", TP.FLOAT)], opset=9)


STRING_POOL = dict(
    pool_strings=["ä", "b", "c", "ä", "b", "b", "ä", "c", "ä", "b"],
    ngram_counts=[0, 3, 7],
    ngram_indexes=[0, 1, 2, 3, 4, 5],
)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
def test_tfidf_string_pool_with_skips_2d(mode):
    m = tfidf_model(TP.STRING, min_gram_length=1, max_gram_length=3, max_skip_count=2,
                    mode=mode, weights=[0.5, 1, 2, 3, 4, 5], **STRING_POOL)  # fmt: skip
    x = strings([["ä", "b", "ä", "b", "c", "ä"], ["c", "c", "ä", "", "b", "b"]])
    (y,) = check_reference(m, x)
    assert y.shape == (2, 6)


def test_tfidf_hand_counted_skip_grams():
    # (1, 2) in [1, 2, 1, 9, 2]: at positions (0, 1) with skip 0 and (2, 4) with skip 1; (0, 4)
    # would need skip 3, over max_skip_count. The 1-gram 7 is below min_gram_length.
    m = tfidf_model(TP.INT64, min_gram_length=2, max_gram_length=2, max_skip_count=2, mode="TF",
                    pool_int64s=[7, 1, 2], ngram_counts=[0, 1], ngram_indexes=[1, 0])  # fmt: skip
    (y,) = check_reference(m, np.array([1, 2, 1, 9, 2], np.int64))
    assert y.tolist() == [2.0, 0.0]


def test_tfidf_int_pool_1d_and_min_gram_length():
    m = tfidf_model(TP.INT32, min_gram_length=2, max_gram_length=3, max_skip_count=1, mode="TF",
                    pool_int64s=[4, 5, 4, 5, 5, 4, 4, 5, 4], ngram_counts=[0, 2, 6],
                    ngram_indexes=[3, 2, 1, 0, 4])  # fmt: skip
    check_reference(m, np.array([4, 5, 4, 4, 5, 5, 4], np.int32))
    check_reference(m, np.zeros((3, 0), np.int32))


def test_tfidf_bad_inputs_name_the_node():
    kw = dict(min_gram_length=1, max_gram_length=1, max_skip_count=0, mode="TF",
              ngram_counts=[0], ngram_indexes=[0])  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"'tfidf'.*pool_int64s needs an int32 or int64"):
        import_onnx(tfidf_model(TP.STRING, pool_int64s=[1], **kw))
    with pytest.raises(OnnxImportError, match=r"'tfidf'.*exactly one of pool_int64s"):
        import_onnx(tfidf_model(TP.INT64, pool_int64s=[1], pool_strings=["a"], **kw))
    with pytest.raises(OnnxImportError, match=r"'tfidf'.*\[C\] or \[N, C\]"):
        import_onnx(tfidf_model(TP.INT64, [1, 2, 3], pool_int64s=[1], **kw))
    g, inputs, outputs = import_onnx(tfidf_model(TP.INT64, pool_int64s=[1], **kw))
    with Session(graph=g) as s, pytest.raises(InvalidArgumentError, match=r"(?s)\[N, C\].*tfidf"):
        s.run(outputs["y"], {inputs["x"]: np.zeros((1, 1, 1), np.int64)})
    bad = dict(kw, ngram_counts=[0, 1], ngram_indexes=[0, 1], max_gram_length=2)
    g, inputs, outputs = import_onnx(tfidf_model(TP.INT64, pool_int64s=[1, 2], **bad))
    with Session(graph=g) as s, pytest.raises(InvalidArgumentError,
                                              match=r"(?s)whole n-grams.*tfidf"):  # fmt: skip
        s.run(outputs["y"], {inputs["x"]: np.zeros(3, np.int64)})


# -- Tokenizer (onnxruntime's com.microsoft contrib op) -----------------------------------------

_TEXTS = [["Hello World", "I love  computer science !"], ["a b", "x"]]


def _tokenizer(shape, **attrs):
    attrs = {"mark": 0, "mincharnum": 1, "pad_value": "#", **attrs}
    node = oh.make_node("Tokenizer", ["x"], ["y"], domain="com.microsoft", **attrs)
    g = oh.make_graph([node], "t", [vi("x", shape=shape)], [vi("y")])
    ops = [oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)]
    return oh.make_model(g, opset_imports=ops, ir_version=8)


@pytest.mark.parametrize("case", ["tokenexp", "sklearn", "separators", "chars", "mark",
                                  "mincharnum", "1d"])  # fmt: skip
def test_tokenizer_matches_onnxruntime(case):
    ort = pytest.importorskip("onnxruntime")
    x = strings(_TEXTS)
    attrs = {
        "tokenexp": {"tokenexp": "[a-zA-Z0-9_]+"},
        "sklearn": {"tokenexp": r"\b\w\w+\b"},  # scikit-learn's default token pattern
        "separators": {"separators": [" ", "!"]},
        "chars": {"separators": [""]},
        "mark": {"tokenexp": "[a-z]+", "mark": 1},
        "mincharnum": {"separators": [" "], "mincharnum": 3},
        "1d": {"tokenexp": "[A-Za-z]+"},
    }[case]
    if case == "1d":
        x = strings(_TEXTS[0])
    m = _tokenizer(list(x.shape), **attrs)
    (got,) = run(m, x)
    (want,) = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    assert got.shape == want.shape, (got.shape, want.shape)
    assert [v.decode() if isinstance(v, bytes) else v for v in got.reshape(-1)] == list(
        want.reshape(-1)
    )


def test_tokenizer_takes_one_of_tokenexp_and_separators():
    with pytest.raises(OnnxImportError, match="exactly one of tokenexp and separators"):
        run(_tokenizer([1], tokenexp="a", separators=[" "]), strings(["a"]))
