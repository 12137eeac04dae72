"""The driver's side: a pool of evaluation actors on a Ray cluster, as the
evaluator callbacks of a search (ksearch.search's eval.batch_callback).

Placement: one actor per GPU of every node (num_gpus=1, pinned to its node),
or, on nodes without GPUs or with backend "host", `host_slots` actors per
node. Actors whose architecture family is not the run's are stopped and
recorded as excluded: a run times on one family only.

Dispatch: a batch's candidates go to whichever actor is free, one at a time
per actor, so a slow actor holds one candidate, never the batch's others. A
candidate whose actor or node dies, or that runs past `timeout_s`, is sent
once more to another actor (`max_attempts` in all); lost every time, it is a
"crashed" result that says so, and the search goes on. When the queue is
empty and an actor is free while a candidate has run `straggler_factor`
times the median evaluation, a backup copy runs there and the first result
wins.
"""

from __future__ import annotations

import collections
import ipaddress
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from ._actor import EvalActor, family_of, probe_node

__all__ = ["connect", "list_gpus", "RayEvaluator", "NoEvaluatorError"]


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:  # the package works without Ray; this part needs it
        raise ImportError("ksearch.ray needs Ray: pip install ray (on the driver and on every node)") from e
    return ray


def connect(address: Optional[str] = None, **init_kwargs: Any) -> Any:
    """Connects this process to the cluster at `address` ("HOST:PORT", or
    "auto" for the one started on this machine) unless it already is."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    if address:
        host = address.rsplit(":", 1)[0].strip("[]")
        try:
            if ipaddress.ip_address(host).is_loopback:
                # A cluster on this machine's loopback (LocalCluster): this
                # driver's node is the head, at that address.
                init_kwargs.setdefault("_node_ip_address", host)
        except ValueError:
            pass
    init_kwargs.setdefault("namespace", "ksearch")
    init_kwargs.setdefault("logging_level", "WARNING")
    ray.init(address=address, **init_kwargs)
    return ray


def _alive_nodes(ray: Any) -> List[Dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive")]


def _pinned(ray: Any, node_id: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def list_gpus(address: Optional[str] = None, timeout_s: float = 120.0) -> List[Dict[str, Any]]:
    """The GPUs of every alive node as the node's own CUDA driver sees them
    (a probe task pinned to each node, holding all of its GPUs briefly), with
    what Ray counts and the node's CPU."""
    ray = connect(address)
    probe = ray.remote(probe_node)
    nodes = _alive_nodes(ray)
    refs = []
    for n in nodes:
        gpus = n.get("Resources", {}).get("GPU", 0)
        refs.append(probe.options(num_cpus=0, num_gpus=gpus, scheduling_strategy=_pinned(ray, n["NodeID"])).remote())
    out = []
    for n, ref in zip(nodes, refs):
        entry = {"node_id": n["NodeID"], "node_name": n.get("NodeName", ""), "ip": n.get("NodeManagerAddress", ""),
                 "ray_gpus": int(n.get("Resources", {}).get("GPU", 0)),
                 "accelerator_type": next((k.split(":", 1)[1] for k in n.get("Resources", {})
                                           if k.startswith("accelerator_type:")), None)}
        try:
            entry.update(ray.get(ref, timeout=timeout_s))
        except Exception as e:  # one node's failure is a line of the listing, not the end of it
            entry["error"] = f"{type(e).__name__}: {e}"
        out.append(entry)
    return out


class NoEvaluatorError(RuntimeError):
    """No actor is left to evaluate on (every slot died or was excluded)."""


