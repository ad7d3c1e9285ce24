"""Writes packages/exec/src/rill/exec/kernels/_depthwise_loops.py: the inner loops of the NCHW
depthwise convolution (_conv_loops.depthwise_nchw) for 3×3 and 5×5 filters, every tap written
out, so that a whole window's sum stays in registers (the generic loops load and store the
partial sums once per tap). Run it after changing the template: `.venv/bin/python
tools/gen_depthwise_loops.py`, then `ruff format` the module (tests/exec/
test_conv_nchw_depthwise.py checks the loops against the generic ones, bit for bit).
"""

from __future__ import annotations

import pathlib

OUT = (pathlib.Path(__file__).resolve().parents[1]
       / "packages/exec/src/rill/exec/kernels/_depthwise_loops.py")  # fmt: skip
SIZES = (3, 5)

HEAD = '''"""The written-out depthwise tap loops behind rill.exec.kernels._conv_loops (import that module).

Written by tools/gen_depthwise_loops.py; do not edit by hand.

Each window's sum is 0 + x·w(tap 0) + x·w(tap 1) + ... over the taps in row-major order, as in
the generic loops and the numpy kernel (no fused multiply-add, no reassociation), so the results
are bit-identical to theirs. Offsets are unsigned, so the compiler drops negative-index handling
and vectorizes the loops; every input is read from one array, so one overlap check suffices.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
'''


def _plane(k: int) -> str:
    """taps_KxK: acc[o] for o < span from the padded phases of one channel (flat)."""
    lines = [
        "",
        "",
        "@_jit",
        f"def taps_{k}x{k}(ph, w, ci, m, sh, sw, dh, dw, wq, plane, span, acc):  # pragma: no cover",
        f'    """acc[o] = the sum of the {k * k} taps at position o of the phase planes ph (flat,',
        "    plane elements each, rows wq long) for channel ci, multiplier m of w [kh, kw, c, m]."
        '"""',
        "    zero = acc.dtype.type(0)",
    ]
    for i in range(k):
        for j in range(k):
            t = i * k + j
            lines.append(
                f"    s{t} = np.uint64((({i} * dh) % sh * sw + ({j} * dw) % sw) * plane"
                f" + ({i} * dh) // sh * wq + ({j} * dw) // sw)"
            )
            lines.append(f"    w{t} = w[{i}, {j}, ci, m]")
    lines.append("    for o in range(np.uint64(span)):")
    lines.append("        v = zero + ph[s0 + o] * w0")
    for t in range(1, k * k):
        lines.append(f"        v = v + ph[s{t} + o] * w{t}")
    lines.append("        acc[o] = v")
    return "\n".join(lines)


def main() -> None:
    parts = [HEAD.rstrip("\n")]
    for k in SIZES:
        parts.append(_plane(k))
    OUT.write_text("\n".join(parts) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
