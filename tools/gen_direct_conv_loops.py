"""Writes packages/exec/src/rill/exec/kernels/_direct_conv_loops.py: the direct convolution
loops of conv_direct (a few input channels and filter taps, so a GEMM of a short inner
dimension), written out so that each output pixel's or each filter tap's channels are named
scalars the compiler keeps in vector registers. Run it after changing the loop shapes:
`.venv/bin/python tools/gen_direct_conv_loops.py` (the module is left unformatted: each
assignment to a pass's channels is one line; tests/exec/test_conv_direct.py checks that the
module is what this writes)."""

from __future__ import annotations

import pathlib

OUT = (pathlib.Path(__file__).resolve().parents[1]
       / "packages/exec/src/rill/exec/kernels/_direct_conv_loops.py")  # fmt: skip

# Output channels per pass (the filter matrix's columns q0 .. q0 + Q), output pixels per pass of
# the forward loop, and filter taps per pass of the filter-gradient loop.
CHANNELS = (32, 16)
PIXELS = 4
TAPS = 5

HEAD = '''"""The compiled direct convolution loops behind rill.exec.kernels.conv_direct (import that
module).

Written by tools/gen_direct_conv_loops.py; do not edit by hand.

Arrays are flat and C-contiguous: xp the zero-padded NHWC input, w the [taps, o] filter matrix,
out / dy the NHWC output (gradient). offs[t] is filter tap t's offset in xp from its window's
first element; an output pixel's window starts at image * img + y * rs + x * cs. Indices are
unsigned, so the compiler drops negative-index handling. Each loop keeps Q channels of a few
pixels (or taps) in named scalars, which the compiler packs into vector registers (the loops are
compiled with the superword-level vectorizer on; conv_direct does that). Every sum runs in a
fixed order (taps in order; pixels in order within a block), so the bits do not depend on the
threads; multiply-adds may be fused.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
from numba.core.compiler_lock import global_compiler_lock

_jit = numba.njit(
    nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"contract"}
)
U = np.uint64
_lock = threading.Lock()
_ready: set = set()


def compiled(name: str, args: tuple):
    """The loop `name` compiled for `args`' types with the superword-level vectorizer on (or
    loaded from numba's cache, where an earlier process compiled it so), under numba's compiler
    lock so that no other compilation sees the setting; a numba without it compiles as it is."""
    fn = globals()[name]
    sig = tuple(numba.typeof(a) for a in args)
    if (name, sig) in _ready:
        return fn
    with _lock, global_compiler_lock:
        old = getattr(numba.config, "SLP_VECTORIZE", None)
        if old is not None:
            numba.config.SLP_VECTORIZE = 1
        try:
            fn.compile(sig)
        finally:
            if old is not None:
                numba.config.SLP_VECTORIZE = old
    _ready.add((name, sig))
    return fn
'''


def _assign(indent: str, targets: list[str], values: list[str]) -> str:
    """One statement assigning values to targets (a tuple assignment: the module stays short)."""
    return f"{indent}{', '.join(targets)} = {', '.join(values)}"


def _forward(q: int, p: int) -> list[str]:
    """forward_q{q}: out[pixels of images n0..n1, rows y0..y1, channels q0..q0+q]."""
    lines = [
        "",
        "",
        "@_jit",
        f"def forward_q{q}(xp, w, offs, out, zero, oh, ow, rs, cs, o, img, q0, n0, n1, y0, y1):"
        "  # pragma: no cover - compiled",
        f'    """Output channels q0 .. q0 + {q} of images [n0, n1), rows [y0, y1): {p} pixels '
        'a pass."""',
        "    taps = U(len(offs))",
        "    oo = U(o)",
        "    width = U(ow)",
        "    for b in range(U(n0), U(n1)):",
        "        for y in range(U(y0), U(y1)):",
        "            first = b * U(img) + y * U(rs)",
        "            dst = (b * U(oh) + y) * width * oo + U(q0)",
        "            x = U(0)",
        f"            while x + U({p}) <= width:",
    ]
    lines.append(_assign("                ", [f"s{k}" for k in range(p)],
                         [f"first + (x + U({k})) * U(cs)" for k in range(p)]))  # fmt: skip
    for k in range(p):
        lines.append(_assign("                ", [f"a{k}_{j}" for j in range(q)], ["zero"] * q))
    lines += [
        "                for t in range(taps):",
        "                    off = offs[t]",
        "                    row = t * oo + U(q0)",
    ]
    lines.append(_assign("                    ", [f"w{j}" for j in range(q)],
                         [f"w[row + U({j})]" for j in range(q)]))  # fmt: skip
    lines.append(_assign("                    ", [f"v{k}" for k in range(p)],
                         [f"xp[s{k} + off]" for k in range(p)]))  # fmt: skip
    for k in range(p):
        names = [f"a{k}_{j}" for j in range(q)]
        lines.append(_assign("                    ", names,
                             [f"a{k}_{j} + v{k} * w{j}" for j in range(q)]))  # fmt: skip
    for k in range(p):
        lines.append(f"                d = dst + (x + U({k})) * oo")
        lines.append(_assign("                ", [f"out[d + U({j})]" for j in range(q)],
                             [f"a{k}_{j}" for j in range(q)]))  # fmt: skip
    lines += [
        f"                x += U({p})",
        "            while x < width:",
        "                s = first + x * U(cs)",
    ]
    lines.append(_assign("                ", [f"a{j}" for j in range(q)], ["zero"] * q))
    lines += [
        "                for t in range(taps):",
        "                    v = xp[s + offs[t]]",
        "                    row = t * oo + U(q0)",
    ]
    lines.append(_assign("                    ", [f"a{j}" for j in range(q)],
                         [f"a{j} + v * w[row + U({j})]" for j in range(q)]))  # fmt: skip
    lines.append("                d = dst + x * oo")
    lines.append(_assign("                ", [f"out[d + U({j})]" for j in range(q)],
                         [f"a{j}" for j in range(q)]))  # fmt: skip
    lines.append("                x += U(1)")
    return lines


