"""The converter (extra `rill-mobile[convert]`): rill graphs → TFLite flatbuffers, quantized or not.

>>> from rill.mobile.convert import TFLiteConverter, convert, TFLITE_RULES
>>> "Conv2D" in TFLITE_RULES.ops()
True
"""

from rill.mobile.convert import array, elementwise, math, nn  # their import registers the rules
from rill.mobile.convert.converter import (
    OpsSet,
    Optimize,
    TFLiteConverter,
    convert,
    load_graph,
)
from rill.mobile.convert.registry import TFLITE_RULES, ConverterError, register_tflite
from rill.mobile.convert.report import LayerError, QuantizationReport, quantization_report

__all__ = [
    "TFLITE_RULES",
    "ConverterError",
    "LayerError",
    "Optimize",
    "OpsSet",
    "QuantizationReport",
    "TFLiteConverter",
    "convert",
    "load_graph",
    "quantization_report",
    "register_tflite",
]
