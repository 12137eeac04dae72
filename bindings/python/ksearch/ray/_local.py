"""A Ray cluster of several node processes on this machine: one head and a
node per GPU (each with its own CUDA_VISIBLE_DEVICES), or CPU-only nodes for
tests. Every process is started with `ray start --block` in a session of its
own, so stopping a node (or killing it, as a failure test does) ends exactly
the processes of that node and nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from ._actor import scrub_environment

__all__ = ["LocalCluster", "LocalNode"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))  # free on every address: Ray binds some ports on all of them
        return int(s.getsockname()[1])


def _session_pids(sid: int) -> List[int]:
    """Every process of session `sid` and their descendants (Linux /proc): a
    node's raylet, workers and agents stay in the session `ray start` was
    started in; libksearch's worker processes below an actor may start
    sessions of their own (the sandbox), so children are followed too."""
    parents: Dict[int, List[int]] = {}
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(d.name))  # field 4 of stat: the parent
        if int(fields[3]) == sid:  # field 6: the session
            found.append(int(d.name))
    out, todo = set(found), list(found)
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return sorted(out)


class LocalNode:
    """One `ray start --block` process and its session."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log: Path):
        self.name = name
        self.log_path = log
        self._log = open(log, "ab")
        # Its own session: the node's processes can be told apart and ended together.
        self.proc = subprocess.Popen(list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.sid = self.proc.pid

    def pids(self) -> List[int]:
        return _session_pids(self.sid)

    def kill(self) -> None:
        """As a machine that loses power: SIGKILL to every process of the node."""
        self._signal_all(signal.SIGKILL)
        self._reap(5)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL to whatever is left after `grace_s`."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.sid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self._reap(grace_s)
        self._signal_all(signal.SIGKILL)
        self._reap(5)
        self._log.close()

    def _signal_all(self, sig: int) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def _reap(self, timeout_s: float) -> None:
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(_alive(p) for p in self.pids()):
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class LocalCluster:
    """A head and further nodes on 127.0.0.1. Use as a context manager (or
    call stop()): every process it started is ended, also on errors.

        with LocalCluster(work_dir) as cluster:
            cluster.add_node("gpu1", env={"CUDA_VISIBLE_DEVICES": "1"}, num_gpus=1)
            ray.init(address=cluster.address)
    """

    def __init__(self, work_dir: os.PathLike, *, num_cpus: int = 1, num_gpus: int = 0,
                 resources: Optional[Dict[str, float]] = None, env: Optional[Mapping[str, str]] = None,
                 object_store_bytes: int = 80 * 1024 * 1024, head_env: Optional[Mapping[str, str]] = None,
                 ray_bin: Optional[str] = None):
        self.work_dir = Path(work_dir).resolve()
        # Ray puts Unix sockets under <work_dir>/ray/session_<time>_<pid>/sockets/; a longer
        # path than a socket address holds (107 bytes) makes the head fail to start.
        longest = len(str(self.work_dir / "ray")) + len("/session_2026-01-01_00-00-00_000000_4194304/sockets/plasma_store")
        if longest > 107:
            raise ValueError(f"LocalCluster: the work folder {str(self.work_dir)!r} is too long for Ray's socket "
                             f"paths ({longest} > 107 bytes under it); use one at most "
                             f"{len(str(self.work_dir)) - (longest - 107)} characters long")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ if env is None else env)
        # Nodes start without the driver's credentials: their actors (and the
        # candidates under them) never see an API key.
        scrub_environment(self.env)
        self.env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.env.setdefault("RAY_BACKEND_LOG_LEVEL", "warning")  # the raylets' info lines are noise here
        self.object_store_bytes = object_store_bytes
        # The `ray` script of the interpreter running this, not whichever is first in PATH.
        self.ray_bin = ray_bin or str(Path(sys.executable).with_name("ray"))
        if not Path(self.ray_bin).exists():
            self.ray_bin = "ray"
        self.nodes: Dict[str, LocalNode] = {}
        self.port = _free_port()
        # Loopback addresses other than 127.0.0.1, one per node: Ray replaces
        # 127.0.0.1 and localhost with the machine's outward address, but keeps
        # these, so every connection of the cluster stays on loopback.
        self.head_ip = "127.0.0.2"
        self.address = f"{self.head_ip}:{self.port}"
        try:
            self._start("head", ["--head", "--port", str(self.port), "--include-dashboard", "false",
                                 "--temp-dir", str(self.work_dir / "ray")],
                        num_cpus, num_gpus, resources, head_env)
            self.wait_for_nodes(1)
        except BaseException:
            self.stop()
            raise

    def add_node(self, name: str, *, num_cpus: int = 1, num_gpus: int = 0,
                 resources: Optional[Dict[str, float]] = None, env: Optional[Mapping[str, str]] = None,
                 wait: bool = True) -> LocalNode:
        if name in self.nodes:
            raise ValueError(f"a node named {name!r} is already in this cluster")
        node = self._start(name, ["--address", self.address], num_cpus, num_gpus, resources, env)
        if wait:
            self.wait_for_nodes(len(self.nodes))
        return node

    def _start(self, name: str, args: List[str], num_cpus: int, num_gpus: int,
               resources: Optional[Dict[str, float]], env: Optional[Mapping[str, str]]) -> LocalNode:
        ip = f"127.0.0.{2 + len(self.nodes)}"
        argv = [self.ray_bin, "start", "--block", *args, "--node-name", name, "--node-ip-address", ip,
                "--num-cpus", str(num_cpus), "--num-gpus", str(num_gpus),
                "--object-store-memory", str(self.object_store_bytes), "--disable-usage-stats",
                "--include-log-monitor", "false",
                # Fixed by default: two nodes on one machine need ports of their own.
                "--dashboard-agent-listen-port", str(_free_port()),
                "--dashboard-agent-grpc-port", str(_free_port()),
                "--runtime-env-agent-port", str(_free_port()),
                "--metrics-export-port", str(_free_port())]
        if resources:
            argv += ["--resources", json.dumps(resources)]
        node_env = dict(self.env)
        node_env.update(env or {})
        scrub_environment(node_env)
        node = LocalNode(name, argv, node_env, self.work_dir / f"{name}.log")
        self.nodes[name] = node
        return node

    def alive_nodes(self, timeout_s: float = 120.0) -> int:
        """Nodes the head counts as alive (asked with `ray` in a subprocess, so
        this process need not be connected); 0 when the head does not answer
        within timeout_s."""
        code = ("import ray, sys; ray.init(address=sys.argv[1], _node_ip_address=sys.argv[2], log_to_driver=False, logging_level='ERROR'); "
                "print(sum(1 for n in ray.nodes() if n['Alive']))")
        try:
            out = subprocess.run([sys.executable, "-c", code, self.address, self.head_ip], capture_output=True,
                                 text=True, env=self.env, timeout=timeout_s)
        except subprocess.TimeoutExpired:  # no head answering yet (or any more): the caller looks again
            return 0
        try:
            return int(out.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return 0

    def wait_for_nodes(self, count: int, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            for node in self.nodes.values():
                if node.proc.poll() is not None:
                    raise RuntimeError(f"ray node {node.name!r} exited ({node.proc.returncode}); see {node.log_path}")
            # Asked for at most 60 s at a time, so a node that exits meanwhile is seen.
            if self.alive_nodes(timeout_s=max(10.0, min(60.0, deadline - time.monotonic()))) >= count:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cluster at {self.address} did not reach {count} nodes in {timeout_s} s")
            time.sleep(0.5)

    def stop(self) -> None:
        """Stops the nodes, then the head (every process each of them started)."""
        for name in [n for n in self.nodes if n != "head"] + (["head"] if "head" in self.nodes else []):
            self.nodes[name].stop()

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
