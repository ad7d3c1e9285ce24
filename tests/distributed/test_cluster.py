"""ClusterSpec: TensorFlow's construction rules, queries, conversions and errors."""

from __future__ import annotations

import pytest

from rill.distributed import ClusterConfigError, ClusterSpec, task_device_name
from rill.distributed.proto import ClusterDef
from rill.graph.errors import InvalidArgumentError

DENSE = {"worker": ["w0:2222", "w1:2222"], "ps": ["ps0:2222"], "chief": ["c0:2222"]}


def test_dict_of_lists_gives_dense_indices_and_sorted_jobs():
    spec = ClusterSpec(DENSE)
    assert spec.jobs == ["chief", "ps", "worker"]
    assert spec.num_tasks("worker") == 2
    assert spec.task_indices("worker") == [0, 1]
    assert spec.task_address("worker", 1) == "w1:2222"
    assert spec.job_tasks("ps") == ["ps0:2222"]
    assert spec.as_dict() == {"chief": ["c0:2222"], "ps": ["ps0:2222"],
                              "worker": ["w0:2222", "w1:2222"]}  # fmt: skip
    assert list(spec.as_dict()) == ["chief", "ps", "worker"]


def test_sparse_job_keeps_its_indices():
    spec = ClusterSpec({"worker": {1: "w1:2222", 3: "w3:2222"}, "ps": ["ps0:1"]})
    assert spec.num_tasks("worker") == 2
    assert spec.task_indices("worker") == [1, 3]
    assert spec.job_tasks("worker") == [None, "w1:2222", None, "w3:2222"]
    assert spec.as_dict()["worker"] == {1: "w1:2222", 3: "w3:2222"}
    # A dict that happens to be dense comes back as a list, as in TensorFlow.
    assert ClusterSpec({"ps": {1: "b:1", 0: "a:1"}}).as_dict() == {"ps": ["a:1", "b:1"]}
    with pytest.raises(ClusterConfigError, match=r"no task 0 in job 'worker' \(its tasks: 1, 3\)"):
        spec.task_address("worker", 0)


def test_string_digit_keys_are_indices():
    assert ClusterSpec({"worker": {"2": "w:1"}}).task_indices("worker") == [2]


def test_copy_equality_and_bool():
    a = ClusterSpec(DENSE)
    b = ClusterSpec(a)
    assert a == b and a is not b and a == ClusterSpec(a.as_dict())
    assert a != ClusterSpec({"worker": ["w0:2222"]})
    assert a != DENSE  # a dict is not a ClusterSpec
    assert not ClusterSpec() and not ClusterSpec({})
    assert ClusterSpec({"worker": []})  # an empty job is still a job (TensorFlow's rule)
    assert ClusterSpec({"worker": []}).job_tasks("worker") == []
    with pytest.raises(TypeError):
        hash(a)
    assert "w1:2222" in repr(a)


def test_copy_is_independent_of_the_source_dict():
    src = {"worker": ["w0:1"]}
    spec = ClusterSpec(src)
    src["worker"].append("w1:1")
    src["ps"] = ["p:1"]
    assert spec.as_dict() == {"worker": ["w0:1"]}
    spec.as_dict()["worker"].append("x:1")
    assert spec.num_tasks("worker") == 1


def test_tasks_and_duplicates():
    spec = ClusterSpec({"ps": ["a:1"], "worker": ["b:1", "a:1"]})
    assert spec.tasks() == [("ps", 0, "a:1"), ("worker", 0, "b:1"), ("worker", 1, "a:1")]
    assert spec.duplicate_addresses() == {
        "a:1": ["/job:ps/replica:0/task:0", "/job:worker/replica:0/task:1"]
    }
    assert ClusterSpec(DENSE).duplicate_addresses() == {}


def test_unknown_job_names_the_jobs():
    spec = ClusterSpec(DENSE)
    with pytest.raises(ClusterConfigError, match=r"no job 'evaluator' .*chief, ps, worker"):
        spec.num_tasks("evaluator")
    with pytest.raises(InvalidArgumentError):
        spec.task_indices("nope")
    with pytest.raises(ValueError):  # TensorFlow raises ValueError here; ours is one too
        spec.task_address("nope", 0)
    with pytest.raises(ClusterConfigError, match="no task 5 in job 'worker'"):
        spec.task_address("worker", 5)


@pytest.mark.parametrize(
    "bad, match",
    [
        (["w:1"], "takes a dict"),
        ("worker", "takes a dict"),
        ({"worker": "w:1"}, "tasks of job 'worker' must be a list"),
        ({"worker": [1234]}, "address 1234 of task worker:0 must be a string"),
        ({"worker": {"x": "w:1"}}, "task index 'x' of job 'worker' must be an integer"),
        ({"worker": {True: "w:1"}}, "task index True"),
        ({3: ["w:1"]}, "job name 3"),
        ({"": ["w:1"]}, "job name ''"),
    ],
)
def test_wrong_types_raise_type_error(bad, match):
    with pytest.raises(TypeError, match=match):
        ClusterSpec(bad)


def test_negative_index_is_invalid():
    with pytest.raises(ClusterConfigError, match="task index -1 of job 'ps' is negative"):
        ClusterSpec({"ps": {-1: "p:1"}})


def test_bytes_are_decoded():
    spec = ClusterSpec({b"ps": [b"p:1"]})
    assert spec.task_address("ps", 0) == "p:1"


class _FakeJob:
    def __init__(self, name, tasks):
        self.name, self.tasks = name, tasks


class _FakeClusterDef:
    def __init__(self, jobs):
        self.job = jobs


def test_from_a_cluster_def_shaped_message():
    cd = _FakeClusterDef([_FakeJob("worker", {1: "w1:1", 0: "w0:1"}), _FakeJob("ps", {2: "p:1"})])
    spec = ClusterSpec(cd)
    assert spec.as_dict() == {"ps": {2: "p:1"}, "worker": ["w0:1", "w1:1"]}


def test_cluster_def_round_trip():
    spec = ClusterSpec({"worker": {1: "w1:2222", 3: "w3:2222"}, "ps": ["ps0:2222"]})
    cd = spec.as_cluster_def()
    assert isinstance(cd, ClusterDef)
    assert [j.name for j in cd.job] == ["ps", "worker"]  # sorted by name
    assert dict(cd.job[1].tasks) == {1: "w1:2222", 3: "w3:2222"}
    assert ClusterSpec(cd) == spec
    again = ClusterDef.FromString(cd.SerializeToString())
    assert ClusterSpec(again) == spec


def test_task_device_name():
    assert task_device_name("worker", 3) == "/job:worker/replica:0/task:3"
    assert task_device_name("ps", 0, "CPU:0") == "/job:ps/replica:0/task:0/device:CPU:0"
