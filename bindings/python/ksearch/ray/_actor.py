"""What runs on a cluster node: the device probe and the evaluation actor.

An EvalActor lives as long as the search: it owns one libksearch Evaluator
per set of evaluation settings (the search's and the final evaluation's), so
its worker process, NVRTC and the reference outputs stay warm, and it keeps
its cache folder on its node (compiled kernels, reference outputs). Nothing
here imports ray: the pool wraps the class with ray.remote, so this module
imports on machines without Ray too (and the probe is tested there).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import re
import socket
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

# Names of variables an actor drops from its environment before it
# evaluates anything: the driver's secrets never travel (the LLM runs on the
# driver), and a node started with a key in its environment keeps it out of
# the actor as well. The library's own worker scrubs candidates' environments
# again (docs/security.md); this is the layer before it.
_CREDENTIAL_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION",
                     "PRIVATE")

# Compiled artifacts in an evaluator's cache folder: host shared objects and
# NVRTC cubins (with their metadata), named by a digest of everything that
# changes the code (compiler version, architecture, options, source). A copy
# placed in another node's cache is a cache hit there only where all of that
# matches; anywhere else it is simply not found.
_ARTIFACT_DIRS = ("host", "cuda")
_ARTIFACT_SKIP = re.compile(r"(^|/)(pch|build-[^/]*)(/|$)|\.tmp")
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024  # per candidate: larger ones are compiled again instead of shipped


def scrub_environment(env: Optional[Dict[str, str]] = None) -> List[str]:
    """Removes credential-like variables from `env` (os.environ by default);
    returns their names."""
    env = os.environ if env is None else env
    gone = [k for k in list(env) if any(w in k.upper() for w in _CREDENTIAL_WORDS) and not k.startswith("RAY_")]
    for k in gone:
        del env[k]
    return gone


def _cuda_devices() -> Tuple[List[Dict[str, Any]], str]:
    """The GPUs this process sees (CUDA_VISIBLE_DEVICES applies), through the
    driver API with ctypes: name, compute capability, PCI bus id. Returns
    ([], why) where there is no usable driver."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return [], f"no CUDA driver ({e})"
    if cu.cuInit(0) != 0:
        return [], "cuInit failed (no GPU, or the driver does not match the kernel module)"
    count = ctypes.c_int(0)
    if cu.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return [], "cuDeviceGetCount failed"
    out = []
    for i in range(count.value):
        dev = ctypes.c_int(0)
        if cu.cuDeviceGet(ctypes.byref(dev), i) != 0:
            continue
        name = ctypes.create_string_buffer(256)
        cu.cuDeviceGetName(name, 256, dev)
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        cu.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # ..._MINOR
        bus = ctypes.create_string_buffer(64)
        cu.cuDeviceGetPCIBusId(bus, 64, dev)
        # The library's own naming (cuda_device.cpp): from Hopper on, the "a" targets.
        arch = f"sm_{major.value}{minor.value}{'a' if major.value >= 9 else ''}"
        out.append({"index": i, "name": name.value.decode(errors="replace"), "arch": arch,
                    "pci_bus_id": bus.value.decode(errors="replace")})
    return out, "" if out else "the CUDA driver sees no GPU"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def probe_node() -> Dict[str, Any]:
    """What evaluates on this node: its GPUs, and the host's CPU."""
    gpus, why = _cuda_devices()
    return {"hostname": socket.gethostname(), "machine": platform.machine(), "cpu": _cpu_model(),
            "cpus": os.cpu_count() or 1, "gpus": gpus, "cuda_problem": why,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def family_of(device: Dict[str, Any]) -> str:
    """The architecture family whose timings are comparable: the GPU's
    architecture (sm_90a), or host:<machine>:<CPU model> for host slots."""
    if device.get("backend") == "cuda":
        return str(device["arch"])
    return f"host:{device.get('machine', '')}:{device.get('cpu', '')}"


def _tree(root: Path) -> Dict[str, int]:
    files: Dict[str, int] = {}
    for sub in _ARTIFACT_DIRS:
        base = root / sub
        if not base.is_dir():
            continue
        for dirpath, _dirs, names in os.walk(base):
            for n in names:
                rel = os.path.relpath(os.path.join(dirpath, n), root)
                if not _ARTIFACT_SKIP.search(rel):
                    try:
                        files[rel] = os.stat(os.path.join(dirpath, n)).st_size
                    except OSError:
                        pass
    return files


def _safe_relpath(rel: str) -> bool:
    p = Path(rel)
    return (not p.is_absolute() and ".." not in p.parts and p.parts[:1] in (("host",), ("cuda",))
            and not _ARTIFACT_SKIP.search(rel))


class EvalActor:
    """One evaluation slot: a GPU (backend cuda) or a share of a host."""

    def __init__(self, slot: Dict[str, Any], settings: Dict[str, Any]):
        self.scrubbed = scrub_environment()
        self.slot = dict(slot)
        self.settings = dict(settings)
        node = probe_node()
        backend = settings.get("backend", "auto")
        gpus = node["gpus"]
        if backend == "cuda" and not gpus:
            raise RuntimeError(f"slot {slot.get('name')}: backend cuda but {node['cuda_problem']}")
        use_gpu = backend == "cuda" or (backend == "auto" and bool(gpus))
        if use_gpu:
            gpu = gpus[0]  # Ray gave this actor one GPU: the only one it sees
            self.device = {"backend": "cuda", "name": gpu["name"], "arch": gpu["arch"],
                           "pci_bus_id": gpu["pci_bus_id"], "machine": node["machine"]}
        else:
            self.device = {"backend": "host", "name": node["cpu"], "arch": node["machine"],
                           "machine": node["machine"], "cpu": node["cpu"]}
        self.family = family_of(self.device)
        self.node = node
        root = Path(settings.get("cache_dir") or os.environ.get("KSEARCH_CACHE_DIR") or
                    (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ksearch"))
        # Each slot has a cache folder of its own on its node: its reference
        # outputs and compiled kernels are computed here, once.
        self.cache_dir = root / "ray" / f"{slot['node_id'][:12]}-{slot['name']}"
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._tasks: Dict[str, Any] = {}
        self._evaluators: "OrderedDict[str, Any]" = OrderedDict()
        self.evaluations = 0

    def info(self) -> Dict[str, Any]:
        import ray
        ctx = ray.get_runtime_context()
        return {"slot": self.slot, "device": self.device, "family": self.family, "cache_dir": str(self.cache_dir),
                "pid": os.getpid(), "hostname": self.node["hostname"], "node_id": ctx.get_node_id(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "scrubbed_env": self.scrubbed}

    def ping(self) -> bool:
        return True

    # -- Evaluating ---------------------------------------------------------------
    def _task(self, task_json: str) -> Any:
        import ksearch
        key = hashlib.sha256(task_json.encode()).hexdigest()[:32]
        task = self._tasks.get(key)
        if task is None:
            # The task as the driver's library gave it, loaded from a file of
            # its own: no path of the driver's machine is needed here.
            path = self.cache_dir / "tasks" / key / "task.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(task_json)
            os.replace(tmp, path)
            task = self._tasks[key] = ksearch.load_task(str(path))
        return task

    def _evaluator(self, options: Dict[str, Any]) -> Any:
        import ksearch
        key = json.dumps(options, sort_keys=True)
        ev = self._evaluators.get(key)
        if ev is not None:
            self._evaluators.move_to_end(key)
            return ev
        s = self.settings
        fields: Dict[str, Any] = {"backend": self.device["backend"], "cache_dir": str(self.cache_dir),
                                  "options_json": key}
        for name in ("sandbox", "memory_limit_bytes", "compile_workers", "cuda_arch", "compile_timeout_s",
                     "run_timeout_s"):
            if s.get(name) is not None:
                fields[name] = s[name]
        ev = self._evaluators[key] = ksearch.Evaluator(**fields)
        # The search's settings and the final evaluation's: rarely more.
        while len(self._evaluators) > 3:
            self._evaluators.popitem(last=False)[1].close()
        return ev

    def evaluate(self, request: Dict[str, Any], artifacts: Optional[Dict[str, bytes]] = None) -> Dict[str, Any]:
        """Evaluates one candidate. `artifacts` (relative path -> bytes) are
        compiled kernels another slot of this family made for it; they go into
        this slot's cache first. Returns the result JSON, the artifacts this
        evaluation compiled (for other slots), and timings."""
        received = 0
        for rel, data in (artifacts or {}).items():
            if not _safe_relpath(rel):
                raise ValueError(f"refused artifact path {rel!r}: only files under host/ and cuda/ are accepted")
            dst = self.cache_dir / rel
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(dst.name + f".{os.getpid()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, dst)
                received += 1
        before = _tree(self.cache_dir)
        start = time.monotonic()
        task = self._task(request["task_json"])
        ev = self._evaluator(request["options"])
        result = ev.evaluate(task, request["solution_json"])
        eval_s = time.monotonic() - start
        self.evaluations += 1
        after = _tree(self.cache_dir)
        made = {rel: size for rel, size in after.items() if rel not in before}
        shipped: Dict[str, bytes] = {}
        if sum(made.values()) <= MAX_ARTIFACT_BYTES:
            for rel in made:
                try:
                    shipped[rel] = (self.cache_dir / rel).read_bytes()
                except OSError:
                    pass
        return {"result": result, "artifacts": shipped, "artifacts_received": received, "eval_s": eval_s,
                "evaluations": self.evaluations}

    def close(self) -> None:
        for ev in self._evaluators.values():
            ev.close()
        self._evaluators.clear()
        for t in self._tasks.values():
            t.close()
        self._tasks.clear()
