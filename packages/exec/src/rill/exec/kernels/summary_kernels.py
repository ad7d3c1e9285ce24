"""Kernels for rill.graph.ops.summary_ops: each returns a serialized Summary protocol buffer
(wire-compatible with TensorFlow's) as a string scalar.

Histograms use TensorFlow's default buckets (limits ±1e-12·1.1^k up to 1e20, then ±DBL_MAX,
and 0) with runs of empty buckets collapsed, as TensorFlow encodes them; images are PNG (zlib
through the standard library) and audio 16-bit PCM WAV (the `wave` module).
"""

from __future__ import annotations

import io
import struct
import wave
import zlib

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.graph_def import make_tensor_proto
from rill.graph.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata

_DBL_MAX = float(np.finfo(np.float64).max)


def _default_bucket_limits() -> list[float]:
    pos = []
    v = 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(_DBL_MAX)
    return [-x for x in reversed(pos)] + [0.0] + pos


_LIMITS = _default_bucket_limits()


def _text(v) -> str:
    x = np.asarray(v).reshape(-1)[0] if np.ndim(v) else np.asarray(v).item()
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def _scalar_string(s: bytes) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = s
    return out


def histogram_proto(values: np.ndarray, tag: str) -> HistogramProto:
    """TensorFlow's histogram of `values` (finite values only)."""
    v = np.asarray(values, np.float64).reshape(-1)
    if not np.isfinite(v).all():
        bad = "NaN" if np.isnan(v).any() else "Inf"
        raise InvalidArgumentError(f"{bad} in summary histogram for: {tag}")
    counts = np.zeros(len(_LIMITS))
    if v.size:
        idx = np.searchsorted(_LIMITS, v, side="right")
        np.add.at(counts, np.minimum(idx, len(_LIMITS) - 1), 1.0)
    h = HistogramProto(
        min=float(v.min()) if v.size else _DBL_MAX,
        max=float(v.max()) if v.size else -_DBL_MAX,
        num=float(v.size),
        # Sequential sums in element order, as TensorFlow's Histogram::Add accumulates them
        # (a pairwise or BLAS sum differs in the last bits).
        sum=float(np.add.accumulate(v)[-1]) if v.size else 0.0,
        sum_squares=float(np.add.accumulate(v * v)[-1]) if v.size else 0.0,
    )
    i = 0
    n = len(counts)
    while i < n:
        end, count = _LIMITS[i], counts[i]
        i += 1
        if count <= 0.0:
            while i < n and counts[i] <= 0.0:
                end, count = _LIMITS[i], counts[i]
                i += 1
        h.bucket_limit.append(end)
        h.bucket.append(count)
    return h


@register_kernel("ScalarSummary")
def scalar_summary(T):
    def compute(tags, values):
        t, v = np.asarray(tags), np.asarray(values)
        if t.shape != v.shape:
            raise InvalidArgumentError(
                f"tags and values are not the same shape: {list(t.shape)} != {list(v.shape)}"
            )
        s = Summary()
        for tag, val in zip(t.reshape(-1), v.reshape(-1)):
            s.value.add(tag=_text(tag), simple_value=float(val))
        return _scalar_string(s.SerializeToString())

    return compute


@register_kernel("HistogramSummary")
def histogram_summary(T):
    def compute(tag, values):
        name = _text(tag)
        s = Summary()
        s.value.add(tag=name).histo.CopyFrom(histogram_proto(values, name))
        return _scalar_string(s.SerializeToString())

    return compute


