"""`tf.flags` / `tf.app.flags` of TensorFlow 1.x: absl-py's flags, which TensorFlow's are.

A flag given a value of the wrong type fails at parse time with absl's IllegalFlagValueError,
naming the flag and the value.
"""

# ruff: noqa: F401, F403 - a namespace of re-exports

from absl.flags import *
from absl.flags import FLAGS