def _filter(q: int, taps: int) -> list[str]:
    """filter_q{q}_t{taps}: part[t0..t0+taps, q0..q0+q] summed over a block's pixels."""
    lines = [
        "",
        "",
        "@_jit",
        f"def filter_q{q}_t{taps}(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, "
        "n1, y0, y1):  # pragma: no cover - compiled",
        f'    """part[t0 .. t0 + {taps}, q0 .. q0 + {q}] = the sum over the pixels of images '
        '[n0, n1), rows\n    [y0, y1) of the tap\'s input times dy, pixel by pixel in order."""',
        "    oo = U(o)",
        "    width = U(ow)",
    ]
    lines.append(_assign("    ", [f"o{t}" for t in range(taps)],
                         [f"offs[U(t0 + {t})]" for t in range(taps)]))  # fmt: skip
    for t in range(taps):
        lines.append(_assign("    ", [f"a{t}_{j}" for j in range(q)], ["zero"] * q))
    lines += [
        "    for b in range(U(n0), U(n1)):",
        "        for y in range(U(y0), U(y1)):",
        "            first = b * U(img) + y * U(rs)",
        "            src = (b * U(oh) + y) * width * oo + U(q0)",
        "            for x in range(width):",
        "                s = first + x * U(cs)",
        "                g = src + x * oo",
    ]
    lines.append(_assign("                ", [f"g{j}" for j in range(q)],
                         [f"dy[g + U({j})]" for j in range(q)]))  # fmt: skip
    lines.append(_assign("                ", [f"v{t}" for t in range(taps)],
                         [f"xp[s + o{t}]" for t in range(taps)]))  # fmt: skip
    for t in range(taps):
        lines.append(_assign("                ", [f"a{t}_{j}" for j in range(q)],
                             [f"a{t}_{j} + v{t} * g{j}" for j in range(q)]))  # fmt: skip
    for t in range(taps):
        lines.append(f"    d = U(t0 + {t}) * oo + U(q0)")
        lines.append(_assign("    ", [f"part[d + U({j})]" for j in range(q)],
                             [f"a{t}_{j}" for j in range(q)]))  # fmt: skip
    return lines


def _filter_block(q: int) -> list[str]:
    return [
        "",
        "",
        "@_jit",
        f"def filter_block_q{q}(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, n0, n1, y0, y1):"
        "  # pragma: no cover - compiled",
        f'    """part[t, q] (every tap, every channel; o a multiple of {q}) = the sum over the '
        'block\'s\n    pixels of tap t\'s input times dy[..., q]."""',
        "    taps = len(offs)",
        f"    for q0 in range(0, o, {q}):",
        "        t0 = 0",
        f"        while t0 + {TAPS} <= taps:",
        f"            filter_q{q}_t{TAPS}(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, "
        "n0, n1, y0, y1)",
        f"            t0 += {TAPS}",
        "        while t0 < taps:",
        f"            filter_q{q}_t1(xp, dy, offs, part, zero, oh, ow, rs, cs, o, img, t0, q0, n0, "
        "n1, y0, y1)",
        "            t0 += 1",
    ]


def source() -> str:
    """The module's text."""
    lines = [HEAD.rstrip("\n"), "", "", "# fmt: off"]
    for q in CHANNELS:
        lines += _forward(q, PIXELS)
    for q in CHANNELS:
        lines += _filter(q, TAPS) + _filter(q, 1) + _filter_block(q)
    return "\n".join(lines + ["# fmt: on"]) + "\n"


def main() -> None:
    OUT.write_text(source())
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
