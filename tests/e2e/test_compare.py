#!/usr/bin/env python3
"""End to end: the strategy comparison harness (benchmarks/strategies/
compare_strategies.py) and `ksearch compare`.

1. The harness runs world_model, greedy and evolve for 3 rounds each on the
   host task scale3, answered by the scripted model tests/fixtures/
   wm_parallel/model.py (`--llm command:`): every manifest has the same round
   budget, seed and model; the comparison's numbers (best latency so far per
   round, rounds to 90 %, LLM calls and tokens) are the ones the run folders'
   own files give, worked out here on their own; the page holds the plot as
   inline SVG and loads nothing.
2. `--replay` of that comparison: every run reproduced exactly by `ksearch
   replay` (the same attempts and transcript), the same curves.
3. The harness against the local OpenAI-compatible test server, greedy twice
   with 2 rounds each, on answers of known token usage and speed (a kernel
   with a 20 ms floor, then one without; a compile error, then one without):
   calls, tokens, rounds to 90 % and the label's mean and spread are known
   exactly; the key is written nowhere.
4. Bad input: a missing folder, a damaged manifest, runs of different tasks,
   a bad --at-least, no run: a clear message and a non-zero exit status.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

from e2e_common import Expectations, edited_copy, jsonl, setup, start_test_server

args, src, work = setup("--server")
task = src / "tests/fixtures/tasks/scale3"
harness = src / "benchmarks/strategies/compare_strategies.py"
KEY = "sk-test-compare-0123456789"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"), OPENAI_API_KEY=KEY)
env.pop("KSEARCH_API_KEY", None)
expect = Expectations()


def run(name, cmd, rc=0):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=600)
    (work / f"{name}.log").write_text(f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}")
    if p.returncode != rc:
        sys.exit(f"{name}: exit {p.returncode}, expected {rc}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0)


def expected(run_dir):
    """A run's numbers from its own files: attempts.jsonl and the llm_call events."""
    attempts = jsonl(run_dir / "attempts.jsonl")
    rounds = max((a["round"] for a in attempts), default=0)
    curve, best = [], None
    for r in range(1, rounds + 1):
        for a in attempts:
            if a["round"] == r and a["status"] == "passed" and (best is None or a["latency_ms"] < best):
                best = a["latency_ms"]
        curve.append(best)
    r90 = next((i + 1 for i, v in enumerate(curve) if v is not None and curve[-1] is not None
                and v <= curve[-1] / 0.9 * (1 + 1e-9)), None)
    calls = {e["llm_seq"]: e for e in jsonl(run_dir / "events.jsonl") if e["type"] == "llm_call"}.values()
    return {"curve": curve, "rounds_to_90": r90, "calls": len(calls),
            "code_calls": sum(c["kind"] in ("generate", "improve", "debug") for c in calls),
            "world_model_calls": sum(c["kind"].startswith("wm_") for c in calls),
            "input_tokens": sum(c["usage"]["input_tokens"] for c in calls),
            "output_tokens": sum(c["usage"]["output_tokens"] for c in calls)}


def check_run(label, got, run_dir):
    want = expected(run_dir)
    curve = got["curve"]["best_latency_ms"]
    expect(len(curve) == len(want["curve"]) and all(close(a, b) for a, b in zip(curve, want["curve"])),
           f"{label}: best so far {curve}, the run folder gives {want['curve']}")
    expect(got["rounds_to_90"] == want["rounds_to_90"],
           f"{label}: rounds to 90 % {got['rounds_to_90']}, the run folder gives {want['rounds_to_90']}")
    for k in ("calls", "code_calls", "world_model_calls", "input_tokens", "output_tokens"):
        expect(got["llm"][k] == want[k], f"{label}: {k} {got['llm'][k]}, the run folder gives {want[k]}")
    return want


def check_page(page_path, data, label):
    page = page_path.read_text()
    expect(page.count('<path class="run"') == len(data["runs"]), f"{label}: not one line per run in the plot")
    expect("<svg" in page and 'id="latency-chart"' in page, f"{label}: no latency plot")
    expect(not re.search(r"https?://|<link|\ssrc=|\shref=", page), f"{label}: the page names or loads a resource")
    scripts = re.findall(r"<script[^>]*>", page)
    expect(scripts == ['<script type="application/json" id="ks-compare-data">'], f"{label}: scripts {scripts}")
    embedded = json.loads(page.split('id="ks-compare-data">', 1)[1].split("</script>", 1)[0])
    for d in (embedded, data):
        d.pop("generated", None)
    expect(embedded == data, f"{label}: the page's data differ from --json's")


# 1. Three strategies at equal budgets, a scripted model.
model = f"command:{sys.executable} {src / 'tests/fixtures/wm_parallel/model.py'}"
A = work / "scripted"
run("harness-scripted", [sys.executable, harness, "--ksearch", args.ksearch, "--task", task, "--language", "cpp",
                         "--rounds", 3, "--seed", 5, "--llm", model, "--out", A, "--", "--timing-cap", "0.2"])