def encode_png(image: np.ndarray) -> bytes:
    """An 8-bit PNG of a [height, width, channels] uint8 array (1, 3 or 4 channels)."""
    h, w, c = image.shape
    color_type = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    rows = np.concatenate([np.zeros((h, 1), np.uint8), image.reshape(h, w * c)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def _to_uint8(images: np.ndarray, bad_color: np.ndarray) -> np.ndarray:
    """TensorFlow's float image scaling: values in [0, max] map to [0, 255]; with negative
    values, [-m, m] maps to [1, 255] around 128; non-finite pixels take `bad_color`. The
    arithmetic is TensorFlow's too: the bounds in float32, the scaling in the image's own type
    (so float32 rounding can put -m at 0), truncated to uint8."""
    work = images.dtype if images.dtype in (np.float16, np.float64) else np.dtype(np.float32)
    out = np.empty(images.shape, np.uint8)
    for i, img in enumerate(images.astype(work)):
        finite_px = np.isfinite(img).all(axis=-1)
        vals = img[finite_px].astype(np.float32)
        lo = np.float32(vals.min()) if vals.size else np.float32(np.inf)
        hi = np.float32(vals.max()) if vals.size else np.float32(-np.inf)
        if lo < 0:
            m = max(abs(lo), abs(hi))
            scale, offset = (0.0 if m < 1e-6 else np.float32(127.0) / m), 128.0
        else:
            scale, offset = (0.0 if hi < 1e-6 else np.float32(255.0) / hi), 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            scaled = img * work.type(scale) + work.type(offset)
        scaled = np.where(finite_px[..., None], scaled, 0)
        out[i] = np.clip(np.trunc(scaled.astype(np.float64)), 0, 255).astype(np.uint8)
        if not finite_px.all():
            out[i][~finite_px] = bad_color[: img.shape[-1]]
    return out


@register_kernel("ImageSummary")
def image_summary(max_images, T, node):
    bad = node.attrs.get("bad_color")
    bad_color = np.asarray([255, 0, 0, 255] if bad is None else bad, np.uint8).reshape(-1)

    def compute(tag, tensor):
        name = _text(tag)
        t = np.asarray(tensor)
        if t.ndim != 4 or t.shape[-1] not in (1, 3, 4):
            raise InvalidArgumentError(
                f"Tensor must be 4-D with last dim 1, 3, or 4, not {list(t.shape)}"
            )
        batch = t[: min(max_images, t.shape[0])]
        pixels = batch if t.dtype == np.uint8 else _to_uint8(batch, bad_color)
        s = Summary()
        for i, img in enumerate(pixels):
            # as TensorFlow: numbered whenever max_images > 1, even for a batch of one
            v = s.value.add(tag=f"{name}/image" if max_images == 1 else f"{name}/image/{i}")
            v.image.height, v.image.width, v.image.colorspace = img.shape
            v.image.encoded_image_string = encode_png(np.ascontiguousarray(img))
        return _scalar_string(s.SerializeToString())

    return compute


def encode_wav(clip: np.ndarray, rate: int) -> bytes:
    """16-bit PCM WAV of a [frames, channels] float clip in [-1, 1] (TensorFlow's scaling)."""
    # TensorFlow's: x * 32768 in float32, rounded half away from zero, clamped to int16
    scaled = np.asarray(clip, np.float32) * np.float32(32768.0)
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))
    pcm = np.clip(rounded, -32768, 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(clip.shape[1])
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


@register_kernel("AudioSummaryV2")
def audio_summary(max_outputs):
    def compute(tag, tensor, sample_rate):
        name = _text(tag)
        t = np.asarray(tensor, np.float32)
        if t.ndim == 2:
            t = t[:, :, None]
        if t.ndim != 3:
            raise InvalidArgumentError(f"Tensor must be 2-D or 3-D, got shape {list(t.shape)}")
        rate = float(sample_rate)
        if rate <= 0:
            raise InvalidArgumentError(f"sample_rate must be > 0, got {rate}")
        clips = t[: min(max_outputs, t.shape[0])]
        s = Summary()
        for i, clip in enumerate(clips):
            v = s.value.add(tag=f"{name}/audio" if max_outputs == 1 else f"{name}/audio/{i}")
            v.audio.sample_rate = rate
            v.audio.num_channels = clip.shape[1]
            v.audio.length_frames = clip.shape[0]
            v.audio.content_type = "audio/wav"
            v.audio.encoded_audio_string = encode_wav(clip, int(rate))
        return _scalar_string(s.SerializeToString())

    return compute


@register_kernel("TensorSummaryV2")
def tensor_summary(T):
    def compute(tag, tensor, serialized_summary_metadata):
        s = Summary()
        v = s.value.add(tag=_text(tag))
        meta = np.asarray(serialized_summary_metadata).item()
        v.metadata.CopyFrom(SummaryMetadata.FromString(meta if isinstance(meta, bytes) else b""))
        v.tensor.CopyFrom(make_tensor_proto(np.asarray(tensor)))
        return _scalar_string(s.SerializeToString())

    return compute


@register_kernel("MergeSummary")
def merge_summary(N):
    def compute(*inputs):
        out = Summary()
        seen: set[str] = set()
        for serialized in inputs:
            for blob in np.asarray(serialized, dtype=object).reshape(-1):
                try:
                    s = Summary.FromString(blob)
                except Exception as e:  # noqa: BLE001 - protobuf's DecodeError
                    msg = f"Could not parse one of the summary inputs: {e}"
                    raise InvalidArgumentError(msg) from None
                for v in s.value:
                    if v.tag in seen:
                        raise InvalidArgumentError(f"Duplicate tag {v.tag} found in summary inputs")
                    seen.add(v.tag)
                    out.value.add().CopyFrom(v)
        return _scalar_string(out.SerializeToString())

    return compute
