"""Samples for rill.graph.ops.logging_ops (Print and CheckNumerics pass their gradient)."""

import rill.graph as rg

from . import rand, sample

sample("Print", [rand(2, 3)], lambda x: rg.print_op(x, [x], message="", first_n=0))
sample("CheckNumerics", [rand(3)], lambda x: rg.check_numerics(x * 2.0, "x"))
