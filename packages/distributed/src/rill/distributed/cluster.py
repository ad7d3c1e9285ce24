"""Cluster configuration: `ClusterSpec` and the one `TF_CONFIG` parser.

A cluster is a set of jobs ("ps", "worker", ...), each a set of tasks keyed by index, each task
reachable at a "host:port" address. `ClusterSpec` follows TensorFlow's rules: jobs are listed
sorted by name, a dict of lists gives dense task indices and a dict of {index: address} a sparse
job. `parse_tf_config` reads the `TF_CONFIG` environment variable in every form launchers write
(Kubeflow's TFJob operator, SageMaker, Vertex AI, hand-written) and checks it strictly: a mistake
raises `ClusterConfigError` quoting the offending part, never a half-configured task.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping

from rill.exec.proto.cluster_pb2 import ClusterDef
from rill.graph.errors import InvalidArgumentError

__all__ = [
    "ClusterConfigError",
    "ClusterSpec",
    "TFConfig",
    "parse_tf_config",
    "task_device_name",
]

# Task types TensorFlow's multi_worker_util allows, plus "master", the TF1 Estimator / SageMaker
# spelling of the chief.
ROLES = ("chief", "master", "worker", "ps", "evaluator")
_TOP_KEYS = (
    "cluster",
    "sparseCluster",
    "task",
    "rpc_layer",
    "session_master",
    "environment",
    "job",
)
# "trial" and "cloud" are written by Cloud ML Engine / Vertex AI hyperparameter tuning.
_TASK_KEYS = ("type", "index", "trial", "cloud")
_PORT_RE = re.compile(r"^[0-9]{1,5}$")


class ClusterConfigError(InvalidArgumentError, ValueError):
    """A cluster or TF_CONFIG mistake. An InvalidArgumentError, and a ValueError like TF's."""


def _quote(value, limit: int = 200) -> str:
    try:
        text = json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def task_device_name(job: str, index: int, device: str | None = None) -> str:
    """The full name of a task, or of one of its devices.

    >>> task_device_name("worker", 1)
    '/job:worker/replica:0/task:1'
    >>> task_device_name("ps", 0, "CPU:0")
    '/job:ps/replica:0/task:0/device:CPU:0'
    """
    name = f"/job:{job}/replica:0/task:{index}"
    return f"{name}/device:{device}" if device else name


def _task_index(key, job: str) -> int:
    if isinstance(key, bool):
        raise TypeError(f"task index {key!r} of job {job!r} must be an integer")
    if isinstance(key, int):
        index = key
    elif isinstance(key, str) and key.strip().isdigit():
        index = int(key)  # JSON object keys are strings: {"worker": {"1": "host:2222"}}
    else:
        raise TypeError(f"task index {key!r} of job {job!r} must be an integer")
    if index < 0:
        raise ClusterConfigError(f"task index {index} of job {job!r} is negative")
    return index


