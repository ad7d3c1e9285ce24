"""The float32 constants of the LSTM cell's exp, shared by its compiled pass (`_lstm_loops`)
and its numpy path (`rnn_kernels.exp_parts32`); no numba here."""

from __future__ import annotations

import numpy as np

F32 = np.float32
# exp(v) = 2^k · e^r, r = v - k·ln 2 with ln 2 split in a part of 9 significant bits (k·LN2_HI
# is exact for |k| < 2^15) and the rest; e^r = 1 + m, m = r·P(r), P the Taylor series of
# (e^r - 1) / r through r^6 / 7! (its first left-out term, r^7 / 8!, is under 0.2 ulp of e^r
# for |r| <= ln 2 / 2).
LOG2E = F32(1.4426950408889634)
LN2_HI = F32(0.693359375)
LN2_LO = F32(-2.1219444005469057e-4)
HALF = F32(0.5)
ONE = F32(1.0)
TWO = F32(2.0)
ZERO = F32(0.0)
# v is clipped to [EXP_LO, EXP_HI]: 2^k stays a normal float32 (k in [-125, 126]), 2^k · (1 + m)
# finite, and a sigmoid 1 / (1 + exp(v)) at least 1.6e-38, a normal float32 (a subnormal would
# slow every product it enters about a hundredfold); a sigmoid or tanh there is 0, 1 or ±1 to
# float32 precision already.
EXP_LO = F32(-87.0)
EXP_HI = F32(87.0)
P6, P5, P4, P3, P2, P1 = (F32(1 / 5040), F32(1 / 720), F32(1 / 120), F32(1 / 24), F32(1 / 6),
                          F32(0.5))  # fmt: skip
