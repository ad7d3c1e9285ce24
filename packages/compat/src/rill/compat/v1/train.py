"""`tf.train` of TensorFlow 1.x (rill.train: optimizers, Saver and checkpoints, hooks and
monitored sessions, queue-based input, Coordinator, Supervisor; rill.distributed: Server,
ClusterSpec and their protos)."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.distributed import ClusterSpec, Server
from rill.distributed.proto.tensorflow_server_pb2 import ServerDef
from rill.exec.proto.cluster_pb2 import ClusterDef, JobDef
from rill.exec.proto.example_pb2 import (
    BytesList,
    Example,
    Feature,
    Features,
    FloatList,
    Int64List,
)
from rill.graph.graph_io import write_graph
from rill.train import (
    AdadeltaOptimizer,
    AdagradOptimizer,
    AdamOptimizer,
    CheckpointSaverHook,
    CheckpointSaverListener,
    ChiefSessionCreator,
    Coordinator,
    FeedFnHook,
    FtrlOptimizer,
    GradientDescentOptimizer,
    LoggingTensorHook,
    MomentumOptimizer,
    MonitoredSession,
    NanLossDuringTrainingError,
    NanTensorHook,
    Optimizer,
    QueueRunner,
    RMSPropOptimizer,
    Saver,
    SaverDef,
    Scaffold,
    SecondOrStepTimer,
    SessionCreator,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    SingularMonitoredSession,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
    Supervisor,
    WorkerSessionCreator,
    add_queue_runner,
    assert_global_step,
    batch,
    batch_join,
    checkpoint_exists,
    cosine_decay,
    create_global_step,
    exponential_decay,
    generate_checkpoint_state_proto,
    get_checkpoint_mtimes,
    get_checkpoint_state,
    get_global_step,
    get_or_create_global_step,
    global_step,
    input_producer,
    inverse_time_decay,
    latest_checkpoint,
    limit_epochs,
    list_variables,
    load_variable,
    natural_exp_decay,
    piecewise_constant,
    polynomial_decay,
    range_input_producer,
    remove_checkpoint,
    shuffle_batch,
    shuffle_batch_join,
    slice_input_producer,
    start_queue_runners,
    string_input_producer,
    update_checkpoint_state,
)
from rill.train.checkpoint_utils import (
    NewCheckpointReader,
    init_from_checkpoint,
    load_checkpoint,
)

# Large models and synchronous replicas (paper §4.2, §4.4).
from rill.train.device_setter import (
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    replica_device_setter,
)
from rill.train.learning_rate_decay import piecewise_constant as piecewise_constant_decay
from rill.train.meta_graph import export_meta_graph, import_meta_graph
from rill.train.moving_averages import ExponentialMovingAverage
from rill.train.session_manager import SessionManager

# tf.train.SummaryWriter is the old name of tf.summary.FileWriter.
from rill.train.summary import FileWriter as SummaryWriter
from rill.train.sync_replicas_optimizer import SyncReplicasOptimizer


def MonitoredTrainingSession(*args, finish_job: bool = False, **kwargs):  # noqa: N802 - TF's name
    """tf.train.MonitoredTrainingSession (rill.train's) with TensorFlow's behaviour at the end:
    the cluster keeps serving after the chief's session closes (a TF1 program may evaluate on it
    in a new Session), so rill's job-finished broadcast is off unless finish_job=True."""
    from rill.train import MonitoredTrainingSession as _mts

    return _mts(*args, finish_job=finish_job, **kwargs)