plan = json.loads((A / "comparison.json").read_text())
names = [r["name"] for r in plan["runs"]]
expect(names == ["world_model-1", "greedy-1", "evolve-1"], f"scripted: runs {names}")
for name in names:
    m = json.loads((A / "runs" / name / "manifest.json").read_text())
    c = m["config"]
    expect((c["strategy"], c["max_rounds"], c["seed"], m["llm"]["kind"], m["status"]) ==
           (name[:-2], 3, 5, "command", "finished"), f"scripted: {name}: {c['strategy']}, {c['max_rounds']} rounds, "
           f"seed {c['seed']}, {m['llm']['kind']}, {m['status']}")
data = json.loads((A / "compare.json").read_text())
expect(data["task"] == "tests/scale3" and data["max_round"] == 3, f"scripted: {data['task']}, {data['max_round']}")
expect([r["label"] for r in data["runs"]] == ["world_model", "greedy", "evolve"], "scripted: labels")
expect([g["label"] for g in data["groups"]] == ["world_model", "greedy", "evolve"], "scripted: groups")
wants = {r["name"]: check_run(f"scripted {r['name']}", r, A / "runs" / r["name"]) for r in data["runs"]}
# The world model asks for its tree first (wm_init), which is no round; the others make code calls only.
expect(wants["world_model-1"]["world_model_calls"] >= 1 and wants["greedy-1"]["world_model_calls"] == 0,
       f"scripted: world-model calls {[w['world_model_calls'] for w in wants.values()]}")
expect(all(w["curve"][0] is not None for w in wants.values()), "scripted: a run whose first kernel did not pass")
text = (A / "compare.txt").read_text()
expect(all(n in text for n in names) and "to 90%" in text, f"scripted: the table lacks runs:\n{text}")
check_page(A / "compare.html", json.loads((A / "compare.json").read_text()), "scripted")

# 2. The comparison replayed: each run reproduced exactly, the same numbers.
B = work / "replayed"
out = run("harness-replay", [sys.executable, harness, "--ksearch", args.ksearch, "--replay", A, "--out", B]).stdout
for name in names:
    for f in ("attempts.jsonl", "transcript.jsonl", "best.json"):
        expect((A / "runs" / name / f).read_bytes() == (B / "runs" / name / f).read_bytes(),
               f"replay: {name}/{f} differs from the recording")
    expect("Reproduced" in (B / "logs" / f"{name}.log").read_text(), f"replay: {name} does not say it reproduced")
replayed = json.loads((B / "compare.json").read_text())
for a, b in zip(data["runs"], replayed["runs"]):
    expect(a["curve"] == b["curve"] and a["llm"] == b["llm"] and a["rounds_to_90"] == b["rounds_to_90"],
           f"replay: {a['name']}'s numbers differ")
    expect(b["replayed"] and b["wall_s"] is None, f"replay: {b['name']} should be marked a replay")

# 3. An OpenAI-compatible endpoint: answers of known usage and speed.
def kernel(wait_ms=0, broken=False):
    wait = f"std::this_thread::sleep_for(std::chrono::milliseconds({wait_ms}));" if wait_ms else ""
    close_paren = "" if broken else ")"
    return ("```cpp kernel.cpp\n#include <chrono>\n#include <cstdint>\n#include <thread>\n"
            f"void scale3(const float* x, float* y, std::int64_t n{close_paren} {{\n"
            f"  for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];\n  {wait}\n}}\n```\n"
            '```json launch_plan\n{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n')


answers = [(kernel(20), 1000, 100), (kernel(), 1500, 250),       # greedy-1: 20 ms, then fast
           (kernel(broken=True), 700, 50), (kernel(), 1600, 300)]  # greedy-2: a compile error, then fast
(work / "script.json").write_text(json.dumps(
    [{"kind": "answer", "text": t, "usage": {"input": i, "output": o}} for t, i, o in answers]))
server, url = start_test_server(args.server, work / "script.json", work / "requests.jsonl")
C = work / "endpoint"
try:
    dry = run("harness-dry", [sys.executable, harness, "--ksearch", args.ksearch, "--task", task, "--language", "cpp",
                              "--strategies", "greedy", "--repeats", 2, "--rounds", 2, "--model", "test-model",
                              "--base-url", url, "--out", C, "--dry-run"]).stdout
    cmds = [line for line in dry.splitlines() if " run " in line]
    expect(len(cmds) == 2 and all(f"--base-url {url}" in c and "--max-rounds 2" in c and "--model test-model" in c
                                  for c in cmds) and not C.exists(), f"dry run:\n{dry}")
    run("harness-endpoint", [sys.executable, harness, "--ksearch", args.ksearch, "--task", task, "--language", "cpp",
                             "--strategies", "greedy", "--repeats", 2, "--rounds", 2, "--model", "test-model",
                             "--base-url", url, "--out", C, "--", "--timing-cap", "0.2"])
