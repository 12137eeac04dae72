#!/usr/bin/env python3
"""Strategies side by side at equal budgets: world model, greedy and evolve on one task.

Runs each strategy --repeats times on one task with the same round budget,
model, language and seeds (repeat k of every strategy uses seed --seed + k - 1),
writes every run folder under one output folder, and compares them with
`ksearch compare` (best latency so far over rounds, rounds to 90 % of the
final best, LLM calls and tokens, wall time; docs/search.md, "Comparing runs"):

    OUT/comparison.json      what was run: the settings and each run's ksearch command (never a key)
    OUT/runs/STRATEGY-K/     the run folders, each with its transcript and evaluations
    OUT/logs/STRATEGY-K.log  each run's output
    OUT/compare.html         the comparison page; compare.txt the table; compare.json its data

Any OpenAI-compatible endpoint (the key from $OPENAI_API_KEY, or the variable
--api-key-env names):

    python3 benchmarks/strategies/compare_strategies.py --ksearch build/examples/cli/ksearch \\
        --task gpumode/trimul --model gpt-5.2 --rounds 40 --repeats 3 --out cmp-trimul
    ... --task examples/matmul --model qwen3-coder --base-url http://127.0.0.1:8000/v1 --out cmp-local

or a scripted model (`--llm command:PROGRAM ARGS`, as `ksearch run` takes it):

    ... --task tests/fixtures/tasks/scale3 --language cpp --rounds 6 \\
        --llm "command:python3 tests/fixtures/wm_parallel/model.py" --out cmp-scripted

Options after `--` go to every `ksearch run` unchanged (e.g. `-- --api responses
--reasoning-effort medium --timing-cap 0.5`).

A comparison is recorded, so it can be replayed exactly: `--replay OUT --out
OUT2` reproduces every run of OUT with `ksearch replay` (the recorded answers
and evaluations: no model, no GPU, nothing measured), checks that each one is
reproduced exactly, and compares them again; the numbers are those of OUT.

Exit status: 0 when every run ended (with or without a passing kernel) and the
comparison was written; 1 when a run or the comparison failed (the others are
still compared); 2 for a usage error; 130 when interrupted (Ctrl-C stops the
runs after their current round; `ksearch resume OUT/runs/NAME` continues one).
"""
import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

STRATEGIES = ("world_model", "greedy", "evolve")
RUN_OK = (0, 3)  # a passing kernel, or none: both are results