class ClusterSpec:
    """The jobs of a cluster and the address of each of their tasks (immutable).

    Args:
      cluster: a dict {job: [address, ...]} (task i at position i), a dict
        {job: {index: address}} (a sparse job), a ClusterDef proto, another ClusterSpec, or None
        for an empty cluster.

    Raises:
      TypeError: a job name, index or address of the wrong type.
      ClusterConfigError: a negative task index.

    >>> spec = ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": {3: "ps3:2222"}})
    >>> spec.jobs
    ['ps', 'worker']
    >>> spec.task_address("worker", 1), spec.task_indices("ps")
    ('w1:2222', [3])
    >>> spec.as_dict()
    {'ps': {3: 'ps3:2222'}, 'worker': ['w0:2222', 'w1:2222']}
    """

    def __init__(self, cluster=None):
        self._jobs: dict[str, dict[int, str]] = {}
        if cluster is None:
            return
        if isinstance(cluster, ClusterSpec):
            self._jobs = {job: dict(tasks) for job, tasks in cluster._jobs.items()}
            return
        if hasattr(cluster, "job") and not isinstance(cluster, Mapping):  # a ClusterDef proto
            for job_def in cluster.job:
                self._add_job(job_def.name, dict(job_def.tasks))
            return
        if not isinstance(cluster, Mapping):
            raise TypeError(
                "ClusterSpec takes a dict {job: [address, ...]} or {job: {index: address}}, a "
                f"ClusterDef or a ClusterSpec; got {type(cluster).__name__}"
            )
        for job, tasks in cluster.items():
            self._add_job(job, tasks)

    def _add_job(self, job, tasks) -> None:
        if isinstance(job, bytes):
            job = job.decode()
        if not isinstance(job, str) or not job:
            raise TypeError(f"job name {job!r} must be a non-empty string")
        if isinstance(tasks, Mapping):
            items = [(_task_index(k, job), v) for k, v in tasks.items()]
        elif isinstance(tasks, (list, tuple)):
            items = list(enumerate(tasks))
        else:
            raise TypeError(
                f"the tasks of job {job!r} must be a list of addresses or a dict from integers "
                f"to addresses; got {type(tasks).__name__} {tasks!r}"
            )
        out = {}
        for index, address in sorted(items):
            if isinstance(address, bytes):
                address = address.decode()
            if not isinstance(address, str):
                raise TypeError(f"address {address!r} of task {job}:{index} must be a string")
            out[index] = address
        self._jobs[job] = out

    # -- TensorFlow's ClusterSpec API ---------------------------------------------------------

    @property
    def jobs(self) -> list[str]:
        """The job names, sorted."""
        return sorted(self._jobs)

    def _job(self, job: str) -> dict[int, str]:
        try:
            return self._jobs[job]
        except KeyError:
            raise ClusterConfigError(
                f"no job {job!r} in the cluster (jobs: {', '.join(self.jobs) or 'none'})"
            ) from None

    def num_tasks(self, job: str) -> int:
        """The number of tasks of `job`."""
        return len(self._job(job))

    def task_indices(self, job: str) -> list[int]:
        """The task indices of `job`, sorted (a sparse job can have gaps)."""
        return sorted(self._job(job))

    def task_address(self, job: str, task_index: int) -> str:
        """The "host:port" of task `task_index` of `job`."""
        tasks = self._job(job)
        try:
            return tasks[task_index]
        except (KeyError, TypeError):
            raise ClusterConfigError(
                f"no task {task_index!r} in job {job!r} (its tasks: "
                f"{', '.join(map(str, sorted(tasks))) or 'none'})"
            ) from None

    def job_tasks(self, job: str) -> list[str | None]:
        """The addresses of `job` by index, None where a sparse job has no task."""
        tasks = self._job(job)
        if not tasks:
            return []
        out: list[str | None] = [None] * (max(tasks) + 1)
        for index, address in tasks.items():
            out[index] = address
        return out

    def as_dict(self) -> dict:
        """{job: [address, ...]} for dense jobs, {job: {index: address}} for sparse ones."""
        out = {}
        for job in self.jobs:
            tasks = self._jobs[job]
            if tasks and max(tasks) + 1 == len(tasks):
                out[job] = [tasks[i] for i in range(len(tasks))]
            else:
                out[job] = dict(sorted(tasks.items()))
        return out

    def as_cluster_def(self):
        """The ClusterDef proto: jobs sorted by name, tasks keyed by index."""
        cluster_def = ClusterDef()
        for job in self.jobs:
            job_def = cluster_def.job.add()
            job_def.name = job
            for index, address in sorted(self._jobs[job].items()):
                job_def.tasks[index] = address
        return cluster_def

    # -- rill additions -----------------------------------------------------------------------

    def tasks(self) -> list[tuple[str, int, str]]:
        """Every task as (job, index, address), jobs sorted, then indices."""
        return [(job, i, self._jobs[job][i]) for job in self.jobs for i in sorted(self._jobs[job])]

    def duplicate_addresses(self) -> dict[str, list[str]]:
        """{address: [task name, ...]} for every address shared by more than one task."""
        seen: dict[str, list[str]] = {}
        for job, index, address in self.tasks():
            seen.setdefault(address, []).append(task_device_name(job, index))
        return {a: names for a, names in seen.items() if len(names) > 1}

    def __eq__(self, other) -> bool:
        if not isinstance(other, ClusterSpec):
            return NotImplemented
        return self._jobs == other._jobs

    __hash__ = None  # mutable in TensorFlow, compared by value here as there

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"


