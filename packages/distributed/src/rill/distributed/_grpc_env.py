"""grpc settings that must be in place before grpc's core starts in this process.

grpc's EventEngine client and listener (experiments, on by default in grpcio 1.8x) hand every
read and write to threads of their own: on loopback that is about four more context switches
per RPC on each side, and CPU (tools/bench dist_null_step: 19 to 14 switches per step on the
master's task, 4.3 to 1.1 on the client). rill turns them off in every process that imports
rill.distributed, unless GRPC_EXPERIMENTS is set already. grpc reads the variable when its core
starts (the process's first channel or server), so a process that used grpc before importing
rill keeps grpc's defaults.
"""

import os

EXPERIMENTS = "-event_engine_client,-event_engine_listener"
SET_HERE = "GRPC_EXPERIMENTS" not in os.environ  # a peer program started from here drops it
os.environ.setdefault("GRPC_EXPERIMENTS", EXPERIMENTS)
