#!/usr/bin/env python3
"""The world-model search's own overhead per round, as a share of the round.

Runs the world_model strategy on a host task for 12 rounds, its LLM answers
replayed from the recorded fixture (tests/fixtures/wm_e2e) and its candidates
measured here, then reads the run's manifest: `totals.time` splits this
process's wall time into the LLM policy, the evaluator, and the rest, which
is the search's own work (prompts, world-model edits and snapshots, the run
folder, events). With replayed answers the LLM takes no time, so the share
printed is an upper bound for a run against a real model.

    python3 benchmarks/search/wm_overhead.py --ksearch build/examples/cli/ksearch [--repeat 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

src = Path(__file__).resolve().parents[2]
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--ksearch", required=True, help="the ksearch CLI")
ap.add_argument("--repeat", type=int, default=3, help="runs to make (each a fresh run folder)")
args = ap.parse_args()

rows = []
with tempfile.TemporaryDirectory(prefix="ks-wm-overhead-") as tmp:
    env = dict(os.environ, KSEARCH_CACHE_DIR=str(Path(tmp) / "cache"))
    for i in range(args.repeat):
        run = Path(tmp) / f"run{i}"
        cmd = [args.ksearch, "run", "--task", str(src / "tests/fixtures/tasks/scale3"), "--language", "cpp",
               "--llm", f"replay:{src / 'tests/fixtures/wm_e2e/transcript.jsonl'}", "--max-rounds", "12",
               "--wm-stagnation-window", "2", "--timing-cap", "0.2", "--quiet", "--run-dir", str(run)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"ksearch run failed ({r.returncode}):\n{r.stderr[-2000:]}")
        totals = json.loads((run / "manifest.json").read_text())["totals"]
        t, rounds = totals["time"], totals["rounds"]
        rows.append((rounds, t["wall_s"], t["llm_s"], t["evaluation_s"], t["search_s"]))

print("run  rounds  wall s  LLM s  evaluation s  search s  search ms/round  search share")
for i, (rounds, wall, llm, ev, search) in enumerate(rows):
    print(f"{i:3d}  {rounds:6d}  {wall:6.2f}  {llm:5.2f}  {ev:12.2f}  {search:8.3f}  {1e3 * search / rounds:15.1f}"
          f"  {100 * search / wall:11.2f} %")
share = sorted(100 * r[4] / r[1] for r in rows)[len(rows) // 2]
per_round = sorted(1e3 * r[4] / r[0] for r in rows)[len(rows) // 2]
print(f"median: the search's own work is {per_round:.1f} ms per round, {share:.2f} % of the run's wall time "
      f"(target: under 1 %; the first run also compiles the task's reference)")