# -- TF_CONFIG ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TFConfig:
    """The task a `TF_CONFIG` describes, resolved and checked (see `parse_tf_config`).

    `task_type` / `task_index` are None when TF_CONFIG names no task (a client-only process).
    `session_master` is what TensorFlow's TFConfigClusterResolver.master() returns: TF_CONFIG's
    "session_master" when given, else this task's own address, prefixed with "<rpc_layer>://" when
    an rpc_layer is set ("" for an evaluator outside the cluster).
    """

    cluster: ClusterSpec
    task_type: str | None = None
    task_index: int | None = None
    rpc_layer: str | None = None
    session_master: str = ""
    environment: str | None = None
    sparse: bool = False

    @property
    def in_cluster(self) -> bool:
        """Whether this task is one of the cluster's (an evaluator usually is not)."""
        return self.task_type is not None and self.task_type in self.cluster.jobs

    @property
    def address(self) -> str | None:
        """This task's "host:port", or None when it is not in the cluster."""
        if not self.in_cluster:
            return None
        return self.cluster.task_address(self.task_type, self.task_index)

    @property
    def port(self) -> int | None:
        address = self.address
        return None if address is None else int(address.rsplit(":", 1)[1])

    @property
    def is_chief(self) -> bool:
        """TensorFlow's rule: the chief (or legacy master); worker 0 when the cluster has neither;
        the evaluator, which is its own chief."""
        if self.task_type in ("chief", "master", "evaluator"):
            return True
        jobs = self.cluster.jobs
        if self.task_type == "worker" and "chief" not in jobs and "master" not in jobs:
            return self.task_index == 0
        return False

    @property
    def coordinator(self) -> tuple[str, int] | None:
        """(job, index) of the coordinator: chief (or master) 0, else worker 0; None without."""
        for job in ("chief", "master", "worker"):
            if job in self.cluster.jobs and self.cluster.task_indices(job):
                return job, self.cluster.task_indices(job)[0]
        return None

    @property
    def coordinator_device(self) -> str | None:
        """The master/coordinator task's name ('/job:chief/replica:0/task:0'), or None."""
        c = self.coordinator
        return None if c is None else task_device_name(*c)

    @property
    def num_workers(self) -> int:
        """Workers that run training steps: chief (or master) plus worker, as TensorFlow counts."""
        return sum(self.cluster.num_tasks(j) for j in ("chief", "master", "worker")
                   if j in self.cluster.jobs)  # fmt: skip

    @property
    def task_name(self) -> str | None:
        """'/job:<type>/replica:0/task:<index>', or None when TF_CONFIG names no task."""
        if self.task_type is None:
            return None
        return task_device_name(self.task_type, self.task_index)

    @property
    def device_names(self) -> tuple[str, ...]:
        """The devices this task exports (its CPU; accelerators are added by the server)."""
        if self.task_type is None:
            return ()
        return (task_device_name(self.task_type, self.task_index, "CPU:0"),)

    @property
    def peers(self) -> tuple[tuple[str, str], ...]:
        """(task name, address) of every other task of the cluster."""
        me = (self.task_type, self.task_index)
        return tuple((task_device_name(job, i), address)
                     for job, i, address in self.cluster.tasks() if (job, i) != me)  # fmt: skip

    def describe(self) -> str:
        """Role, device names and peers, as the server logs them at start-up."""
        if self.task_type is None:
            head = "no task (TF_CONFIG names a cluster only: a client)"
        else:
            where = f" at {self.address}" if self.in_cluster else " (outside the cluster)"
            chief = ", chief" if self.is_chief else ""
            head = f"task {self.task_name} ({self.task_type} {self.task_index}{chief}){where}"
        lines = [head]
        lines += [f"  device {d}" for d in self.device_names]
        if self.coordinator_device:
            lines.append(f"  coordinator {self.coordinator_device}")
        lines.append(f"  rpc layer {self.rpc_layer or 'grpc'}, {self.num_workers} worker(s)")
        if self.session_master:
            lines.append(f"  session master {self.session_master}")
        lines.append(f"  {len(self.peers)} peer(s)" + (":" if self.peers else ""))
        width = max((len(name) for name, _ in self.peers), default=0)
        lines += [f"    {name.ljust(width)}  {address}" for name, address in self.peers]
        return "\n".join(lines)


def _check_address(address, where: str) -> None:
    if not isinstance(address, str) or not address:
        raise ClusterConfigError(f"{where}: address {_quote(address)} must be a 'host:port' string")
    if "://" in address:
        raise ClusterConfigError(
            f"{where}: address {_quote(address)} must be 'host:port' without a scheme "
            f'(the rpc layer goes in "rpc_layer")'
        )
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 literal
    if not sep or not host or any(c.isspace() for c in address) or not _PORT_RE.match(port):
        raise ClusterConfigError(f"{where}: address {_quote(address)} is not 'host:port'")
    if not 1 <= int(port) <= 65535:
        raise ClusterConfigError(
            f"{where}: port {port} of address {_quote(address)} is not 1-65535"
        )


