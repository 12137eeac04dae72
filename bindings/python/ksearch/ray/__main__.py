"""python3 -m ksearch.ray run|resume|gpus: `ksearch run` on a Ray cluster.

    python3 -m ksearch.ray run --address 10.0.0.1:6379 --task gpumode/trimul --model gpt-5.2 --parallel 8
    python3 -m ksearch.ray resume runs/gpumode_trimul-20261127-101500 --address 10.0.0.1:6379
    python3 -m ksearch.ray gpus --address 10.0.0.1:6379
    python3 -m ksearch.ray node --head --port 6379           (on the head machine)
    python3 -m ksearch.ray node --address 10.0.0.1:6379      (on every other machine)

`run` takes the options of `ksearch run` that the C ABI carries (every
setting of the library's table among them: --tune-batch, --wm-propose-every,
..., docs/options.md), plus the cluster's.
Exit status as `ksearch run`: 0 a passing kernel, 1 error, 2 usage error,
3 no passing kernel, 5 a replay diverged, 130 interrupted (resumable).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
from typing import Any, Dict, List, Optional

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NO_PASS, EXIT_DIVERGED, EXIT_INTERRUPTED = 0, 1, 2, 3, 5, 130


class UsageError(Exception):
    pass


def _size(text: str, opt: str) -> int:
    """4M, 512K, 2G, 8GiB (binary units), as the C++ CLI reads sizes."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)(I?B?)\s*", text.upper())
    if not m:
        raise UsageError(f"{opt} needs a size such as 4M, 512K or 2G (binary units), got {text!r}")
    value = float(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ")
    if not math.isfinite(value) or value < 1:
        raise UsageError(f"{opt} needs a size of at least 1 byte, got {text!r}")
    return int(value)


def _number(kind: Any, zero_ok: bool) -> Any:
    """An argparse type: a finite `kind` above 0 (or at least 0 with zero_ok)."""
    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"needs a {kind.__name__}, got {text!r}") from None
        if (v < 0 if zero_ok else not v > 0) or (isinstance(v, float) and not math.isfinite(v)):
            raise argparse.ArgumentTypeError(f"must {'not be negative' if zero_ok else 'be positive'}, got {text!r}")
        return v
    return parse


def _positive(kind: Any) -> Any:
    return _number(kind, zero_ok=False)


