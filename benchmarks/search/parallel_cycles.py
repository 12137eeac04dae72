#!/usr/bin/env python3
"""World-model rounds per hour with --parallel N against --parallel 1, side by side in one call.

Both runs use the same task, budget and scripted model (tests/fixtures/
wm_parallel/model.py: answers from the prompt alone, after a fixed response
time of --latency seconds per call, so that N of them can be in flight at
once). A short warm-up run fills the cache folder first, so neither run pays
for the references. Then:

  1. --parallel 1, and --parallel N with --max-concurrency N: wall time,
     rounds per hour, the ratio, and the devices that evaluated each run's
     candidates (metrics.worker_device);
  2. with --kill, a second --parallel N run is killed with SIGKILL once it has
     journaled a third of its attempts, resumed, and compared with the
     uninterrupted one: the same attempts, decisions and tree.

    python3 benchmarks/search/parallel_cycles.py --ksearch build/examples/cli/ksearch \\
        [--task examples/softmax --language cuda] [--rounds 24] [--latency 3] [--parallel 2] [--kill]

On a host task (--task tests/fixtures/tasks/scale3 --language cpp) the
candidates share the one host worker, so only the model's time overlaps.
"""
import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

src = Path(__file__).resolve().parents[2]
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--ksearch", required=True, help="the ksearch CLI")
ap.add_argument("--task", default="examples/softmax")
ap.add_argument("--language", default="cuda", choices=["cuda", "cpp"])
ap.add_argument("--rounds", type=int, default=24)
ap.add_argument("--latency", type=float, default=3.0, help="the scripted model's seconds per answer")
ap.add_argument("--parallel", type=int, default=2)
ap.add_argument("--window", type=int, default=3, help="--wm-stagnation-window")
ap.add_argument("--kill", action="store_true", help="also kill a parallel run and resume it")
ap.add_argument("--work", help="keep the run folders here (default: a temporary folder)")
args = ap.parse_args()

model = src / "tests/fixtures/wm_parallel/model.py"
task = args.task if not (src / args.task).is_dir() else str(src / args.task)


def run_cmd(run_dir, parallel, rounds):
    return [args.ksearch, "run", "--task", task, "--language", args.language, "--llm",
            f"command:{sys.executable} {model} --language {args.language} --latency {args.latency}",
            "--max-concurrency", str(parallel), "--parallel", str(parallel), "--max-rounds", str(rounds),
            "--wm-stagnation-window", str(args.window), "--quiet", "--run-dir", str(run_dir)]


def run(cmd, log):
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if rc != 0:
        sys.exit(f"{cmd[1]} exited with {rc}; log:\n{Path(log).read_text()[-3000:]}")
    return time.monotonic() - t0


def attempts(d):
    return [(a["seq"], a["solution_id"], a["status"], a["action"]) for a in map(json.loads, open(d / "attempts.jsonl"))]


def decisions(d):
    return [(e["decision"], e["next"], e["cycle"], e.get("slot"), e["round"])
            for e in map(json.loads, open(d / "events.jsonl")) if e["type"] == "decision"]


def tree_shape(d):
    snaps = sorted((d / "world_model").glob("v*.json"), key=lambda p: int(p.stem[1:]))
    wm = json.loads(snaps[-1].read_text())
    return sorted((n["node_id"], n.get("parent_id"), (n.get("solution_ref") or {}).get("solution_id"))
                  for n in wm["decision_tree"]["nodes"])


def devices(d):
    count = collections.Counter()
    for ev in (d / "attempts").glob("*/eval.json"):
        count[(json.loads(ev.read_text()).get("metrics") or {}).get("worker_device", "?")] += 1
    return dict(sorted(count.items()))


def lines(p):
    try:
        return sum(1 for _ in open(p))
    except FileNotFoundError:
        return 0


with tempfile.TemporaryDirectory(prefix="ks-parallel-") as tmp:
    work = Path(args.work) if args.work else Path(tmp)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
    run(run_cmd(work / "warmup", 1, 2), work / "warmup.log")
    rows = []
    for n in (1, args.parallel):
        d = work / f"parallel{n}"
        wall = run(run_cmd(d, n, args.rounds), work / f"parallel{n}.log")
        rounds = len(attempts(d))
        totals = json.loads((d / "manifest.json").read_text())["totals"]
        rows.append((n, wall, rounds, totals["llm_calls"], devices(d)))
        print(f"--parallel {n}: {rounds} rounds, {totals['llm_calls']} LLM calls in {wall:.1f} s: "
              f"{3600 * rounds / wall:.0f} rounds/hour; candidates evaluated on {devices(d)}", flush=True)
    (n1, w1, r1, _, _), (nn, wn, rn, _, _) = rows
    print(f"rounds per hour, --parallel {nn} / --parallel 1: {(rn / wn) / (r1 / w1):.2f}x "
          f"(model latency {args.latency} s per answer, stagnation window {args.window})")

    if args.kill:
        full, killed = work / f"parallel{nn}", work / "killed"
        cmd = run_cmd(killed, nn, args.rounds)
        with open(work / "killed.log", "w") as f:
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
            while lines(killed / "attempts.jsonl") < max(2, args.rounds // 3) and p.poll() is None:
                time.sleep(0.05)
            at = lines(killed / "attempts.jsonl")
            p.send_signal(signal.SIGKILL)
            p.wait()
        run([args.ksearch, "resume", str(killed), "--quiet"], work / "resumed.log")
        same = {what: get(full) == get(killed)
                for what, get in (("attempts", attempts), ("decisions", decisions), ("tree", tree_shape))}
        print(f"killed at {at} attempts and resumed: the same as the uninterrupted run: {same}")
        if not all(same.values()):
            sys.exit(1)