finally:
    server.terminate()
    server.wait(timeout=30)
    server.stdout.close()
ep = json.loads((C / "compare.json").read_text())
r1, r2 = ep["runs"]
check_run("endpoint greedy-1", r1, C / "runs/greedy-1")
check_run("endpoint greedy-2", r2, C / "runs/greedy-2")
c1, c2 = r1["curve"]["best_latency_ms"], r2["curve"]["best_latency_ms"]
expect(c1[0] >= 20 and c1[1] < c1[0] * 0.9 and r1["rounds_to_90"] == 2, f"endpoint: greedy-1 {c1}, {r1['rounds_to_90']}")
expect(c2[0] is None and c2[1] is not None and r2["rounds_to_90"] == 2, f"endpoint: greedy-2 {c2}, {r2['rounds_to_90']}")
expect((r1["llm"]["calls"], r1["llm"]["input_tokens"], r1["llm"]["output_tokens"]) == (2, 2500, 350),
       f"endpoint: greedy-1's usage {r1['llm']}")
expect((r2["llm"]["calls"], r2["llm"]["input_tokens"], r2["llm"]["output_tokens"]) == (2, 2300, 350),
       f"endpoint: greedy-2's usage {r2['llm']}")
expect([json.loads((C / "runs" / n / "manifest.json").read_text())["config"]["seed"] for n in ("greedy-1", "greedy-2")]
       == [1, 2], "endpoint: repeat k should use seed + k - 1")
g = ep["groups"]
expect(len(g) == 1 and g[0]["runs"] == ["greedy-1", "greedy-2"], f"endpoint: groups {g}")
tokens = g[0]["input_tokens"]
expect((tokens["n"], tokens["mean"], tokens["min"], tokens["max"]) == (2, 2400, 2300, 2500) and
       close(tokens["stddev"], math.sqrt(2 * 100 ** 2)), f"endpoint: the label's input tokens {tokens}")
round1, round2 = g[0]["curve"]["best_latency_ms"]
expect(round1["n"] == 1 and close(round1["mean"], c1[0]), f"endpoint: round 1 of the label {round1}")
expect(round2["n"] == 2 and close(round2["mean"], (c1[1] + c2[1]) / 2) and close(round2["min"], min(c1[1], c2[1])),
       f"endpoint: round 2 of the label {round2}")
leaks = [str(p) for p in C.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
expect(not leaks, f"endpoint: the key is written in {leaks}")

# 4. Bad input: a clear message naming what is wrong, and a non-zero exit status.
ks = args.ksearch
good = A / "runs/greedy-1"
p = run("missing", [ks, "compare", good, work / "nowhere", "--out", work / "x.html"], rc=1)
expect("nowhere: no such run folder" in p.stderr, f"missing folder: {p.stderr}")
bad = work / "bad-manifest"
shutil.copytree(good, bad)
(bad / "manifest.json").write_text('{"task": {"name": "tests/sca')
p = run("damaged", [ks, "compare", good, bad, "--out", work / "x.html", "--json"], rc=1)
expect(str(bad / "manifest.json") in p.stderr, f"damaged manifest: {p.stderr}")
expect(json.loads(p.stdout)["error"]["exit_code"] == 1, f"damaged manifest: --json's error document {p.stdout}")
other = edited_copy(good, work / "other-task", lambda m: m["task"].update(name="tests/other"))
p = run("other-task", [ks, "compare", good, other, "--out", work / "x.html"], rc=2)
expect("different tasks" in p.stderr and "tests/other" in p.stderr, f"different tasks: {p.stderr}")
p = run("at-least", [ks, "compare", good, "--at-least", 0, "--out", work / "x.html"], rc=2)
expect("--at-least" in p.stderr, f"--at-least 0: {p.stderr}")
p = run("no-runs", [ks, "compare"], rc=2)
expect("run folder" in p.stderr, f"no runs: {p.stderr}")
expect(not (work / "x.html").exists(), "a refused comparison wrote a page")
# Labels given on the command line group runs their own way.
p = run("labels", [ks, "compare", f"mine={A / 'runs/greedy-1'}", f"mine={A / 'runs/evolve-1'}",
                   A / "runs/world_model-1", "--out", work / "labels.html", "--json"])
lab = json.loads(p.stdout)
expect([(g["label"], len(g["runs"])) for g in lab["groups"]] == [("mine", 2), ("world_model", 1)],
       f"labels: {[(g['label'], g['runs']) for g in lab['groups']]}")

expect.finish()
print("compare: three strategies at equal budgets compared with the run folders' own numbers, the comparison "
      "replayed exactly, an endpoint's tokens and a label's spread exact, bad input refused clearly")