def _nonneg(kind: Any) -> Any:
    return _number(kind, zero_ok=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2 with the reason, as the C++ CLI does
        raise UsageError(message)


def _cluster_args(p: argparse.ArgumentParser, resume: bool = False) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--address", default=os.environ.get("RAY_ADDRESS"),
                   help="The Ray cluster: HOST:PORT of its head, or auto (the one on this machine). "
                        "Default: $RAY_ADDRESS.")
    g.add_argument("--host-slots", type=_positive(int),
                   help="Actors per node where candidates run on the host (backend host, or a node without GPUs). "
                        "Default: 1" + (", or as recorded" if resume else "") + ".")
    g.add_argument("--family", help="The architecture family to time on: an arch (sm_90a), a GPU name, or "
                                    "host:MACHINE:CPU. Actors of another family are not used. Default: the family "
                                    "with the most actors, GPUs before hosts" + (", or as recorded" if resume else "")
                                    + ".")
    g.add_argument("--max-slots", type=_positive(int),
                   help="Use at most this many actors (GPUs or host slots), the first by node name. Default: all"
                        + (", or as recorded" if resume else "") + ".")
    g.add_argument("--eval-timeout", type=_positive(float), dest="timeout_s",
                   help="Seconds one evaluation may take before its actor is stopped and the candidate goes to "
                        "another (a hang guard). Default: 1800.")
    g.add_argument("--max-attempts", type=_positive(int),
                   help="Actors a candidate may be lost on (a node or actor that dies, or a timeout) before it is "
                        "a crashed result. Default: 2 (one retry elsewhere).")
    g.add_argument("--straggler-factor", type=_nonneg(float),
                   help="When nothing waits and an actor is free, a candidate running this many times the median "
                        "evaluation time gets a backup copy there; the first result wins. 0: never. Default: 3.")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python3 -m ksearch.ray", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="Search for a fast kernel, evaluating on the cluster (the options of `ksearch run`).")
    r.add_argument("--task", required=True, help="Built-in task (see `ksearch tasks`) or a task file / folder.")
    r.add_argument("--kernelbench", help="A KernelBench checkout (its problems as tasks).")
    r.add_argument("--model", help="Model name sent to the endpoint.")
    r.add_argument("--base-url", help="OpenAI-compatible endpoint. Default: https://api.openai.com/v1.")
    r.add_argument("--llm", default="openai", help="openai, replay:TRANSCRIPT, command:PROGRAM ARGS or offline.")
    r.add_argument("--on-divergence", choices=["stop", "skip"], help="With --llm replay:.")
    r.add_argument("--language", choices=["cuda", "cpp", "triton", "python"],
                   help="Kernel language. Default: the task's only language; cuda for a task with several.")
    r.add_argument("--strategy", choices=["world_model", "greedy", "evolve", "tune"],
                   help="Default: world_model (tune with --llm offline).")
    r.add_argument("--max-rounds", type=_positive(int), help="Round budget. Default: 20.")
    r.add_argument("--continue-from-solution", help="Start the world-model search from this kernel.")
    r.add_argument("--continue-from-world-model", help="FILE, RUN or auto: start from another run's tree.")
    r.add_argument("--no-starting-point", action="store_true")
    r.add_argument("--remeasure", action="store_true")
    r.add_argument("--wm-stagnation-window", type=_positive(int))
    r.add_argument("--wm-max-difficulty", type=_positive(int))
    r.add_argument("--wm-lenient-edits", action="store_true")
    r.add_argument("--parallel", type=_positive(int), help="Candidates generated and evaluated at once. Default: 1.")
    r.add_argument("--tune-rounds", type=_nonneg(int))
    for flag in ("islands", "island-size", "migration-interval", "archive-size", "inspirations"):
        r.add_argument(f"--evolve-{flag}", type=_positive(int), help="evolve: as `ksearch run`'s.")
    r.add_argument("--evolve-migration-size", type=_nonneg(int), help="evolve: as `ksearch run`'s.")
    r.add_argument("--evolve-exploit-ratio", type=_nonneg(float), help="evolve: as `ksearch run`'s (0 to 1).")
    r.add_argument("--run-dir", help="Run folder (must not hold a run). Default: runs/<task>-<UTC time>.")
    r.add_argument("--seed", type=_nonneg(int))
    r.add_argument("--api", choices=["chat", "responses"])
    r.add_argument("--reasoning-effort")
    r.add_argument("--api-key-env", help="Variable holding the API key (read here, on the driver, only).")
    r.add_argument("--temperature", type=_nonneg(float))
    r.add_argument("--max-output-tokens", type=_positive(int))
    r.add_argument("--header", action="append", default=[], help="'Name: value' for every request. May be repeated.")
    r.add_argument("--request-timeout", type=_positive(float))
    r.add_argument("--connect-timeout", type=_positive(float))
    r.add_argument("--proxy")
    r.add_argument("--max-retries", type=_nonneg(int))
    r.add_argument("--max-concurrency", type=_positive(int))
    r.add_argument("--max-cost", type=_nonneg(float))
    r.add_argument("--price-file")
    r.add_argument("--max-wall-time", type=_nonneg(float))
    r.add_argument("--backend", choices=["auto", "cuda", "host"], default="auto",
                   help="cuda: one actor per GPU; host: --host-slots per node; auto: GPUs where there are any.")
    r.add_argument("--cache-dir", help="The cache root on every node (each actor uses ROOT/ray/<node>-<slot>). "
                                       "Default: the node's $KSEARCH_CACHE_DIR or ~/.cache/ksearch.")
    r.add_argument("--cuda-arch", help="NVRTC target, e.g. sm_90a. Default: each actor's GPU's.")
    r.add_argument("--sandbox", choices=["auto", "on", "off"])
    r.add_argument("--memory-limit", help="Address-space limit of the worker for host candidates, e.g. 8G.")
    r.add_argument("--max-answer-size", help="Longest LLM answer accepted, e.g. 4M.")
    r.add_argument("--timing-cap", type=_positive(float), help="Longest time timing one workload. Default: 2.")
    r.add_argument("--seeds", type=int, help="Input seeds checked per workload (2 to 64). Default: 2.")
    r.add_argument("--baseline-latencies", help="Baseline latencies per card, a JSON file.")
    r.add_argument("--no-weak-check", action="store_true")
    r.add_argument("--quiet", action="store_true", help="Print only the final summary.")
    r.add_argument("--json", action="store_true", help="Print the outcome as one JSON document on stdout.")
    _setting_args(r)
    _cluster_args(r)

    s = sub.add_parser("resume", help="Continue a run folder made by `run` (after the driver died, say).")
    s.add_argument("run_dir")
    s.add_argument("--max-rounds", type=_positive(int), help="The run's total round budget.")
    s.add_argument("--llm", help="Answer new prompts with another source (e.g. replay:FILE). Default: as recorded.")
    s.add_argument("--model")
    s.add_argument("--base-url")
    s.add_argument("--api", choices=["chat", "responses"])
    s.add_argument("--api-key-env")
    s.add_argument("--quiet", action="store_true")
    s.add_argument("--json", action="store_true")
    _cluster_args(s, resume=True)

    sub.add_parser("node", help="Start this machine's Ray node for libksearch: `ray start --block ARGS` with "
                                "credential variables (API keys, tokens) removed from its environment, so no actor "
                                "or candidate can read them. Every argument after `node` goes to `ray start`.")
    gp = sub.add_parser("gpus", help="List the GPUs (and CPU) of every node of the cluster.")
    gp.add_argument("--address", default=os.environ.get("RAY_ADDRESS"), help="Default: $RAY_ADDRESS.")
    gp.add_argument("--json", action="store_true")
    return p