class _Slot:
    """A place for an actor: a node and a GPU (or host share) on it."""

    def __init__(self, node: Dict[str, Any], name: str, gpu: bool):
        self.node_id: str = node["NodeID"]
        self.node_name: str = node.get("NodeName", "")
        self.ip: str = node.get("NodeManagerAddress", "")
        self.name = name
        self.gpu = gpu
        self.starts = 0
        self.actor: Any = None
        self.info: Optional[Dict[str, Any]] = None
        self.starting: Any = None  # the info() ref of an actor being started
        self.excluded: Optional[str] = None

    @property
    def key(self) -> str:
        return f"{self.node_id[:12]}/{self.name}"

    def describe(self) -> Dict[str, Any]:
        return {"slot": self.name, "node_id": self.node_id, "node_name": self.node_name, "ip": self.ip}


class RayEvaluator:
    """Evaluates a search's candidates on the actors of a Ray cluster.

        with RayEvaluator("127.0.0.1:6379", backend="cuda") as pool:
            res = ksearch.run_search(task, llm=..., parallel=8, eval=pool.eval_options())

    backend:        "cuda" (one actor per GPU), "host" (host_slots per node) or
                    "auto" (GPUs where a node has them, else host slots).
    family:         the architecture family to time on ("sm_90a", a GPU name,
                    or "host:..."); None: the family with the most actors
                    (GPU families before host ones).
    settings:       the actors' Evaluator fields (sandbox, memory_limit_bytes,
                    compile_workers, cuda_arch, compile_timeout_s, run_timeout_s).
    eval_options:   evaluation settings by name that win over what the search
                    asks (max_time_per_workload_s, seeds_per_workload, ...).
    cache_dir:      the cache root on every node (None: the node's
                    $KSEARCH_CACHE_DIR or ~/.cache/ksearch); each actor uses
                    <root>/ray/<node>-<slot>.
    max_slots:      use at most this many slots (the first by node name), e.g.
                    to compare one GPU with all.
    record_path:    a JSON file kept up to date with the slots in use, those
                    excluded and the candidates lost (the run folder's ray.json).
    on_dispatch:    called with (solution_id, slot description) as each
                    candidate is sent; for logs and tests.
    """

    def __init__(self, address: Optional[str] = None, *, backend: str = "auto", host_slots: int = 1,
                 family: Optional[str] = None, settings: Optional[Dict[str, Any]] = None,
                 eval_options: Optional[Dict[str, Any]] = None, cache_dir: Optional[str] = None,
                 max_attempts: int = 2, timeout_s: float = 1800.0, straggler_factor: float = 3.0,
                 max_restarts: int = 3, rescan_s: float = 30.0, start_timeout_s: float = 600.0,
                 max_slots: Optional[int] = None,
                 record_path: Optional[os.PathLike] = None,
                 on_dispatch: Optional[Callable[[str, Dict[str, Any]], Any]] = None,
                 log: Optional[Callable[[str], Any]] = None):
        if backend not in ("auto", "cuda", "host"):
            raise ValueError(f"backend must be auto, cuda or host, not {backend!r}")
        for name, v, low in (("host_slots", host_slots, 1), ("max_attempts", max_attempts, 1),
                             ("max_restarts", max_restarts, 0), ("max_slots", 1 if max_slots is None else max_slots, 1)):
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"{name} must be an integer of at least {low}, is {v!r}")
        for name, f in (("timeout_s", timeout_s), ("start_timeout_s", start_timeout_s), ("rescan_s", rescan_s)):
            if not (isinstance(f, (int, float)) and f > 0):
                raise ValueError(f"{name} must be a positive number of seconds, is {f!r}")
        if not (isinstance(straggler_factor, (int, float)) and straggler_factor >= 0):
            raise ValueError(f"straggler_factor must be >= 0 (0: no backup copies), is {straggler_factor!r}")
        self.address = address
        self.backend = backend
        self.host_slots = host_slots
        self.family = family
        self.settings = dict(settings or {})
        self.settings["backend"] = backend
        self.settings["cache_dir"] = cache_dir
        self.eval_options = dict(eval_options or {})
        self.max_attempts = max_attempts
        self.timeout_s = float(timeout_s)
        self.straggler_factor = float(straggler_factor)
        self.max_restarts = max_restarts
        self.max_slots = max_slots
        self.rescan_s = float(rescan_s)
        self.start_timeout_s = float(start_timeout_s)
        self.record_path = Path(record_path) if record_path else None
        self.on_dispatch = on_dispatch
        self.log = log or (lambda msg: print(f"ksearch.ray: {msg}", file=sys.stderr, flush=True))
        self._slots: Dict[str, _Slot] = {}
        self._free: Deque[str] = collections.deque()
        self._busy_elsewhere: Dict[Any, str] = {}  # refs of abandoned copies -> slot key
        self._artifacts: "collections.OrderedDict[str, Tuple[str, str, Dict[str, bytes]]]" = collections.OrderedDict()
        self._artifact_bytes = 0
        self._durations: Deque[float] = collections.deque(maxlen=64)
        self._last_scan = 0.0
        self._lock = threading.Lock()
        self.record: Dict[str, Any] = {"address": address, "backend": backend, "family": family, "slots": [],
                                       "excluded": [], "lost": [], "backups": 0, "artifacts_shipped": 0}
        self._ray = connect(address)
        self._actor_cls = self._ray.remote(EvalActor)
        try:
            self._scan(wait=True)
        except BaseException:
            self.close()
            raise

    # -- Slots and actors -------------------------------------------------------------
    def _expected_slots(self) -> List[_Slot]:
        out: List[_Slot] = []
        # By node name: with max_slots, the same nodes are chosen every time.
        for n in sorted(_alive_nodes(self._ray), key=lambda n: (n.get("NodeName", ""), n["NodeID"])):
            gpus = int(n.get("Resources", {}).get("GPU", 0))
            if self.backend != "host" and gpus > 0:
                out += [_Slot(n, f"gpu{i}", True) for i in range(gpus)]
            elif self.backend != "cuda":
                out += [_Slot(n, f"host{i}", False) for i in range(self.host_slots)]
        return out[:self.max_slots] if self.max_slots else out

    def _start(self, slot: _Slot) -> None:
        slot.starts += 1
        opts: Dict[str, Any] = {"num_cpus": 0, "num_gpus": 1 if slot.gpu else 0, "max_restarts": 0,
                                "scheduling_strategy": _pinned(self._ray, slot.node_id)}
        slot.actor = self._actor_cls.options(**opts).remote(
            {"name": slot.name, "node_id": slot.node_id, "node_name": slot.node_name, "ip": slot.ip}, self.settings)
        slot.info = None
        slot.starting = slot.actor.info.remote()

    def _scan(self, wait: bool = False) -> None:
        """Starts actors for slots without one: new nodes and GPUs, and slots
        whose actor died on a node that is still alive."""
        self._last_scan = time.monotonic()
        alive = set()
        for s in self._expected_slots():
            alive.add(s.key)
            known = self._slots.get(s.key)
            if known is None:
                self._slots[s.key] = known = s
            if known.actor is None and known.excluded is None and known.starts <= self.max_restarts:
                self._start(known)
        for key, s in self._slots.items():
            if key not in alive and s.actor is not None:  # its node is gone
                self._drop(s, "its node is no longer alive")
        if wait:
            deadline = time.monotonic() + self.start_timeout_s
            while any(s.starting is not None for s in self._slots.values()):
                self._absorb_started(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                if time.monotonic() > deadline:
                    for s in self._slots.values():
                        if s.starting is not None:
                            self._exclude(s, f"did not start within {self.start_timeout_s:.0f} s")
                    break
            if not self._free:
                reasons = "; ".join(f"{e['slot']} on {e['node_name'] or e['node_id'][:12]}: {e['why']}"
                                    for e in self.record["excluded"]) or "the cluster has no node with a slot"
                raise NoEvaluatorError(f"no evaluation actor could start on the cluster at {self.address}: {reasons}")
        self._write_record()

    def _absorb_started(self, timeout: float) -> None:
        starting = {s.starting: s for s in self._slots.values() if s.starting is not None}
        if not starting:
            return
        ready, _ = self._ray.wait(list(starting), num_returns=len(starting), timeout=timeout)
        for ref in ready:
            s = starting[ref]
            s.starting = None
            try:
                s.info = self._ray.get(ref)
            except Exception as e:
                self._exclude(s, f"the actor failed to start: {_short(e)}")
                continue
            self._admit(s)

    def _admit(self, s: _Slot) -> None:
        info = s.info or {}
        fam = info.get("family", "")
        if self.family is None:
            self.family = self._choose_family(s)
            self.record["family"] = self.family
        if not self._family_matches(info):
            self._exclude(s, f"architecture family {fam} ({info.get('device', {}).get('name')}) is not the run's "
                             f"{self.family}")
            return
        self.record["slots"].append({**s.describe(), "device": info.get("device"), "family": fam,
                                     "gpu_ids": info.get("gpu_ids"), "cache_dir": info.get("cache_dir"),
                                     "pid": info.get("pid"), "started": time.time()})
        if info.get("scrubbed_env"):
            # Removed from the actor's variables, but still in its process's
            # initial environment (/proc/PID/environ): start nodes without them.
            self.record.setdefault("credentials_on_nodes", []).append(
                {**s.describe(), "names": info["scrubbed_env"]})
            self.log(f"node {s.node_name or s.node_id[:12]} was started with credentials in its environment "
                     f"({', '.join(info['scrubbed_env'])}); start it with `python3 -m ksearch.ray node` instead")
        self._free.append(s.key)

    def _choose_family(self, first: _Slot) -> str:
        """The family with most actors among those started by now (GPU ones
        first); called once, when the first actor is ready."""
        # Give the others a moment: the choice should see the whole cluster.
        pending = [s.starting for s in self._slots.values() if s.starting is not None]
        if pending:
            self._ray.wait(pending, num_returns=len(pending), timeout=min(60.0, self.start_timeout_s))
        counts: Dict[str, int] = collections.Counter()
        gpu_family = {}
        for s in self._slots.values():
            info = s.info
            if info is None and s.starting is not None:
                try:
                    info = self._ray.get(s.starting, timeout=0)
                except Exception:
                    info = None
            if info:
                counts[info["family"]] += 1
                gpu_family[info["family"]] = info["device"]["backend"] == "cuda"
        if not counts:
            return str((first.info or {}).get("family", ""))
        return max(sorted(counts), key=lambda f: (gpu_family.get(f, False), counts[f]))

    def _family_matches(self, info: Dict[str, Any]) -> bool:
        dev = info.get("device", {})
        return self.family in (info.get("family"), dev.get("name"))

    def _exclude(self, s: _Slot, why: str) -> None:
        s.excluded = why
        if s.actor is not None:
            self._kill(s)
        self.record["excluded"].append({**s.describe(), "why": why,
                                        "device": (s.info or {}).get("device"), "family": (s.info or {}).get("family")})
        self.log(f"slot {s.name} on node {s.node_name or s.node_id[:12]} not used: {why}")

    def _kill(self, s: _Slot) -> None:
        try:
            self._ray.kill(s.actor, no_restart=True)
        except Exception:
            pass
        s.actor = None
        s.starting = None
        if s.key in self._free:
            self._free.remove(s.key)

    def _drop(self, s: _Slot, why: str) -> None:
        """The slot's actor is gone (died, or killed for a hang)."""
        self._kill(s)
        for rec in self.record["slots"]:
            if rec["node_id"] == s.node_id and rec["slot"] == s.name and "ended" not in rec:
                rec["ended"], rec["why"] = time.time(), why

    def slots(self) -> List[Dict[str, Any]]:
        """The slots in use now."""
        return [{**s.describe(), **(s.info or {})} for s in self._slots.values() if s.actor is not None and s.info]

    def device_json(self) -> Dict[str, Any]:
        """Where the search evaluates, for its prompts and manifest."""
        live = [s.info for s in self._slots.values() if s.actor is not None and s.info]
        dev = (live[0] if live else {}).get("device", {})
        return {"backend": dev.get("backend", "callback"), "name": dev.get("name", ""),
                "arch": dev.get("arch", ""), "count": len(live)}

    # -- Evaluating ---------------------------------------------------------------------
    def eval_options(self) -> Dict[str, Any]:
        """The search's `eval` fields that hand every candidate to this pool."""
        return {"batch_callback": self.batch_callback, "callback_device_json": self.device_json()}

    def callback(self, request: Any) -> Dict[str, Any]:
        return self.batch_callback([request])[0]

    def batch_callback(self, requests: Sequence[Any]) -> List[Dict[str, Any]]:
        with self._lock:
            return self._evaluate_all(list(requests))

    def _request(self, r: Any) -> Dict[str, Any]:
        options = json.loads(r.options_json or "{}")
        options.update(self.eval_options)  # the run's own settings win over the callback's defaults
        return {"task_json": r.task_json, "solution_json": r.solution_json, "solution_id": r.solution_id,
                "options": options}

    def _evaluate_all(self, requests: List[Any]) -> List[Dict[str, Any]]:
        ray = self._ray
        items = [self._request(r) for r in requests]
        n = len(items)
        results: List[Optional[Dict[str, Any]]] = [None] * n
        lost: List[List[Dict[str, Any]]] = [[] for _ in range(n)]
        pending: Deque[int] = collections.deque(range(n))
        inflight: Dict[Any, Tuple[int, str, float, bool]] = {}  # ref -> (index, slot key, start, backup)
        backed_up: set = set()
        while any(r is None for r in results):
            self._housekeeping(inflight)
            while pending and self._free:
                i = pending.popleft()
                if results[i] is None:
                    self._dispatch(i, items[i], inflight, backup=False)
            self._maybe_backup(items, results, pending, inflight, backed_up)
            if not inflight:
                if pending and not self._free:
                    self._wait_for_a_slot(pending, items, results, lost)
                continue
            waiting = list(inflight) + [s.starting for s in self._slots.values() if s.starting is not None]
            ready, _ = ray.wait(waiting, num_returns=1, timeout=1.0)
            for ref in ready:
                if ref in inflight:
                    self._finish(ref, inflight, items, results, lost, pending)
            now = time.monotonic()
            for ref, (i, key, started, _b) in list(inflight.items()):
                if now - started > self.timeout_s:
                    del inflight[ref]
                    s = self._slots[key]
                    self._drop(s, f"no result after {self.timeout_s:g} s")
                    self._lose(i, s, f"no result after {self.timeout_s:g} s (actor stopped)", items, results,
                               lost, pending, inflight)
        self._write_record()
        return [r for r in results if r is not None]

    def _dispatch(self, i: int, item: Dict[str, Any], inflight: Dict[Any, Tuple[int, str, float, bool]],
                  backup: bool) -> None:
        key = self._free.popleft()
        s = self._slots[key]
        artifacts = None
        stored = self._artifacts.get(item["solution_id"])
        if stored and stored[0] == self.family and stored[1] != key:
            artifacts = stored[2]  # compiled for this family elsewhere: no second compilation
            self.record["artifacts_shipped"] += len(artifacts)
        if self.on_dispatch is not None:
            self.on_dispatch(item["solution_id"], {**s.describe(), "backup": backup})
        ref = s.actor.evaluate.remote(item, artifacts)
        inflight[ref] = (i, key, time.monotonic(), backup)

    def _finish(self, ref: Any, inflight: Dict[Any, Tuple[int, str, float, bool]], items: List[Dict[str, Any]],
                results: List[Optional[Dict[str, Any]]], lost: List[List[Dict[str, Any]]], pending: Deque[int]) -> None:
        ray = self._ray
        i, key, started, backup = inflight.pop(ref)
        s = self._slots[key]
        try:
            out = ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            # The actor is alive but its evaluator raised (not a candidate's
            # failure: those are results). Another node may not share the problem.
            self._free.append(key)
            self._lose(i, s, f"the evaluator raised: {_short(e)}", items, results, lost, pending, inflight,
                       fatal=True)
            return
        except Exception as e:  # the actor or its node died (RayActorError, ObjectLostError, ...)
            self._drop(s, f"{type(e).__name__}")
            self._lose(i, s, f"{type(e).__name__}: {_short(e)}", items, results, lost, pending, inflight)
            return
        self._free.append(key)
        if results[i] is not None:
            return  # a backup copy's twin finished first
        self._durations.append(float(out.get("eval_s", 0.0)))
        if out.get("artifacts"):
            self._keep_artifacts(items[i]["solution_id"], key, out["artifacts"])
        result = out["result"]
        metrics = result.setdefault("metrics", {})
        info = s.info or {}
        metrics.update({"ray_node": s.node_name or s.ip, "ray_node_id": s.node_id, "ray_node_ip": s.ip,
                        "ray_slot": s.name, "ray_gpu": ",".join(info.get("gpu_ids") or []) or None,
                        "ray_family": info.get("family"), "ray_attempts": len(lost[i]) + 1,
                        "ray_eval_s": round(float(out.get("eval_s", 0.0)), 4),
                        "ray_artifacts_received": int(out.get("artifacts_received", 0))})
        if backup:
            metrics["ray_backup"] = True
        if lost[i]:
            metrics["ray_lost"] = lost[i]
        results[i] = result
        # The twin still running keeps its actor busy until it ends.
        for other, (j, okey, _t, _b) in list(inflight.items()):
            if j == i:
                del inflight[other]
                self._busy_elsewhere[other] = okey

    def _lose(self, i: int, s: _Slot, why: str, items: List[Dict[str, Any]], results: List[Optional[Dict[str, Any]]],
              lost: List[List[Dict[str, Any]]], pending: Deque[int], inflight: Dict[Any, Tuple[int, str, float, bool]],
              fatal: bool = False) -> None:
        sid = items[i]["solution_id"]
        entry = {"node": s.node_name or s.ip, "node_id": s.node_id, "slot": s.name, "why": why, "time": time.time()}
        lost[i].append(entry)
        self.record["lost"].append({"solution_id": sid, **entry})
        self.log(f"candidate {sid} lost on {s.node_name or s.node_id[:12]}/{s.name}: {why}")
        if results[i] is not None or any(j == i for (j, _k, _t, _b) in inflight.values()):
            return  # another copy is running or done
        if len(lost[i]) < self.max_attempts:
            pending.appendleft(i)  # first in line for the next free actor
            return
        if fatal:
            raise RuntimeError(f"evaluating {sid} failed on {len(lost[i])} actors: "
                               + "; ".join(f"{e['node']}/{e['slot']}: {e['why']}" for e in lost[i]))
        results[i] = {"status": "crashed",
                      "log": (f"the evaluation was lost {len(lost[i])} times (its actor or node died or hung): "
                              + "; ".join(f"{e['node']}/{e['slot']}: {e['why']}" for e in lost[i])
                              + ". The candidate may bring its node down."),
                      "metrics": {"ray_attempts": len(lost[i]), "ray_lost": lost[i]}}

    def _maybe_backup(self, items: List[Dict[str, Any]], results: List[Optional[Dict[str, Any]]], pending: Deque[int],
                      inflight: Dict[Any, Tuple[int, str, float, bool]], backed_up: set) -> None:
        if pending or not self._free or not self.straggler_factor or len(self._durations) < 3:
            return
        limit = max(5.0, self.straggler_factor * statistics.median(self._durations))
        now = time.monotonic()
        for ref, (i, key, started, backup) in list(inflight.items()):
            if not self._free:
                return
            if backup or i in backed_up or results[i] is not None or now - started < limit:
                continue
            backed_up.add(i)
            self.record["backups"] += 1
            self.log(f"candidate {items[i]['solution_id']} has run {now - started:.0f} s on "
                     f"{self._slots[key].node_name}/{self._slots[key].name}: a backup copy starts on a free actor")
            self._dispatch(i, items[i], inflight, backup=True)

    def _housekeeping(self, inflight: Dict[Any, Tuple[int, str, float, bool]]) -> None:
        self._absorb_started(timeout=0)
        if self._busy_elsewhere:
            ready, _ = self._ray.wait(list(self._busy_elsewhere), num_returns=len(self._busy_elsewhere), timeout=0)
            for ref in ready:
                key = self._busy_elsewhere.pop(ref)
                s = self._slots.get(key)
                try:
                    self._ray.get(ref)
                    if s is not None and s.actor is not None and key not in self._free:
                        self._free.append(key)
                except Exception:
                    if s is not None:
                        self._drop(s, "died while finishing an abandoned copy")
        if time.monotonic() - self._last_scan > self.rescan_s:
            self._scan()

    def _wait_for_a_slot(self, pending: Deque[int], items: List[Dict[str, Any]],
                         results: List[Optional[Dict[str, Any]]], lost: List[List[Dict[str, Any]]]) -> None:
        """Nothing in flight, nothing free: wait for a replacement actor."""
        deadline = time.monotonic() + self.start_timeout_s
        while not self._free:
            if not any(s.starting is not None for s in self._slots.values()) and not self._busy_elsewhere:
                self._scan()
                if not any(s.starting is not None for s in self._slots.values()):
                    raise NoEvaluatorError(
                        f"no evaluation actor is left on the cluster at {self.address} "
                        f"(lost: {len(self.record['lost'])}, excluded: {len(self.record['excluded'])}); "
                        "the run stops here and can be resumed once nodes are back")
            self._absorb_started(timeout=1.0)
            self._housekeeping({})
            if time.monotonic() > deadline:
                raise NoEvaluatorError(f"no evaluation actor became free within {self.start_timeout_s:.0f} s")

    def _keep_artifacts(self, solution_id: str, key: str, files: Dict[str, bytes]) -> None:
        size = sum(len(b) for b in files.values())
        self._artifacts[solution_id] = (self.family or "", key, files)
        self._artifact_bytes += size
        while self._artifact_bytes > 256 * 1024 * 1024 and self._artifacts:
            _sid, (_f, _k, old) = self._artifacts.popitem(last=False)
            self._artifact_bytes -= sum(len(b) for b in old.values())

    def _write_record(self) -> None:
        if self.record_path is None:
            return
        try:
            self.record_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.record_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.record, indent=1, default=str))
            os.replace(tmp, self.record_path)
        except OSError as e:
            self.log(f"could not write {self.record_path}: {e}")

    def set_record_path(self, path: os.PathLike) -> None:
        """Writes the record to `path` from now on; what an earlier driver
        wrote there (a run resumed) is kept under "earlier"."""
        self.record_path = Path(path)
        try:
            old = json.loads(self.record_path.read_text())
            self.record["earlier"] = old.pop("earlier", []) + [old]
        except (OSError, ValueError):
            pass
        self._write_record()

    def close(self) -> None:
        """Stops every actor of this pool."""
        for s in getattr(self, "_slots", {}).values():
            if s.actor is not None:
                self._kill(s)

    def __enter__(self) -> "RayEvaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _short(e: BaseException, limit: int = 600) -> str:
    text = str(e).strip().replace("\n", " | ")
    return text if len(text) <= limit else text[:limit] + "..."
