"""ONNX import rules: strings (StringNormalizer, StringSplit, StringConcat, RegexFullMatch,
TfIdfVectorizer)."""

from __future__ import annotations
