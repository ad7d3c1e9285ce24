"""Training libraries for rill: optimizers, layers, Saver, training loops."""

# -- initializers, variable scopes, layers and losses (init_ops, variable_scope, layers, losses) --
from rill.train import layers, losses, metrics, summary  # tf.layers, .losses, .metrics, .summary
from rill.train.init_ops import (
    Constant,
    GlorotNormal,
    GlorotUniform,
    Identity,
    Initializer,
    Ones,
    RandomNormal,
    RandomUniform,
    TruncatedNormal,
    UniformUnitScaling,
    VarianceScaling,
    Zeros,
    constant_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    he_normal,
    he_uniform,
    identity_initializer,
    lecun_normal,
    lecun_uniform,
    ones_initializer,
    orthogonal_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    uniform_unit_scaling_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)
from rill.train.variable_scope import (
    AUTO_REUSE,
    GraphKeys,
    VariableScope,
    add_to_collection,
    get_collection,
    get_local_variable,
    get_regularization_loss,
    get_regularization_losses,
    get_variable,
    get_variable_scope,
    no_regularizer,
    variable_scope,
)

# isort: split
# -- end of initializers, variable scopes, layers and losses --

# -- optimizers, learning-rate schedules, gradient clipping, the global step ---------------------
from rill.train.adadelta import AdadeltaOptimizer
from rill.train.adagrad import AdagradOptimizer
from rill.train.adam import AdamOptimizer
from rill.train.clip_ops import clip_by_global_norm, clip_by_norm, clip_by_value, global_norm
from rill.train.ftrl import FtrlOptimizer
from rill.train.gradient_descent import GradientDescentOptimizer
from rill.train.learning_rate_decay import (
    cosine_decay,
    exponential_decay,
    inverse_time_decay,
    natural_exp_decay,
    piecewise_constant,
    polynomial_decay,
)
from rill.train.momentum import MomentumOptimizer
from rill.train.moving_averages import ExponentialMovingAverage
from rill.train.optimizer import Optimizer
from rill.train.rmsprop import RMSPropOptimizer
from rill.train.session_manager import SessionManager
from rill.train.sync_replicas_optimizer import SyncReplicasOptimizer
from rill.train.training_util import (
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)

# isort: split
# -- placement, partitioned variables and sampled losses (device_setter, ...) -------------------
from rill.train.device_setter import (
    STANDARD_PS_OPS,
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    local_device_setter,
    replica_device_setter,
)
from rill.train.partitioned_variables import (
    PartitionedVariable,
    PartitionInfo,
    SaveSliceInfo,
    fixed_size_partitioner,
    min_max_variable_partitioner,
    variable_axis_size_partitioner,
)
from rill.train.placement_report import DeviceUsage, placement_report, placement_summary
from rill.train.sampled_losses import nce_loss, sampled_softmax_loss

# -- end of placement block ---------------------------------------------------------------------

# -- end of optimizers block -------------------------------------------------------------------

# isort: split
# -- checkpoints and training loops (saver, checkpoint_management, monitored_session, hooks, -----
# -- progress) ----------------------------------------------------------------------------------
from rill.train.checkpoint_management import (
    CheckpointState,
    best_checkpoint,
    checkpoint_exists,
    generate_checkpoint_state_proto,
    get_checkpoint_mtimes,
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_variable,
    remove_checkpoint,
    update_checkpoint_state,
)
from rill.train.checkpoint_utils import (
    NewCheckpointReader,
    init_from_checkpoint,
    load_checkpoint,
)
from rill.train.hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    FeedFnHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepCounterHook,
    StopAtStepHook,
)
from rill.train.meta_graph import export_meta_graph, import_meta_graph
from rill.train.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SessionCreator,
    SingularMonitoredSession,
    StepContext,
    WorkerSessionCreator,
)
from rill.train.progress import ProgressHook
from rill.train.saver import Saver, SaverDef
from rill.train.template import make_template

# -- end of checkpoints and training loops block ------------------------------------------------

# isort: split
# -- recurrent networks (rnn_cell, rnn) ---------------------------------------------------------
from rill.train import rnn, rnn_cell  # the tf.nn.rnn_cell namespace and TF1's rnn module
from rill.train.rnn import (
    bidirectional_dynamic_rnn,
    dynamic_rnn,
    static_bidirectional_rnn,
    static_rnn,
)
from rill.train.rnn_cell import (
    BasicLSTMCell,
    BasicRNNCell,
    DropoutWrapper,
    GRUCell,
    LSTMCell,
    LSTMStateTuple,
    MultiRNNCell,
    RNNCell,
)

# -- end of recurrent networks block ------------------------------------------------------------

# isort: split
# -- queue-based input, coordinator, supervisor -------------------------------------------------
from rill.train.coordinator import Coordinator
from rill.train.input import (
    batch,
    batch_join,
    input_producer,
    limit_epochs,
    range_input_producer,
    shuffle_batch,
    shuffle_batch_join,
    slice_input_producer,
    string_input_producer,
)
from rill.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from rill.train.summary_hooks import SummarySaverHook
from rill.train.supervisor import Supervisor

# -- end of queue-based input block -------------------------------------------------------------
