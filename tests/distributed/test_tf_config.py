"""parse_tf_config: every form launchers write (reference/formats.md §7), and every bad form."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rill.distributed import ClusterConfigError, ClusterSpec, TFConfig, parse_tf_config
from rill.graph.errors import InvalidArgumentError

KUBEFLOW = {
    "cluster": {
        "chief": ["job-chief-0.ns.svc:2222"],
        "worker": ["job-worker-0.ns.svc:2222", "job-worker-1.ns.svc:2222"],
        "ps": ["job-ps-0.ns.svc:2222"],
    },
    "task": {"type": "worker", "index": 1},
    "environment": "cloud",
}


def parse(obj):
    return parse_tf_config(json.dumps(obj))


def test_kubeflow_tfjob_form():
    c = parse(KUBEFLOW)
    assert c.cluster.jobs == ["chief", "ps", "worker"]
    assert (c.task_type, c.task_index) == ("worker", 1)
    assert c.address == "job-worker-1.ns.svc:2222" and c.port == 2222
    assert c.task_name == "/job:worker/replica:0/task:1"
    assert c.device_names == ("/job:worker/replica:0/task:1/device:CPU:0",)
    assert not c.is_chief
    assert c.coordinator_device == "/job:chief/replica:0/task:0"
    assert c.num_workers == 3  # chief + workers, as TensorFlow counts
    assert c.environment == "cloud"
    assert c.rpc_layer is None
    assert c.session_master == "job-worker-1.ns.svc:2222"  # TFConfigClusterResolver.master()
    assert dict(c.peers) == {
        "/job:chief/replica:0/task:0": "job-chief-0.ns.svc:2222",
        "/job:ps/replica:0/task:0": "job-ps-0.ns.svc:2222",
        "/job:worker/replica:0/task:0": "job-worker-0.ns.svc:2222",
    }
    assert not c.sparse


def test_result_is_frozen():
    c = parse(KUBEFLOW)
    assert isinstance(c, TFConfig)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.task_index = 0


def test_formats_md_resolver_example():
    c = parse({"cluster": {"chief": ["localhost:11111"], "worker": ["localhost:2222",
               "localhost:22222"], "ps": ["localhost:3333"]},
               "task": {"type": "worker", "index": 1}})  # fmt: skip
    assert c.session_master == "localhost:22222"
    assert c.cluster.num_tasks("worker") == 2
    assert c.cluster.task_address("worker", 1) == "localhost:22222"


@pytest.mark.parametrize(
    "cluster, task, chief",
    [
        ({"chief": ["c:1"], "worker": ["w0:1", "w1:1"]}, ("chief", 0), True),
        ({"chief": ["c:1"], "worker": ["w0:1", "w1:1"]}, ("worker", 0), False),
        ({"worker": ["w0:1", "w1:1"], "ps": ["p:1"]}, ("worker", 0), True),
        ({"worker": ["w0:1", "w1:1"], "ps": ["p:1"]}, ("worker", 1), False),
        ({"worker": ["w0:1", "w1:1"], "ps": ["p:1"]}, ("ps", 0), False),
        ({"master": ["m:1"], "worker": ["w0:1"], "ps": ["p:1"]}, ("master", 0), True),
        ({"master": ["m:1"], "worker": ["w0:1"], "ps": ["p:1"]}, ("worker", 0), False),
        ({"chief": ["c:1"], "worker": ["w0:1"]}, ("evaluator", 0), True),
    ],
)
def test_is_chief_rules(cluster, task, chief):
    c = parse({"cluster": cluster, "task": {"type": task[0], "index": task[1]}})
    assert c.is_chief is chief


def test_coordinator_device():
    assert parse({"cluster": {"worker": ["w:1"], "ps": ["p:1"]}}).coordinator_device == (
        "/job:worker/replica:0/task:0"
    )
    assert parse({"cluster": {"master": ["m:1"], "worker": ["w:1"]}}).coordinator_device == (
        "/job:master/replica:0/task:0"
    )
    assert parse({"cluster": {"ps": ["p:1"]}}).coordinator_device is None
    assert parse({"cluster": {"ps": ["p:1"]}}).coordinator is None
    assert parse(KUBEFLOW).coordinator == ("chief", 0)
    sparse = parse({"sparseCluster": {"worker": {"2": "w:1"}}})
    assert sparse.coordinator == ("worker", 2)


def test_sagemaker_master_form():
    c = parse({"cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"],
               "worker": ["algo-2:2222"]}, "environment": "cloud",
               "task": {"index": 0, "type": "master"}})  # fmt: skip
    assert c.task_name == "/job:master/replica:0/task:0" and c.is_chief
    assert c.num_workers == 2


def test_vertex_ai_form_with_job_and_trial():
    c = parse({"cluster": {"chief": ["cmle-training-workerpool0-0:2222"],
               "worker": ["cmle-training-workerpool1-0:2222"]},
               "environment": "cloud", "job": {"worker_pool_specs": [{"replica_count": 1}]},
               "task": {"type": "worker", "index": 0, "trial": "3", "cloud": "xyz"}})  # fmt: skip
    assert c.task_name == "/job:worker/replica:0/task:0" and not c.is_chief


def test_evaluator_outside_cluster():
    c = parse({"cluster": KUBEFLOW["cluster"], "task": {"type": "evaluator", "index": 0}})
    assert c.task_type == "evaluator" and not c.in_cluster
    assert c.address is None and c.port is None
    assert c.is_chief  # the evaluator is its own chief
    assert c.session_master == ""
    assert len(c.peers) == 4  # every task of the cluster
    assert c.device_names == ("/job:evaluator/replica:0/task:0/device:CPU:0",)
    assert "outside the cluster" in c.describe()


def test_evaluator_inside_cluster():
    c = parse({"cluster": {"worker": ["w:1"], "evaluator": ["e:1"]},
               "task": {"type": "evaluator", "index": 0}})  # fmt: skip
    assert c.in_cluster and c.address == "e:1"


def test_sparse_cluster_kubeflow_dynamic_workers():
    c = parse({"sparseCluster": {"worker": {"1": "job-worker-1.ns.svc:2222"},
               "ps": ["job-ps-0.ns.svc:2222"]},
               "task": {"type": "worker", "index": 1}})  # fmt: skip
    assert c.sparse
    assert c.cluster.task_indices("worker") == [1]
    assert c.address == "job-worker-1.ns.svc:2222"
    assert c.cluster.as_dict()["worker"] == {1: "job-worker-1.ns.svc:2222"}
    assert c.coordinator_device == "/job:worker/replica:0/task:1"


def test_rpc_layer_and_session_master():
    c = parse(dict(KUBEFLOW, rpc_layer="grpc"))
    assert c.rpc_layer == "grpc"
    assert c.session_master == "grpc://job-worker-1.ns.svc:2222"
    c = parse(dict(KUBEFLOW, rpc_layer="grpc", session_master="other:5"))
    assert c.session_master == "grpc://other:5"
    c = parse(dict(KUBEFLOW, session_master="grpc://other:5"))
    assert c.session_master == "grpc://other:5"


def test_cluster_only_is_a_client():
    c = parse({"cluster": {"worker": ["w:1"]}})
    assert c.task_type is None and c.task_index is None and c.task_name is None
    assert c.device_names == () and not c.is_chief
    assert len(c.peers) == 1
    assert "no task" in c.describe()


def test_no_tf_config_is_empty(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    for c in (parse_tf_config(), parse_tf_config(""), parse_tf_config("  "), parse_tf_config({})):
        assert c.cluster == ClusterSpec() and c.task_type is None and not c.peers


def test_reads_environment(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(KUBEFLOW))
    assert parse_tf_config().task_name == "/job:worker/replica:0/task:1"
    assert parse_tf_config({"TF_CONFIG": json.dumps(KUBEFLOW), "HOME": "/"}).task_index == 1
    assert parse_tf_config(KUBEFLOW).task_index == 1  # the decoded object
    assert parse_tf_config(json.dumps(KUBEFLOW).encode()).task_index == 1


def test_index_as_digit_string_and_default():
    assert parse({"cluster": {"ps": ["a:1", "b:1"]}, "task": {"type": "ps", "index": "1"}}) \
        .task_index == 1  # fmt: skip
    assert parse({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps"}}).task_index == 0


def test_ipv6_address():
    c = parse({"cluster": {"ps": ["[::1]:2222"]}, "task": {"type": "ps", "index": 0}})
    assert c.port == 2222


def test_describe_lists_role_devices_and_peers():
    text = parse(KUBEFLOW).describe()
    assert "task /job:worker/replica:0/task:1 (worker 1) at job-worker-1.ns.svc:2222" in text
    assert "device /job:worker/replica:0/task:1/device:CPU:0" in text
    assert "coordinator /job:chief/replica:0/task:0" in text
    assert "3 peer(s):" in text
    assert "/job:ps/replica:0/task:0" in text and "job-ps-0.ns.svc:2222" in text
    assert "chief" in parse(dict(KUBEFLOW, task={"type": "chief", "index": 0})).describe()


# -- every bad form: a ClusterConfigError (InvalidArgumentError and ValueError) quoting the part --


def bad(obj):
    text = obj if isinstance(obj, str) else json.dumps(obj)
    with pytest.raises(ClusterConfigError) as info:
        parse_tf_config(text)
    assert isinstance(info.value, InvalidArgumentError) and isinstance(info.value, ValueError)
    return str(info.value)


CL = {"worker": ["w0:1", "w1:1"], "ps": ["p0:1"]}


def test_bad_json_quotes_the_text_and_position():
    msg = bad('{"cluster": {"worker": ["w0:1",]}}')
    assert "not valid JSON" in msg and "line 1 column" in msg and "w0:1" in msg
    assert "near" in msg
    msg = bad("{'cluster': {}}")  # single quotes, a common shell mistake
    assert "not valid JSON" in msg and "'cluster'" in msg


def test_not_an_object():
    assert '["worker"]' in bad('["worker"]')
    assert "must be a JSON object" in bad("3")


def test_unknown_top_level_key():
    msg = bad({"cluster": CL, "tasks": {"type": "worker", "index": 0}})
    assert '"tasks"' in msg and "unknown key" in msg and '"index": 0' in msg


def test_unknown_task_key():
    msg = bad({"cluster": CL, "task": {"type": "worker", "id": 0}})
    assert 'unknown key "id"' in msg


def test_unknown_role_in_task():
    msg = bad({"cluster": CL, "task": {"type": "trainer", "index": 0}})
    assert 'unknown role "type": "trainer"' in msg and "chief, master, worker, ps, evaluator" in msg
    assert "unknown role" in bad({"cluster": CL, "task": {"index": 0}})


def test_unknown_job_in_cluster():
    msg = bad({"cluster": {"worker": ["w:1"], "trainer": ["t:1"]}})
    assert 'unknown job "trainer"' in msg and '"t:1"' in msg


def test_task_index_out_of_range():
    msg = bad({"cluster": CL, "task": {"type": "worker", "index": 2}})
    assert "out of range" in msg and '"index": 2' in msg and "task(s) 0, 1" in msg
    msg = bad({"sparseCluster": {"worker": {"1": "w:1"}}, "task": {"type": "worker", "index": 0}})
    assert "out of range" in msg and "sparseCluster" in msg


@pytest.mark.parametrize("index", [-1, 1.5, True, "one", None, [0]])
def test_bad_task_index(index):
    msg = bad({"cluster": CL, "task": {"type": "worker", "index": index}})
    assert "is not a non-negative integer" in msg and json.dumps(index) in msg


def test_task_job_not_in_cluster():
    msg = bad({"cluster": {"worker": ["w:1"]}, "task": {"type": "ps", "index": 0}})
    assert "names job 'ps', which is not in cluster (jobs: worker)" in msg
    assert "not in cluster (jobs: none)" in bad({"task": {"type": "worker", "index": 0}})


def test_duplicate_addresses():
    msg = bad({"cluster": {"worker": ["h:2222", "h:2223"], "ps": ["h:2222"]}})
    assert 'address "h:2222" is given to 2 tasks' in msg
    assert "/job:ps/replica:0/task:0" in msg and "/job:worker/replica:0/task:0" in msg


def test_more_than_one_chief():
    assert "2 chief tasks" in bad({"cluster": {"chief": ["a:1", "b:1"], "worker": ["w:1"]}})
    msg = bad({"cluster": {"chief": ["a:1"], "master": ["b:1"]}})
    assert "2 chief tasks" in msg and '"master": ["b:1"]' in msg


def test_more_than_one_evaluator():
    assert "2 evaluator tasks" in bad({"cluster": {"evaluator": ["a:1", "b:1"]}})


@pytest.mark.parametrize(
    "address, part",
    [
        ("grpc://w:2222", "without a scheme"),
        ("w", "is not 'host:port'"),
        ("w:", "is not 'host:port'"),
        (":2222", "is not 'host:port'"),
        ("w:http", "is not 'host:port'"),
        ("w :2222", "is not 'host:port'"),
        ("w:0", "is not 1-65535"),
        ("w:70000", "is not 1-65535"),
        ("", "must be a 'host:port' string"),
    ],
)
def test_bad_addresses(address, part):
    msg = bad({"cluster": {"worker": ["ok:1", address]}})
    assert part in msg and json.dumps(address) in msg and "task worker:1" in msg


def test_non_string_address():
    msg = bad({"cluster": {"worker": [2222]}})
    assert "2222" in msg and "must be a string" in msg


def test_cluster_shapes():
    assert "must be an object" in bad({"cluster": ["w:1"]})
    msg = bad({"cluster": {"worker": "w:1"}})
    assert "must be a list of addresses" in msg and '"w:1"' in msg
    msg = bad({"cluster": {"worker": {"0": "w:1"}}})
    assert "sparseCluster" in msg
    msg = bad({"sparseCluster": {"worker": {"x": "w:1"}}})
    assert 'task key "x"' in msg
    msg = bad({"sparseCluster": {"worker": "w:1"}})
    assert "must be a list of addresses or an object" in msg


def test_both_cluster_and_sparse_cluster():
    msg = bad({"cluster": CL, "sparseCluster": {"worker": {"0": "w0:1"}}})
    assert "both" in msg and "w0:1" in msg


def test_task_must_be_an_object():
    assert "must be an object" in bad({"cluster": CL, "task": "worker"})


@pytest.mark.parametrize("key", ["rpc_layer", "session_master", "environment"])
def test_string_fields(key):
    assert f'"{key}" must be a string' in bad({"cluster": CL, key: 3})


def test_bad_rpc_layer():
    assert '"grpc layer"' in bad({"cluster": CL, "rpc_layer": "grpc layer"})


def test_long_values_are_shortened_in_messages():
    many = [f"h{i}:1" for i in range(300)]
    msg = bad({"cluster": {"trainer": many}})
    assert "..." in msg and len(msg) < 800


def test_wrong_argument_type():
    with pytest.raises(TypeError, match="takes TF_CONFIG's JSON text"):
        parse_tf_config(42)
