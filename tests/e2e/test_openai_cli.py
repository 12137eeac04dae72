#!/usr/bin/env python3
"""End to end over real HTTP: `ksearch run` against the local OpenAI-compatible
test server, which answers with kernels and also with every failure a real
provider throws (429 with Retry-After, 500, a dropped connection, a truncated
answer, a content-filtered answer). The search must go through all of them,
record the transcript, and never write the API key anywhere in the run folder.
Then `ksearch run --llm replay:<that transcript>` (no server) must make the
same sequence of decisions.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from e2e_common import setup

args, _, work = setup("--server")
task = Path(args.source_dir) / "tests/fixtures/tasks/scale3"
KEY = "sk-test-Do-Not-Leak-7f3a9c"


def kernel(reps, factor="3.0f"):
    return (f"```cpp kernel.cpp\n#include <cstdint>\nvoid scale3(const float* x, float* y, std::int64_t n) {{\n"
            f"  for (int r = 0; r < {reps}; ++r) {{\n    for (std::int64_t i = 0; i < n; ++i) y[i] = {factor} * x[i];\n"
            f"    asm volatile(\"\" ::: \"memory\");\n  }}\n}}\n```\n```json launch_plan\n"
            '{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n')


script = [
    {"kind": "answer", "text": kernel(4), "usage": {"input": 900, "output": 120}},       # round 1: passes
    {"kind": "rate_limited", "retry_after": 1},                                            # retried
    {"kind": "answer", "text": kernel(1), "usage": {"input": 1500, "output": 110}},      # round 2: faster
    {"kind": "error", "status": 500, "message": "upstream overloaded"},                    # retried
    {"kind": "drop"},                                                                      # retried
    {"kind": "answer", "text": kernel(1, "2.0f")},                                         # round 3: incorrect
    {"kind": "truncated", "text": "```cpp kernel.cpp\nvoid scale3("},                     # round 4: cut off
    {"kind": "content_filter"},                                                            # round 5: filtered
    {"kind": "answer", "text": kernel(2)},                                                 # round 6: passes
]
(work / "script.json").write_text(json.dumps(script))
env = dict(os.environ, OPENAI_API_KEY=KEY, KSEARCH_CACHE_DIR=str(work / "cache"))
env.pop("KSEARCH_API_KEY", None)
server = subprocess.Popen([args.server, "--script", str(work / "script.json"), "--log", str(work / "requests.jsonl")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
try:
    line = server.stdout.readline()
    if "listening on" not in line:
        sys.exit(f"test server did not start: {line!r}")
    base_url = line.split("listening on", 1)[1].strip()
    common = ["--task", str(task), "--language", "cpp", "--strategy", "greedy", "--max-rounds", "6",
              "--timing-cap", "0.2", "--quiet", "--json"]
    t0 = time.time()
    live = subprocess.run([args.ksearch, "run", *common, "--model", "test-model", "--base-url", base_url,
                           "--max-retries", "3", "--run-dir", str(work / "live")],
                          env=env, capture_output=True, text=True, timeout=600)
    live_s = time.time() - t0
finally:
    server.terminate()
    server.wait(timeout=10)
print(live.stdout[-3000:])
if live.returncode != 0:
    sys.exit(f"live run failed ({live.returncode}):\n{live.stderr}")

failures = []
run = work / "live"
attempts = [json.loads(l) for l in open(run / "attempts.jsonl")]
statuses = [a["status"] for a in attempts]
if statuses != ["passed", "passed", "incorrect", "generation_failed", "generation_failed", "passed"]:
    failures.append(f"unexpected round statuses {statuses}")
transcript = [json.loads(l) for l in open(run / "transcript.jsonl")]
if len(transcript) != 6:
    failures.append(f"transcript has {len(transcript)} entries, expected 6 (one per request, retries inside)")
else:
    # 429 then 500 each cost one retry; a dropped connection may be retried
    # inside libcurl (a dead reused connection), so count what the server saw.
    if transcript[1]["response"]["usage"]["attempts"] < 2 or transcript[2]["response"]["usage"]["attempts"] < 2:
        failures.append("the 429 / 500 retries are not counted in the recorded usage")
    reasons = [e["response"].get("finish_reason", "") for e in transcript]
    if reasons[3] != "length" or reasons[4] != "content_filter":
        failures.append(f"truncated and filtered answers not recorded as such: {reasons}")
    if any(e["response"]["ok"] for e in transcript[3:5]):
        failures.append("a truncated or filtered answer was taken as a success")
# The key reached the server in the Authorization header, and only there ...
requests = [json.loads(l) for l in open(work / "requests.jsonl")]
# Before its first prompt the run asks GET /models once; the rest are prompts.
if [r["method"] for r in requests if r["method"] != "POST"] != ["GET"]:
    failures.append(f"expected one GET /models before the prompts: {[(r['method'], r['path']) for r in requests]}")
requests = [r for r in requests if r["method"] == "POST"]
if len(requests) != len(script):
    failures.append(f"the server saw {len(requests)} requests for {len(script)} scripted behaviours")
if not requests or any(r["headers"].get("authorization") != f"Bearer {KEY}" for r in requests):
    failures.append("requests did not carry the key as a Bearer token")
if any(KEY in r["body"] for r in requests):
    failures.append("the key appeared in a request body")
# ... and is nowhere in the run folder (grep every file, binary or not).
for f in run.rglob("*"):
    if f.is_file() and KEY.encode() in f.read_bytes():
        failures.append(f"the API key was written to {f.relative_to(run)}")
if KEY in live.stdout or KEY in live.stderr:
    failures.append("the API key was printed")
manifest = json.loads((run / "manifest.json").read_text())
usage = manifest["totals"]["llm_usage"]
if usage["input_tokens"] < 2400 or usage["output_tokens"] < 230:
    failures.append(f"token accounting missing from the manifest: {usage}")

# Replay the recorded transcript without a server: same decisions.
replay = subprocess.run([args.ksearch, "run", *common, "--llm", f"replay:{run / 'transcript.jsonl'}",
                         "--run-dir", str(work / "replay")], env=env, capture_output=True, text=True, timeout=600)
if replay.returncode != 0:
    failures.append(f"replay failed ({replay.returncode}): {replay.stderr}")
else:
    rep = [json.loads(l) for l in open(work / "replay/attempts.jsonl")]
    if [(a["solution_id"], a["status"]) for a in rep] != [(a["solution_id"], a["status"]) for a in attempts]:
        failures.append("the replayed run made different decisions")
    rt = [json.loads(l) for l in open(work / "replay/transcript.jsonl")]
    if [e["kind"] for e in rt] != [e["kind"] for e in transcript]:
        failures.append("the replayed run asked different prompt kinds")
if failures:
    sys.exit("\n".join(failures))
print(f"live run through 429, 500, drop, truncation and content filter in {live_s:.1f} s; "
      f"statuses {statuses}; key in no file; replay made the same {len(attempts)} decisions")
