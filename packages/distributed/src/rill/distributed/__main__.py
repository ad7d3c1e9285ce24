"""`python -m rill.distributed`: the same as the `rill-server` console script."""

import sys

from rill.distributed.cli import main

sys.exit(main())
