"""`rill-server` (also `python -m rill.distributed`): runs one task of a cluster.

The task comes from, in order:

1. flags: `--cluster` (JSON `{"ps": ["h:2222"], "worker": [...]}` or `ps=h:2222;worker=a:1,b:1`)
   or the classic `--ps_hosts` / `--worker_hosts` / `--chief_hosts`, with `--job_name` and
   `--task_index`;
2. the `TF_CONFIG` environment variable, in any form launchers write (see `parse_tf_config`);
   `--job_name` / `--task_index` may pick another task of its cluster;
3. neither: a standalone single-task server (job "localhost") on `--port` (0 picks a free one).

The server logs its role, devices and peers, then serves until it is stopped: SIGTERM or SIGINT
(what Kubernetes and Ctrl-C send) stop it cleanly, as does the server being stopped from
elsewhere (`Server.join()` returning) and, with `--exit_with_coordinator GRACE_S`, the
coordinator's end (it answered, then stopped answering for GRACE_S seconds: the job is finished);
each way the exit status is 0. A bad configuration exits with status 2 and a
message naming what is wrong; a server that cannot start (a port in use) exits with status 1.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
import time

from rill.distributed.cluster import (
    ClusterConfigError,
    ClusterSpec,
    TFConfig,
    _check_address,
    parse_tf_config,
    task_device_name,
)

__all__ = ["main", "build_parser", "resolve_task", "parse_cluster_flag"]

log = logging.getLogger("rill.distributed.server")

EXIT_OK, EXIT_FAILED, EXIT_BAD_CONFIG = 0, 1, 2
_POLL_S = 0.25  # how often the main loop looks at signals, the parent and the server


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rill-server",
        description="Run one task of a rill (TensorFlow-protocol) cluster: from flags, from "
        "TF_CONFIG, or a standalone server.",
        epilog="Exit status: 0 stopped or job finished; 1 the server failed; 2 bad configuration.",
    )
    p.add_argument("--cluster", help='the cluster: JSON {"ps": ["host:port"], ...} or '
                   "'ps=host:port;worker=host:port,host:port' (default: TF_CONFIG)")  # fmt: skip
    for job in ("chief", "ps", "worker"):
        p.add_argument(f"--{job}_hosts", help=f"comma-separated {job} addresses (classic flags)")
    p.add_argument("--job_name", "--job-name", dest="job_name", help="this task's job")
    p.add_argument("--task_index", "--task-index", dest="task_index", type=int,
                   help="this task's index in its job (default 0)")  # fmt: skip
    p.add_argument("--port", type=int, help="port to listen on: overrides the one in this task's "
                   "address; for a standalone server 0 (default) picks a free port")  # fmt: skip
    p.add_argument("--start_timeout", "--start-timeout", dest="start_timeout", type=float,
                   default=120.0, help="seconds to wait for this task's host name to resolve "
                   "(default 120)")  # fmt: skip
    p.add_argument("--exit_with_coordinator", "--exit-with-coordinator", type=float,
                   dest="exit_with_coordinator", metavar="GRACE_S",
                   help="end (exit 0) once the coordinator (chief, else worker 0) has answered "
                   "and then not answered for GRACE_S seconds: for PS tasks under launchers that "
                   "wait for every task to exit; make GRACE_S longer than a restart")  # fmt: skip
    p.add_argument("--protocol", help="rpc layer (default: TF_CONFIG's rpc_layer, else grpc)")
    p.add_argument("--check", action="store_true",
                   help="check the configuration, print the task it describes, and exit")  # fmt: skip
    p.add_argument("--log_level", "--log-level", dest="log_level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"])  # fmt: skip
    # Used by local_cluster: stop when the process that launched this task goes away, so that
    # no task outlives a test run that was killed.
    p.add_argument("--parent_pid", type=int, help=argparse.SUPPRESS)
    return p


def parse_cluster_flag(text: str) -> ClusterSpec:
    """`--cluster`: JSON {job: [address, ...]} or {job: {index: address}}, or 'job=a,b;job2=c'.

    >>> parse_cluster_flag("ps=p:1;worker=w0:1,w1:1").as_dict()
    {'ps': ['p:1'], 'worker': ['w0:1', 'w1:1']}
    """
    text = text.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ClusterConfigError(f"--cluster is not valid JSON ({e.msg}): {text!r}") from None
        try:
            return ClusterSpec(obj)
        except TypeError as e:
            raise ClusterConfigError(f"--cluster {text!r}: {e}") from None
    jobs = {}
    for part in filter(None, (s.strip() for s in text.replace(" ", ";").split(";"))):
        job, sep, addresses = part.partition("=")
        if not sep or not job or not addresses:
            raise ClusterConfigError(
                f"--cluster part {part!r} is not 'job=host:port[,host:port...]' (in {text!r})"
            )
        if job in jobs:
            raise ClusterConfigError(f"--cluster names job {job!r} twice (in {text!r})")
        jobs[job] = [a.strip() for a in addresses.split(",")]
    if not jobs:
        raise ClusterConfigError(f"--cluster {text!r} names no job")
    return ClusterSpec(jobs)


def _check_cluster(spec: ClusterSpec, where: str) -> None:
    for job, index, address in spec.tasks():
        _check_address(address, f"{where} task {job}:{index}")
    dups = spec.duplicate_addresses()
    if dups:
        address, names = next(iter(dups.items()))
        raise ClusterConfigError(
            f"{where}: address {address!r} is given to {', '.join(names)}; every task needs its own"
        )


def resolve_task(args: argparse.Namespace, environ=None) -> TFConfig:
    """The task to run, from flags, TF_CONFIG (in `environ`, default os.environ) or neither."""
    environ = os.environ if environ is None else environ
    classic = {j: getattr(args, f"{j}_hosts") for j in ("chief", "ps", "worker")}
    classic = {j: [a.strip() for a in v.split(",")] for j, v in classic.items() if v}
    if args.cluster and classic:
        raise ClusterConfigError("give --cluster or --chief/ps/worker_hosts, not both")
    if args.task_index is not None and args.task_index < 0:
        raise ClusterConfigError(f"--task_index {args.task_index} is negative")

    if args.cluster or classic:
        where = "--cluster" if args.cluster else "--*_hosts"
        spec = parse_cluster_flag(args.cluster) if args.cluster else ClusterSpec(classic)
        _check_cluster(spec, where)
        if not args.job_name:
            raise ClusterConfigError(f"{where} needs --job_name (one of: {', '.join(spec.jobs)})")
        base = TFConfig(cluster=spec, rpc_layer=args.protocol)
    elif environ.get("TF_CONFIG", "").strip():
        base = parse_tf_config(environ)
        if args.job_name is None and args.task_index is None:
            if base.task_type is None:
                raise ClusterConfigError(
                    'TF_CONFIG names no task (no "task": {"type": ..., "index": ...}); give '
                    "one there or pick one with --job_name/--task_index"
                )
            if not base.in_cluster:
                raise ClusterConfigError(
                    f"TF_CONFIG's task {base.task_name} is not in its cluster (an evaluator "
                    "runs a client, not a server); there is nothing for rill-server to serve"
                )
            return _with_protocol(base, args)
    else:
        if args.job_name not in (None, "localhost") or args.task_index not in (None, 0):
            raise ClusterConfigError(
                "--job_name/--task_index need a cluster: give --cluster or set TF_CONFIG"
            )
        port = args.port or 0
        spec = ClusterSpec({"localhost": [f"localhost:{port}"]})
        return TFConfig(cluster=spec, task_type="localhost", task_index=0,
                        rpc_layer=args.protocol or "grpc")  # fmt: skip

    job = args.job_name if args.job_name is not None else base.task_type
    index = args.task_index if args.task_index is not None else 0
    spec = base.cluster
    if job not in spec.jobs:
        raise ClusterConfigError(
            f"--job_name {job!r} is not a job of the cluster (jobs: {', '.join(spec.jobs)})"
        )
    if index not in spec.task_indices(job):
        raise ClusterConfigError(
            f"--task_index {index} is out of range for job {job!r} (its tasks: "
            f"{', '.join(map(str, spec.task_indices(job)))})"
        )
    return _with_protocol(TFConfig(cluster=spec, task_type=job, task_index=index,
                                   rpc_layer=base.rpc_layer, environment=base.environment,
                                   sparse=base.sparse), args)  # fmt: skip


def _with_protocol(config: TFConfig, args) -> TFConfig:
    protocol = args.protocol or config.rpc_layer or "grpc"
    if protocol != "grpc":
        raise ClusterConfigError(f"rpc layer {protocol!r} is not served by rill (only 'grpc')")
    if args.port is not None and not 0 < args.port < 65536:
        raise ClusterConfigError(f"--port {args.port} is not 1-65535")
    return TFConfig(cluster=config.cluster, task_type=config.task_type,
                    task_index=config.task_index, rpc_layer=protocol,
                    session_master=config.session_master, environment=config.environment,
                    sparse=config.sparse)  # fmt: skip


def _wait_resolvable(host: str, timeout: float) -> None:
    """Waits (bounded) until `host` resolves: a Kubernetes pod's own name appears in DNS only
    some time after the pod starts. Raises OSError naming the host after `timeout` seconds."""
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    deadline = time.monotonic() + timeout
    delay, logged = 0.1, 0.0
    while True:
        try:
            socket.getaddrinfo(host, None)
            return
        except OSError as e:
            now = time.monotonic()
            if now + delay > deadline:
                raise OSError(f"host name {host!r} does not resolve after {timeout:g} s "
                              f"(last error: {e})") from None  # fmt: skip
            if now - logged > 10.0:
                log.info("waiting for host name %r to resolve (%s)", host, e)
                logged = now
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _start_server(config: TFConfig, port: int | None, start_timeout: float = 120.0):
    from rill.distributed.server import Server

    if config.task_type == "localhost" and config.port == 0:
        return Server.create_local_server()
    _wait_resolvable(config.address.rpartition(":")[0], start_timeout)
    jobs = config.cluster.as_dict()
    if port is not None:  # listen on another port than the cluster says (behind a proxy)
        host = config.address.rpartition(":")[0]
        tasks = dict(enumerate(jobs[config.task_type])) if isinstance(
            jobs[config.task_type], list) else jobs[config.task_type]  # fmt: skip
        tasks[config.task_index] = f"{host}:{port}"
        jobs[config.task_type] = tasks
    return Server(jobs, job_name=config.task_type, task_index=config.task_index,
                  protocol="grpc", start=True)  # fmt: skip


def _watch_coordinator(config: TFConfig, grace: float, stop: threading.Event, why: list) -> None:
    """Sets `stop` once the coordinator, after answering at least once, has not answered for
    `grace` seconds: it has finished (or died and was not restarted within the grace)."""
    import grpc

    job, index = config.coordinator
    name, address = task_device_name(job, index), config.cluster.task_address(job, index)
    channel = grpc.insecure_channel(address)
    call = channel.unary_unary("/tensorflow.WorkerService/GetStatus")
    seen, last_answer = False, time.monotonic()
    try:
        while not stop.is_set():
            try:
                call(b"", timeout=1.0)
                answered = True
            except grpc.RpcError as e:
                answered = e.code() not in (grpc.StatusCode.UNAVAILABLE,
                                            grpc.StatusCode.DEADLINE_EXCEEDED)  # fmt: skip
            now = time.monotonic()
            if answered:
                if not seen:
                    log.info("coordinator %s at %s is up; this task ends when it is gone", name,
                             address)  # fmt: skip
                seen, last_answer = True, now
            elif seen and now - last_answer > grace:
                why.append(f"coordinator {name} at {address} gone for {grace:g} s: the job is "
                           "finished")  # fmt: skip
                stop.set()
                return
            stop.wait(1.0)
    finally:
        channel.close()


def _serve(server, task: str, parent_pid: int | None, config: TFConfig | None = None,
           exit_with_coordinator: float | None = None) -> int:  # fmt: skip
    """Waits for a signal, the parent's exit, the coordinator's end (when asked) or the server's
    end; then stops the server."""
    stop = threading.Event()
    why = []
    if exit_with_coordinator is not None and config is not None:
        me = (config.task_type, config.task_index)
        if config.coordinator is None or config.coordinator == me:
            log.info("%s: --exit_with_coordinator ignored: this task is the coordinator", task)
        else:
            threading.Thread(target=_watch_coordinator, daemon=True, name="coordinator-watch",
                             args=(config, exit_with_coordinator, stop, why)).start()  # fmt: skip

    def on_signal(signum, frame):
        why.append(signal.Signals(signum).name)
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.is_set():
            if _server_done(server):
                log.info("%s: the job is finished; exiting", task)
                return EXIT_OK
            if parent_pid is not None and os.getppid() != parent_pid:
                why.append(f"parent process {parent_pid} exited")
                break
            stop.wait(_POLL_S)
        log.info("%s: stopping (%s)", task, why[0] if why else "stop requested")
        t0 = time.monotonic()
        server.stop()
        server.join(timeout=30)
        log.info("%s: stopped in %.2f s", task, time.monotonic() - t0)
        return EXIT_OK
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _server_done(server) -> bool:
    """Whether the server has ended by itself (stopped from elsewhere: the job is over)."""
    return bool(server.join(timeout=0))


def main(argv: list[str] | None = None) -> int:
    """Runs `rill-server`; returns the exit status (0 stopped/finished, 1 failed, 2 bad config)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname).1s rill-server %(message)s",
        stream=sys.stderr,
    )
    try:
        config = resolve_task(args)
    except ClusterConfigError as e:
        print(f"rill-server: bad configuration: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    if args.check:
        print(config.describe(), flush=True)
        return EXIT_OK
    task = config.task_name or task_device_name("localhost", 0)
    for line in config.describe().splitlines():
        log.info("%s", line)
    try:
        server = _start_server(config, args.port, args.start_timeout)
    except Exception as e:  # a port in use, an unresolvable host: the task cannot run
        where = f" at {config.address}" if config.address else ""
        print(f"rill-server: {task}{where} failed to start: {type(e).__name__}: {e}",
              file=sys.stderr, flush=True)  # fmt: skip
        return EXIT_FAILED
    # What startup made (modules, the kernel registry, grpc) lives as long as the process: out of
    # the collector's reach, a full collection no longer walks it at every step's garbage.
    gc.freeze()
    # Printed whatever the log level: it gives the target, and local_cluster waits for it.
    print(f"rill-server {task}: serving at {server.target}", file=sys.stderr, flush=True)
    return _serve(server, task, args.parent_pid, config, args.exit_with_coordinator)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
