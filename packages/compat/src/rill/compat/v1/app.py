"""`tf.app` of TensorFlow 1.x: `run` parses the command line's flags (absl-py) and calls
`main(argv)`, exiting with its return value; `flags` is `tf.flags`."""

from __future__ import annotations

import sys

from absl import app as _absl_app
from absl import flags as _absl_flags

from rill.compat.v1 import flags

__all__ = ["run", "flags"]


def _parse_flags_tolerate_undef(argv):
    """TensorFlow's rule: flags the program did not define stay in argv for main."""
    return _absl_flags.FLAGS(argv, known_only=True)


def run(main=None, argv=None):
    """Runs `main(argv)` (default: the `__main__` module's main) after parsing flags, then
    exits with its result (`tf.app.run`)."""
    main = main or sys.modules["__main__"].main
    _absl_app.run(main=main, argv=argv, flags_parser=_parse_flags_tolerate_undef)
