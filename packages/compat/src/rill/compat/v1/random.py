"""`tf.random` of TensorFlow 1.x (rill.graph.random)."""

# ruff: noqa: F401, F403, E402 - a namespace of re-exports

# issue 18's samplers under TensorFlow 1's tf.random names
from rill.compat.v1._ops18 import random_gamma as gamma
from rill.compat.v1._ops18 import random_poisson as poisson
from rill.compat.v1._ops18 import (
    stateless_normal,
    stateless_truncated_normal,
    stateless_uniform,
)
from rill.graph.ops.candidate_sampling_ops import (
    fixed_unigram_candidate_sampler,
    learned_unigram_candidate_sampler,
    log_uniform_candidate_sampler,
    uniform_candidate_sampler,
)
from rill.graph.ops.stateless_random_ops import (
    stateless_binomial,
    stateless_categorical,
    stateless_gamma,
    stateless_multinomial,
    stateless_parameterized_truncated_normal,
    stateless_poisson,
)
from rill.graph.random import *
from rill.graph.random import categorical, get_seed, multinomial, set_random_seed