_SETTING = "setting_"  # the dest prefix of the flags _setting_args adds


def _setting_args(p: argparse.ArgumentParser) -> None:
    """The flags of the library's settings table (docs/options.md) that the
    options above do not declare (--tune-batch, --wm-propose-every, ...): a
    knob added to the library is a flag here too, passed on by name."""
    import ksearch
    known = {o for action in p._actions for o in action.option_strings}
    for s in ksearch.search_settings():
        flag = s["flag"]
        if not flag or flag in known:
            continue
        dest = _SETTING + s["key"]
        if s["type"] == "boolean":
            if flag.startswith("--no-"):
                continue  # a flag that turns a setting off; those above declare theirs
            p.add_argument(flag, action="store_const", const=True, dest=dest, help=s["help"])
        else:
            kind = {"number": float, "bytes": str}.get(s["type"], int)
            metavar = {"number": "X", "bytes": "SIZE"}.get(s["type"], "N")
            p.add_argument(flag, type=kind, dest=dest, metavar=metavar, help=s["help"])


def _given(a: argparse.Namespace, names: Dict[str, str]) -> Dict[str, Any]:
    """The options given on the command line (not None), by field name: {option dest: field}."""
    return {field: getattr(a, dest) for dest, field in names.items() if getattr(a, dest, None) is not None}


def _llm(a: argparse.Namespace) -> Any:
    import ksearch
    spec = a.llm or "openai"
    o = ksearch.LlmOptions()
    if spec == "openai":
        if not a.model:
            raise UsageError("--model is required with --llm openai (or use --llm offline --strategy tune, "
                             "or --llm replay:FILE)")
        o.source = "openai"
    elif spec == "offline":
        o.source = "offline"
    elif spec.startswith("replay:"):
        if not spec[7:]:
            raise UsageError("--llm replay: needs a transcript path (replay:PATH)")
        o.source, o.replay_path = "replay", spec[7:]
    elif spec.startswith("command:"):
        argv = spec[8:].split()
        if not argv:
            raise UsageError("--llm command: needs a program (command:PROGRAM ARGS)")
        o.source, o.command_argv = "command", argv
    else:
        raise UsageError(f"unknown --llm {spec!r} (expected openai, offline, replay:PATH or command:PROGRAM ARGS)")
    if getattr(a, "on_divergence", None):
        if not spec.startswith("replay:"):
            raise UsageError("--on-divergence applies to --llm replay:TRANSCRIPT only")
        o.replay_on_divergence = a.on_divergence
    for field, v in _given(a, {"model": "model", "base_url": "base_url", "api": "api",
                               "reasoning_effort": "reasoning_effort", "api_key_env": "api_key_env",
                               "temperature": "temperature", "max_output_tokens": "max_output_tokens",
                               "request_timeout": "request_timeout_s", "connect_timeout": "connect_timeout_s",
                               "proxy": "proxy", "max_retries": "max_retries", "max_concurrency": "max_concurrency",
                               "price_file": "price_file"}).items():
        setattr(o, field, v)
    for h in getattr(a, "header", []) or []:
        if ":" not in h or h.startswith(":"):
            raise UsageError(f"--header {h!r} must look like 'Name: value'")
    if getattr(a, "header", None):
        o.headers = list(a.header)
    return o


def _pool_args(a: argparse.Namespace) -> Dict[str, Any]:
    return _given(a, {k: k for k in ("host_slots", "family", "timeout_s", "max_attempts", "straggler_factor",
                                      "max_slots")})


