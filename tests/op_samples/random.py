"""The random ops with a gradient: none can be checked by finite differences."""

from op_samples import NO_SAMPLE

NO_SAMPLE["RandomGamma"] = (
    "its samples change from run to run, so finite differences cannot follow them; "
    "tests/exec/test_tf_ops_more.py checks its gradient (RandomGammaGrad) against TensorFlow's "
    "and its mean against d E[x] / d alpha = 1"
)
_STATELESS = (
    "a rejection sampler: the sample is a discontinuous function of its parameters (a nudge "
    "can flip an accept), so finite differences cannot follow it; the stateless_gradients "
    "fixture (tests/exec/test_tf_graph_fixtures.py) checks rill's gradient against TensorFlow's"
)
for _op in ("StatelessRandomGammaV2", "StatelessRandomGammaV3",
            "StatelessParameterizedTruncatedNormal"):  # fmt: skip
    NO_SAMPLE[_op] = _STATELESS