def parse_args(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--ksearch", required=True, help="the ksearch CLI")
    ap.add_argument("--out", required=True, help="the output folder (must not exist yet, or be empty)")
    ap.add_argument("--task", help="the task (a name from `ksearch tasks` or a path)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES),
                    help="comma-separated strategies to run (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=20, help="the round budget of every run (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per strategy (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="the seed of repeat 1; repeat k uses seed + k - 1")
    ap.add_argument("--parallel", type=int, default=1,
                    help="ksearch's --parallel for every run: candidates (greedy, evolve) or cycles (world model) "
                         "at once (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="runs at once (default: %(default)s; runs at once share the machine's GPUs and CPU, "
                         "so their timings are not independent)")
    ap.add_argument("--language", help="the kernel language (default: the task's)")
    ap.add_argument("--model", help="the model name sent to the endpoint")
    ap.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: ksearch's)")
    ap.add_argument("--api-key-env", help="the environment variable holding the key (default: OPENAI_API_KEY)")
    ap.add_argument("--llm", help="who answers, as `ksearch run --llm` takes it (e.g. command:PROGRAM ARGS); "
                                  "default: the openai endpoint")
    ap.add_argument("--at-least", type=float, default=1.0,
                    help="`ksearch compare --at-least`: workloads at or above X times the baseline")
    ap.add_argument("--replay", metavar="OUT",
                    help="reproduce the recorded comparison in OUT exactly (ksearch replay of each run), "
                         "then compare again")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the commands, run nothing")
    args = ap.parse_args(argv)
    args.extra = extra
    if args.replay is None:
        if not args.task:
            ap.error("--task is required (unless --replay)")
        args.strategy_list = [s.strip() for s in args.strategies.split(",") if s.strip()]
        if not args.strategy_list:
            ap.error("--strategies names none")
        for name, value in (("--rounds", args.rounds), ("--repeats", args.repeats), ("--parallel", args.parallel)):
            if value < 1:
                ap.error(f"{name} must be at least 1, is {value}")
    elif args.task or extra:
        ap.error("--replay reproduces a recorded comparison: it takes no --task and no run options")
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, is {args.jobs}")
    if not args.at_least > 0:
        ap.error(f"--at-least must be a number > 0, is {args.at_least}")
    return args


def plan_runs(args, out):
    """The runs of a new comparison: name, strategy, seed and the ksearch command."""
    common = ["--task", args.task, "--max-rounds", str(args.rounds), "--parallel", str(args.parallel)]
    if args.language:
        common += ["--language", args.language]
    if args.llm:
        common += ["--llm", args.llm]
    if args.model:
        common += ["--model", args.model]
    if args.base_url:
        common += ["--base-url", args.base_url]
    if args.api_key_env:
        common += ["--api-key-env", args.api_key_env]
    runs = []
    for k in range(1, args.repeats + 1):
        for strategy in args.strategy_list:
            name = f"{strategy}-{k}"
            seed = args.seed + k - 1
            cmd = [args.ksearch, "run", *common, "--strategy", strategy, "--seed", str(seed), "--quiet",
                   "--run-dir", str(out / "runs" / name), *args.extra]
            runs.append({"name": name, "strategy": strategy, "label": strategy, "repeat": k, "seed": seed,
                         "command": cmd})
    return runs


def plan_replay(args, source, out):
    """The runs of a recorded comparison, each reproduced by `ksearch replay`."""
    try:
        recorded = json.loads((source / "comparison.json").read_text())
        runs = recorded["runs"]
        names = [r["name"] for r in runs]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"compare_strategies: {source / 'comparison.json'} does not describe a comparison ({e})")
    if len(set(names)) != len(names) or any(not n or "/" in n or n.startswith(".") for n in names):
        sys.exit(f"compare_strategies: {source / 'comparison.json'}: run names must be distinct folder names")
    plan = []
    for r in runs:
        cmd = [args.ksearch, "replay", str(source / "runs" / r["name"]), "--run-dir", str(out / "runs" / r["name"])]
        plan.append(dict(r, command=cmd))
    return recorded, plan


def start(run, out):
    log = open(out / "logs" / f"{run['name']}.log", "w")
    log.write("$ " + shlex.join(run["command"]) + "\n")
    log.flush()
    # Its own process group: a Ctrl-C in the terminal reaches the harness,
    # which passes one SIGTERM on (ksearch stops after the current round).
    p = subprocess.Popen(run["command"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    return p, log, time.monotonic()


def execute(plan, out, jobs):
    """Runs the plan, `jobs` at a time. Returns {name: exit status}."""
    pending = list(plan)
    running = {}
    status = {}
    try:
        while pending or running:
            while pending and len(running) < jobs:
                run = pending.pop(0)
                running[run["name"]] = (run, *start(run, out))
                print(f"started {run['name']}", flush=True)
            for name, (run, p, log, t0) in list(running.items()):
                rc = p.poll()
                if rc is None:
                    continue
                log.close()
                del running[name]
                status[name] = rc
                print(f"{name}: exit {rc} after {time.monotonic() - t0:.1f} s", flush=True)
            time.sleep(0.1)
    except KeyboardInterrupt:
        print("compare_strategies: interrupted; stopping the runs after their current round", file=sys.stderr)
        for run, p, log, _ in running.values():
            p.send_signal(signal.SIGTERM)
        for run, p, log, _ in running.values():
            try:
                p.wait(timeout=600)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.close()
        sys.exit(130)
    return status


def log_tail(out, name, lines=15):
    text = (out / "logs" / f"{name}.log").read_text(errors="replace").splitlines()
    return "\n".join("    " + line for line in text[-lines:])


def main():
    args = parse_args(sys.argv[1:])
    # A SIGTERM ends the runs as a Ctrl-C does, so none outlives the harness.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    out = Path(args.out).absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        sys.exit(f"compare_strategies: {out} exists and is not an empty folder; give a new one")
    if args.replay is not None:
        source = Path(args.replay).absolute()
        recorded, plan = plan_replay(args, source, out)
        settings = dict(recorded.get("settings", {}), replay_of=str(source.resolve()))
    else:
        plan = plan_runs(args, out)
        settings = {"task": args.task, "strategies": args.strategy_list, "rounds": args.rounds,
                    "repeats": args.repeats, "seed": args.seed, "parallel": args.parallel,
                    "language": args.language, "model": args.model, "base_url": args.base_url,
                    "llm": args.llm, "run_options": args.extra}
    if args.dry_run:
        print(json.dumps(settings, indent=2))
        for run in plan:
            print(shlex.join(run["command"]))
        return 0
    (out / "runs").mkdir(parents=True)
    (out / "logs").mkdir()
    # The record is written before anything runs, so a comparison stopped
    # half way still says what it was.
    (out / "comparison.json").write_text(json.dumps({
        "format": "ksearch-strategy-comparison", "format_version": 1, "settings": settings,
        "runs": [{k: (shlex.join(v) if k == "command" else v) for k, v in r.items()} for r in plan]}, indent=2) + "\n")

    status = execute(plan, out, args.jobs)
    failed = []
    for run in plan:
        rc = status.get(run["name"])
        log = (out / "logs" / f"{run['name']}.log").read_text(errors="replace")
        if args.replay is not None:
            if rc not in RUN_OK or "Reproduced" not in log:
                failed.append(run["name"])
                print(f"{run['name']}: not reproduced exactly (exit {rc}):\n{log_tail(out, run['name'])}",
                      file=sys.stderr)
        elif rc not in RUN_OK:
            failed.append(run["name"])
            print(f"{run['name']}: exit {rc}:\n{log_tail(out, run['name'])}", file=sys.stderr)

    done = [r for r in plan if (out / "runs" / r["name"] / "manifest.json").is_file()]
    if not done:
        print("compare_strategies: no run made a run folder; nothing to compare", file=sys.stderr)
        return 1
    compare = [args.ksearch, "compare", "--out", str(out / "compare.html"), "--at-least", str(args.at_least),
               *[f"{r['label']}={out / 'runs' / r['name']}" for r in done]]
    text = subprocess.run(compare, capture_output=True, text=True)
    data = subprocess.run(compare + ["--json"], capture_output=True, text=True)
    if text.returncode != 0 or data.returncode != 0:
        print(f"compare_strategies: ksearch compare failed:\n{text.stderr}{data.stderr}", file=sys.stderr)
        return 1
    (out / "compare.txt").write_text(text.stdout)
    (out / "compare.json").write_text(data.stdout)
    print(text.stdout, end="")
    print(f"compare_strategies: {len(done)} run(s) in {out / 'runs'}; the comparison in {out / 'compare.html'}")
    if failed:
        print(f"compare_strategies: {len(failed)} run(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
