"""ONNX export rules for the internal ops the importer builds for ONNX ops TensorFlow has no
counterpart of (NonMaxSuppression, RoiAlign, GridSample, DeformConv, MaxRoiPool, and the string
ops RegexFullMatch, StringNormalizer, TfIdfVectorizer): each writes the ONNX op back."""

from __future__ import annotations