def _search_fields(a: argparse.Namespace) -> Dict[str, Any]:
    import ksearch
    f: Dict[str, Any] = {"task": a.task}
    if a.kernelbench:
        os.environ["KSEARCH_KERNELBENCH"] = a.kernelbench  # as `ksearch run --kernelbench` does
        f["kernelbench_dir"] = a.kernelbench
    if a.language:
        f["language"], f["language_from_task"] = a.language, False
    else:
        f["language_from_task"] = True
    if a.strategy:
        f["strategy"] = a.strategy
    budget = _given(a, {"max_rounds": "max_rounds", "max_cost": "max_cost_usd", "max_wall_time": "max_wall_s"})
    if a.max_answer_size is not None:
        budget["max_answer_bytes"] = _size(a.max_answer_size, "--max-answer-size")
    if budget:
        f["budget"] = budget
    wm = _given(a, {"wm_stagnation_window": "stagnation_window", "wm_max_difficulty": "max_difficulty"})
    if not 1 <= wm.get("max_difficulty", 1) <= 5:
        raise UsageError("--wm-max-difficulty must be 1 to 5")
    if a.wm_lenient_edits:
        wm["lenient_edits"] = True
    if wm:
        f["world_model"] = wm
    if a.tune_rounds is not None:
        f["tune"] = {"rounds": a.tune_rounds}
    evolve = _given(a, {f"evolve_{k}": k for k in ("islands", "island_size", "migration_interval", "migration_size",
                                                    "archive_size", "inspirations", "exploit_ratio")})
    if evolve:
        f["evolve"] = evolve
    f.update(_given(a, {k: k for k in ("parallel", "seed", "run_dir", "continue_from_solution",
                                        "continue_from_world_model")}))
    if a.no_starting_point:
        f["start_from_starting_point"] = False
    if a.remeasure:
        f["remeasure"] = True
    if a.no_weak_check:
        f["weak_check"] = False
    for dest, v in vars(a).items():  # the table's flags, by the setting's name
        if dest.startswith(_SETTING) and v is not None:
            key = dest[len(_SETTING):]
            f[key] = _size(v, "--" + key.replace("_", "-")) if isinstance(v, str) else v
    f["llm"] = _llm(a)
    ksearch.SearchOptions(**{k: v for k, v in f.items() if k != "llm"})  # bad values are named here, before Ray starts
    return f


def _eval_settings(a: argparse.Namespace) -> Dict[str, Any]:
    """The actors' Evaluator fields and the evaluation settings that win over
    the callback's defaults."""
    settings = _given(a, {"sandbox": "sandbox", "cuda_arch": "cuda_arch"})
    if a.memory_limit:
        settings["memory_limit_bytes"] = _size(a.memory_limit, "--memory-limit")
    options = _given(a, {"timing_cap": "max_time_per_workload_s", "seeds": "seeds_per_workload"})
    if not 2 <= options.get("seeds_per_workload", 2) <= 64:
        raise UsageError("--seeds must be 2 to 64 (two input sets are checked per workload)")
    if a.baseline_latencies:
        try:
            with open(a.baseline_latencies) as fh:
                options["baseline_latencies"] = json.load(fh)
        except (OSError, ValueError) as e:
            raise UsageError(f"--baseline-latencies {a.baseline_latencies}: {e}") from None
    return {"backend": a.backend, "cache_dir": a.cache_dir, "settings": settings, "eval_options": options}


def _round_printer(quiet: bool, stream: Any) -> Any:
    def progress(r: Any) -> None:
        if quiet:
            return
        lat = f"{r.latency_ms:9.4f} ms" if r.latency_ms > 0 else " " * 12
        best = (f"best {r.best_latency_ms:.4f} ms" + (f" ({r.best_speedup:.2f}x)" if r.best_speedup > 0 else "")
                if r.best_latency_ms > 0 else "best -")
        action = r.action if len(r.action) <= 48 else r.action[:45] + "..."
        print(f"[{r.round:>3}/{r.max_rounds:<3}] {'*' if r.improved else ' '}{r.status.label:<17} {lat} "
              f"{best:<26} | {action} | ${r.cost_usd:.2f} {r.elapsed_s:.0f}s", file=stream, flush=True)
        if r.replayed:
            print("          (replayed from the run's journal)", file=stream, flush=True)
    return progress


def _dispatch_printer(quiet: bool) -> Any:
    def on_dispatch(solution_id: str, slot: Dict[str, Any]) -> None:
        if not quiet:
            print(f"ksearch.ray: {solution_id} -> {slot['node_name'] or slot['ip']}/{slot['slot']}"
                  + (" (backup copy)" if slot.get("backup") else ""), file=sys.stderr, flush=True)
    return on_dispatch