def _cluster_from_json(obj, key: str) -> ClusterSpec:
    if not isinstance(obj, dict):
        raise ClusterConfigError(
            f'TF_CONFIG "{key}" must be an object {{job: [address, ...]}}; got {_quote(obj)}'
        )
    for job, tasks in obj.items():
        if job not in ROLES:
            raise ClusterConfigError(
                f'TF_CONFIG "{key}" has unknown job {_quote(job)} (in {_quote({job: tasks})}); '
                f"jobs are {', '.join(ROLES)}"
            )
        if key == "cluster" and not isinstance(tasks, list):
            raise ClusterConfigError(
                f'TF_CONFIG "cluster" job {job!r} must be a list of addresses; got {_quote(tasks)}'
                ' (a job keyed by index belongs in "sparseCluster")'
            )
        if not isinstance(tasks, (list, dict)):
            raise ClusterConfigError(
                f'TF_CONFIG "{key}" job {job!r} must be a list of addresses or an object '
                f"{{index: address}}; got {_quote(tasks)}"
            )
        if isinstance(tasks, dict):
            for k in tasks:
                if not (isinstance(k, str) and k.isdigit()):
                    raise ClusterConfigError(
                        f'TF_CONFIG "{key}" job {job!r} has task key {_quote(k)}, not a '
                        f"non-negative integer (in {_quote({job: tasks})})"
                    )
    try:
        spec = ClusterSpec(obj)
    except TypeError as e:
        raise ClusterConfigError(f'TF_CONFIG "{key}": {e}') from None
    for job, index, address in spec.tasks():
        _check_address(address, f'TF_CONFIG "{key}" task {job}:{index}')
    dups = spec.duplicate_addresses()
    if dups:
        address, names = next(iter(dups.items()))
        raise ClusterConfigError(
            f'TF_CONFIG "{key}": address {_quote(address)} is given to {len(names)} tasks '
            f"({', '.join(names)}); every task needs its own address"
        )
    coordinators = [j for j in ("chief", "master") if j in spec.jobs]
    n_chiefs = sum(spec.num_tasks(j) for j in coordinators)
    if n_chiefs > 1:
        shown = {j: obj[j] for j in coordinators}
        raise ClusterConfigError(
            f'TF_CONFIG "{key}" has {n_chiefs} chief tasks {_quote(shown)}; there must be at '
            'most one ("chief" and the legacy "master" are the same role)'
        )
    if "evaluator" in spec.jobs and spec.num_tasks("evaluator") > 1:
        raise ClusterConfigError(
            f'TF_CONFIG "{key}" has {spec.num_tasks("evaluator")} evaluator tasks '
            f"{_quote(obj['evaluator'])}; there must be at most one"
        )
    return spec


def _read_text(text_or_env):
    """The decoded TF_CONFIG object (a dict), from text, an environment mapping, or os.environ."""
    if text_or_env is None:
        text_or_env = os.environ
    if isinstance(text_or_env, os._Environ) or (
        isinstance(text_or_env, Mapping) and "TF_CONFIG" in text_or_env
    ):
        text_or_env = text_or_env.get("TF_CONFIG", "")
    if isinstance(text_or_env, Mapping):
        return dict(text_or_env)  # an already-decoded TF_CONFIG object
    if isinstance(text_or_env, bytes):
        text_or_env = text_or_env.decode()
    if not isinstance(text_or_env, str):
        raise TypeError(
            "parse_tf_config takes TF_CONFIG's JSON text, an environment mapping or the decoded "
            f"object; got {type(text_or_env).__name__}"
        )
    if not text_or_env.strip():
        return {}
    try:
        obj = json.loads(text_or_env)
    except json.JSONDecodeError as e:
        lo = max(0, e.pos - 30)
        near = text_or_env[lo : e.pos + 30]
        raise ClusterConfigError(
            f"TF_CONFIG is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}, near "
            f"{near!r} (TF_CONFIG = {_quote(text_or_env)})"
        ) from None
    if not isinstance(obj, dict):
        raise ClusterConfigError(f"TF_CONFIG must be a JSON object; got {_quote(obj)}")
    return obj


