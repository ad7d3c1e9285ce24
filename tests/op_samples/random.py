"""The random ops with a gradient: none can be checked by finite differences."""

from op_samples import NO_SAMPLE

NO_SAMPLE["RandomGamma"] = (
    "its samples change from run to run, so finite differences cannot follow them; "
    "tests/exec/test_tf_ops_more.py checks its gradient (RandomGammaGrad) against TensorFlow's "
    "and its mean against d E[x] / d alpha = 1"
)