def _finish(res: Any, a: argparse.Namespace) -> int:
    code = (EXIT_INTERRUPTED if res.stop_reason == "cancelled" else EXIT_DIVERGED
            if res.stop_reason == "replay_diverged" else EXIT_OK if res.has_best else EXIT_NO_PASS)
    if a.json:
        print(json.dumps({**res.data, "run_dir": res.run_dir, "exit_code": code}, indent=2))
    else:
        best = (f"best {res.best_latency_ms:.4f} ms" + (f" ({res.best_speedup:.2f}x)" if res.best_speedup else "")
                if res.has_best else "no passing kernel")
        print(f"{res.task}: {res.rounds} rounds, {res.stop_reason}, {best}\nrun folder: {res.run_dir}")
    return code


def _interruptible() -> Any:
    """Ctrl-C or SIGTERM stops after the current round (the run stays resumable)."""
    import ksearch
    token = ksearch.CancelToken()

    def stop(_sig: int, _frame: Any) -> None:
        token.cancel()
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    return token


def _node(args: List[str]) -> int:
    """Replaces this process with `ray start --block ARGS` in a scrubbed environment."""
    import shutil
    from ._actor import scrub_environment
    env = dict(os.environ)
    gone = scrub_environment(env)
    if gone:
        print(f"python3 -m ksearch.ray node: not passed on to the node: {', '.join(sorted(gone))}", file=sys.stderr)
    ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    if ray_bin is None:
        raise UsageError("the `ray` command was not found: pip install ray")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.execve(ray_bin, [ray_bin, "start", "--block", *args], env)
    return EXIT_ERROR  # not reached


def main(argv: Optional[List[str]] = None) -> int:
    a = None
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["node"]:  # everything after it is ray start's
            return _node(argv[1:])
        a = _parser().parse_args(argv)
        if a.command == "gpus":
            return _gpus(a)
        from . import resume_search, run_search
        out = sys.stderr if a.json else sys.stdout
        if a.command == "run":
            if not a.address:
                raise UsageError("--address is required (or $RAY_ADDRESS): the cluster's head, HOST:PORT")
            fields = _search_fields(a)
            res = run_search(fields.pop("task"), address=a.address, on_dispatch=_dispatch_printer(a.quiet),
                             progress=_round_printer(a.quiet, out), cancel=_interruptible(),
                             **_eval_settings(a), **_pool_args(a), **fields)
        else:
            if not a.address:
                raise UsageError("--address is required (or $RAY_ADDRESS): the cluster's head, HOST:PORT")
            fields = {}
            if a.max_rounds is not None:
                fields["max_rounds"] = a.max_rounds
            if a.llm is not None:
                fields["llm"] = _llm(a)
            res = resume_search(a.run_dir, address=a.address, on_dispatch=_dispatch_printer(a.quiet),
                                progress=_round_printer(a.quiet, out), cancel=_interruptible(),
                                **_pool_args(a), **fields)
        with res:
            return _finish(res, a)
    except UsageError as e:
        _error(str(e), EXIT_USAGE, a)
        return EXIT_USAGE
    except Exception as e:  # a clear line, not a traceback: bad input is the common case
        _error(f"{type(e).__name__}: {e}" if not str(e) else str(e), EXIT_ERROR, a)
        return EXIT_ERROR


def _error(message: str, code: int, a: Optional[argparse.Namespace]) -> None:
    if a is not None and getattr(a, "json", False):
        print(json.dumps({"error": {"message": message, "exit_code": code}}))
    print(f"python3 -m ksearch.ray: error: {message}", file=sys.stderr)


def _gpus(a: argparse.Namespace) -> int:
    if not a.address:
        raise UsageError("--address is required (or $RAY_ADDRESS): the cluster's head, HOST:PORT")
    from . import list_gpus
    nodes = list_gpus(a.address)
    if a.json:
        print(json.dumps(nodes, indent=2))
        return EXIT_OK
    total = 0
    for n in sorted(nodes, key=lambda n: (n["node_name"], n["node_id"])):
        head = f"node {n['node_name'] or n['ip']} ({n['ip']}, {n['node_id'][:12]})"
        if "error" in n:
            print(f"{head}: probe failed: {n['error']}")
            continue
        gpus = n.get("gpus", [])
        total += len(gpus)
        print(f"{head}: {len(gpus)} GPU(s), Ray counts {n['ray_gpus']}; host {n.get('cpu')} "
              f"({n.get('cpus')} CPUs)")
        for g in gpus:
            print(f"  gpu {g['index']}: {g['name']} ({g['arch']}, {g['pci_bus_id']})")
        if not gpus and n.get("cuda_problem"):
            print(f"  no GPU: {n['cuda_problem']}")
    print(f"{len(nodes)} node(s), {total} GPU(s)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
