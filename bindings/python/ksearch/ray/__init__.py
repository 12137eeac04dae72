"""One search, evaluated on the GPUs of a Ray cluster.

    import ksearch, ksearch.ray

    res = ksearch.ray.run_search("gpumode/trimul", address="10.0.0.1:6379", backend="cuda",
                                 llm=ksearch.LlmOptions.openai("gpt-5.2"), parallel=8,
                                 budget={"max_rounds": 200})

The LLM, the search and its run folder stay on this machine (the driver);
every candidate goes to an actor on a cluster node (one per GPU), which
evaluates it with its own libksearch Evaluator and cache. Results name the
node and GPU that measured them (metrics "ray_node", "ray_gpu", ...), and the
run folder's ray.json records the slots used, those excluded (another
architecture family) and the candidates lost to dead nodes and retried.

`python3 -m ksearch.ray run --address ADDRESS --task ...` is the same from
the command line (the options of `ksearch run`), `... resume RUN_DIR` goes on
after the driver died, and `... gpus --address ADDRESS` lists the GPUs of
every node. docs/ray.md has the cluster set-up and the sizing rule.

Ray is needed on the driver and on every node (`pip install ray`); the rest
of the ksearch package works without it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Union

from ._actor import probe_node
from ._local import LocalCluster
from ._pool import NoEvaluatorError, RayEvaluator, connect, list_gpus

__all__ = ["RayEvaluator", "NoEvaluatorError", "LocalCluster", "connect", "list_gpus", "probe_node",
           "run_search", "resume_search", "default_run_dir", "RECORD_FILE"]

RECORD_FILE = "ray.json"  # in the run folder: the cluster this run evaluated on
_POOL_ARGS = ("backend", "host_slots", "family", "settings", "eval_options", "cache_dir", "max_attempts",
              "timeout_s", "straggler_factor", "max_slots")


def default_run_dir(task: str) -> str:
    """The folder the library would choose (runs/<task>-<UTC time>): known
    before the run, so ray.json can be written into it."""
    import ksearch
    import time
    with ksearch.load_task(task) as t:
        name = t.name
    safe = "".join(c if c.isalnum() or c == "-" else "_" for c in name)
    return os.path.join("runs", f"{safe}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")


def _with_record(pool: RayEvaluator, run_dir: Union[str, "os.PathLike[str]"], pool_args: Dict[str, Any],
                 event: Optional[Callable[..., Any]]) -> Callable[..., Any]:
    """An event listener that starts ray.json once the library has made
    the run folder (its first event), then passes events on."""
    pool.record["config"] = {k: v for k, v in pool_args.items() if k != "address"}
    seen = [False]

    def on_event(e: Any) -> Any:
        if not seen[0]:
            seen[0] = True
            pool.set_record_path(Path(run_dir) / RECORD_FILE)
        if event is not None:
            return event(e)
        return None
    return on_event


def run_search(task_or_options: Any = None, /, *, address: Optional[str] = None,
               pool: Optional[RayEvaluator] = None, event: Optional[Callable[..., Any]] = None,
               on_dispatch: Optional[Callable[..., Any]] = None, **fields: Any) -> Any:
    """ksearch.run_search with every candidate evaluated on the cluster at
    `address`. RayEvaluator's arguments (backend, host_slots, family,
    settings, eval_options, cache_dir, max_attempts, timeout_s,
    straggler_factor) may be given here; the other keywords are the search's.
    A `pool` given is used (and left open); otherwise one is made and closed."""
    import ksearch
    pool_args = {k: fields.pop(k) for k in _POOL_ARGS if k in fields}
    own = pool is None
    if pool is None:
        pool = RayEvaluator(address, on_dispatch=on_dispatch, **pool_args)
    try:
        opts = task_or_options.copy() if isinstance(task_or_options, ksearch.SearchOptions) else None
        task = opts.task if opts is not None else task_or_options
        run_dir = fields.get("run_dir") or (opts.run_dir if opts is not None else None)
        if not run_dir:
            if task is None:
                raise ValueError("run_search needs a task")
            run_dir = fields["run_dir"] = default_run_dir(os.fspath(task))
        eval_fields = fields.pop("eval", None)
        ev = ksearch.EvalOptions(**eval_fields) if isinstance(eval_fields, dict) else (
            eval_fields.copy() if eval_fields is not None else (opts.eval.copy() if opts is not None
                                                                else ksearch.EvalOptions()))
        ev.batch_callback = pool.batch_callback
        ev.callback_device_json = pool.device_json()
        fields["eval"] = ev
        pool_args.setdefault("backend", pool.backend)
        pool_args.setdefault("host_slots", pool.host_slots)
        pool_args["family"] = pool.family
        return ksearch.run_search(task_or_options, event=_with_record(pool, run_dir, pool_args, event), **fields)
    finally:
        if own:
            pool.close()


def read_record(run_dir: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    path = Path(run_dir) / RECORD_FILE
    try:
        record: Dict[str, Any] = json.loads(path.read_text())
        return record
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found: {run_dir} was not run on a Ray cluster by ksearch.ray "
                                "(resume it with `ksearch resume`, or pass the pool settings)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None


def resume_search(run_dir: Union[str, "os.PathLike[str]"], /, *, address: Optional[str] = None,
                  pool: Optional[RayEvaluator] = None, event: Optional[Callable[..., Any]] = None,
                  on_dispatch: Optional[Callable[..., Any]] = None, **fields: Any) -> Any:
    """ksearch.resume_search for a run made by run_search above (after the
    driver died, say): journalled candidates are not evaluated again, the
    rest go to the cluster with the settings ray.json recorded (keywords of
    RayEvaluator override them)."""
    import ksearch
    recorded = read_record(run_dir).get("config", {})
    pool_args = {k: fields.pop(k) if k in fields else recorded.get(k) for k in _POOL_ARGS}
    pool_args = {k: v for k, v in pool_args.items() if v is not None}
    own = pool is None
    if pool is None:
        pool = RayEvaluator(address, on_dispatch=on_dispatch, **pool_args)
    try:
        pool.record["resumed"] = pool.record.get("resumed", 0) + 1
        pool_args["family"] = pool.family
        return ksearch.resume_search(run_dir, eval_batch_callback=pool.batch_callback,
                                     event=_with_record(pool, run_dir, pool_args, event), **fields)
    finally:
        if own:
            pool.close()