def parse_tf_config(text_or_env=None) -> TFConfig:
    """Reads and checks TF_CONFIG, in every form launchers write.

    Accepted: {"cluster": {job: [address, ...]}, "task": {"type": t, "index": i}} with jobs
    chief / master (legacy chief) / worker / ps / evaluator; an evaluator task outside "cluster";
    "sparseCluster" with jobs as lists or {"<index>": address} (Kubeflow's dynamic workers);
    "rpc_layer", "session_master", "environment" (ignored, as TensorFlow does), and the "job" key
    and task "trial"/"cloud" keys that Cloud ML Engine and Vertex AI write. No TF_CONFIG (or an
    empty one) gives an empty cluster and no task.

    Args:
      text_or_env: TF_CONFIG's JSON text; or an environment mapping holding "TF_CONFIG"; or the
        decoded object; None reads os.environ.

    Returns:
      A frozen `TFConfig`.

    Raises:
      ClusterConfigError: bad JSON, an unknown key or role, an index out of range, a malformed
        or duplicate address, more than one chief or evaluator; the message quotes the part.

    >>> c = parse_tf_config('{"cluster": {"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]},'
    ...                     ' "task": {"type": "worker", "index": 1}}')
    >>> c.task_name, c.address, c.is_chief, c.coordinator_device
    ('/job:worker/replica:0/task:1', 'w1:2222', False, '/job:worker/replica:0/task:0')
    """
    obj = _read_text(text_or_env)
    unknown = sorted(set(obj) - set(_TOP_KEYS))
    if unknown:
        raise ClusterConfigError(
            f"TF_CONFIG has unknown key {_quote(unknown[0])} (= {_quote(obj[unknown[0]])}); "
            f"the keys are {', '.join(_TOP_KEYS)}"
        )
    if "cluster" in obj and "sparseCluster" in obj:
        raise ClusterConfigError(
            'TF_CONFIG has both "cluster" and "sparseCluster"; give one '
            f"(cluster = {_quote(obj['cluster'])}, sparseCluster = {_quote(obj['sparseCluster'])})"
        )
    key = "sparseCluster" if "sparseCluster" in obj else "cluster"
    spec = _cluster_from_json(obj[key], key) if key in obj else ClusterSpec()

    strings = {}
    for name in ("rpc_layer", "session_master", "environment"):
        value = obj.get(name)
        if value is not None and not isinstance(value, str):
            raise ClusterConfigError(f'TF_CONFIG "{name}" must be a string; got {_quote(value)}')
        strings[name] = value or None
    rpc_layer = strings["rpc_layer"]
    if rpc_layer is not None and not re.fullmatch(r"[a-z][a-z0-9+.-]*", rpc_layer):
        raise ClusterConfigError(
            f'TF_CONFIG "rpc_layer" {_quote(rpc_layer)} is not a protocol name'
        )

    task_type, task_index = _parse_task(obj.get("task"), spec, key)

    master = strings["session_master"] or ""
    if not master and task_type in spec.jobs:
        master = spec.task_address(task_type, task_index)
    if master and rpc_layer and "://" not in master:
        master = f"{rpc_layer}://{master}"
    return TFConfig(cluster=spec, task_type=task_type, task_index=task_index, rpc_layer=rpc_layer,
                    session_master=master, environment=strings["environment"],
                    sparse=key == "sparseCluster")  # fmt: skip


def _parse_task(task, spec: ClusterSpec, key: str):
    if task is None or task == {}:
        return None, None
    if not isinstance(task, dict):
        raise ClusterConfigError(
            f'TF_CONFIG "task" must be an object {{"type": ..., "index": ...}}; got {_quote(task)}'
        )
    unknown = sorted(set(task) - set(_TASK_KEYS))
    if unknown:
        raise ClusterConfigError(
            f'TF_CONFIG "task" has unknown key {_quote(unknown[0])} (task = {_quote(task)}); '
            f"its keys are {', '.join(_TASK_KEYS)}"
        )
    task_type = task.get("type")
    if task_type not in ROLES:
        raise ClusterConfigError(
            f'TF_CONFIG "task" has unknown role "type": {_quote(task_type)} (task = '
            f"{_quote(task)}); roles are {', '.join(ROLES)}"
        )
    index = task.get("index", 0)
    if isinstance(index, str) and index.isdigit():
        index = int(index)
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ClusterConfigError(
            f'TF_CONFIG "task" "index": {_quote(task.get("index"))} is not a non-negative '
            f"integer (task = {_quote(task)})"
        )
    if task_type in spec.jobs:
        indices = spec.task_indices(task_type)
        if index not in indices:
            raise ClusterConfigError(
                f'TF_CONFIG "task" {_quote(task)} is out of range: {key} job {task_type!r} has '
                f"task(s) {', '.join(map(str, indices)) or 'none'} "
                f"({_quote(spec.as_dict()[task_type])})"
            )
    elif task_type != "evaluator":
        raise ClusterConfigError(
            f'TF_CONFIG "task" {_quote(task)} names job {task_type!r}, which is not in '
            f"{key} (jobs: {', '.join(spec.jobs) or 'none'}); only an evaluator may be outside it"
        )
    return task_type, index
