#!/usr/bin/env python3
"""End to end: the KernelBench reference oracle (a PyTorch process speaking the
worker protocol) against small problem files in KernelBench's format
(tests/fixtures/kernelbench), with PyTorch on the CPU and host candidates.

Checks the oracle's data against KernelBench's own recipe computed here with
PyTorch (trial seeds, inputs, module parameters, outputs), the verdicts and
fast_p table of `ksearch eval`, one oracle per run, and the errors for a
broken problem file and a missing PyTorch.
"""
import json
import os
import struct
import subprocess
import sys

from e2e_common import setup

args, src, work = setup("--python", python="an interpreter with PyTorch, or NONE")
fixtures = src / "tests/fixtures/kernelbench"
cands = fixtures / "candidates"
oracle = src / "lib/tasks/kernelbench/oracle/kernelbench_oracle.py"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"), KSEARCH_KERNELBENCH=str(fixtures))
failures = []


def ksearch(*argv, extra_env=None):
    e = dict(env, **(extra_env or {}))
    p = subprocess.run([args.ksearch, *map(str, argv)], capture_output=True, text=True, env=e, timeout=600)
    return p.returncode, p.stdout + p.stderr


def expect(name, ok, detail=""):
    if ok:
        print(f"ok: {name}")
    else:
        failures.append(f"{name}: {detail}")


# A missing PyTorch is named, with what to do about it (whatever is installed).
code, out = ksearch("eval", "--task", "kernelbench/level1/1_Tiny_ReLU", "--solution", cands / "relu_ok.md",
                    extra_env={"KSEARCH_PYTHON": str(work / "no-python-here")})
expect("a missing interpreter is named", code != 0 and "no-python-here" in out and "KSEARCH_PYTHON" in out, out)
fake = work / "python-without-torch"
fake.mkdir()
(fake / "torch.py").write_text("raise ImportError('No module named torch (test double)')\n")
code, out = ksearch("eval", "--task", "kernelbench/level1/1_Tiny_ReLU", "--solution", cands / "relu_ok.md",
                    extra_env={"KSEARCH_PYTHON": sys.executable, "PYTHONPATH": str(fake)})
expect("a missing PyTorch is named", code != 0 and "PyTorch is not available" in out and "import torch failed" in out,
       out)

if args.python == "NONE":
    print("skipped the oracle's own checks: no Python with PyTorch was found at configure time")
    sys.exit(1 if failures else 0)
env["KSEARCH_PYTHON"] = args.python

# A broken problem file is named with its line; a file without Model too.
code, out = ksearch("eval", "--task", "kernelbench/level1/4_Broken_Syntax", "--solution", cands / "relu_ok.md")
expect("a broken problem file is named", code != 0 and "4_Broken_Syntax.py is not valid Python" in out and
       "line 7" in out, out)
code, out = ksearch("eval", "--task", "kernelbench/level1/5_No_Model", "--solution", cands / "relu_ok.md")
expect("a file without Model is named", code != 0 and "defines no Model" in out, out)
code, out = ksearch("eval", "--task", "kernelbench/level1/9_Missing", "--solution", cands / "relu_ok.md")
expect("a missing problem is named", code != 0 and "no problem file" in out, out)

# The oracle's data is KernelBench's: talk to it directly over the framed protocol.
def frame(msg):
    payload = json.dumps(msg).encode()
    return b"KSW1" + struct.pack("<I", len(payload)) + payload


def read_frames(data):
    out = []
    while data:
        assert data[:4] == b"KSW1", data[:16]
        (n,) = struct.unpack("<I", data[4:8])
        out.append(json.loads(data[8:8 + n]))
        data = data[8 + n:]
    return out


problem = fixtures / "KernelBench/level1/2_Tiny_Linear.py"
req = frame({"op": "prepare", "workload": "kernelbench", "handover": "file",
             "seeds": [{"index": 0, "seed": 11}, {"index": 2, "seed": 33}]}) + frame({"op": "exit"})
p = subprocess.run([args.python, oracle, "--serve", "--problem", problem, "--device", "cpu", "--cache-dir",
                    work / "oracle-cache"], input=req, capture_output=True, timeout=300)
frames = read_frames(p.stdout)
expect("the oracle says hello, then prepared", [f.get("event") for f in frames] == ["hello", "prepared"],
       f"{frames} {p.stderr.decode()[-2000:]}")
check = f"""
import json, sys, numpy as np, torch
sys.path.insert(0, {str(problem.parent)!r})
ctx = {{}}
exec(open({str(problem)!r}).read(), ctx)
prep = json.loads(sys.stdin.read())
def set_seed(s):
    torch.manual_seed(s)
torch.manual_seed(42)
trials = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(3)]
set_seed(42); init = ctx['get_init_inputs']()
set_seed(42); model = ctx['Model'](*init)
for s in prep['seeds']:
    assert s['trial_seed'] == trials[s['index']], (s['trial_seed'], trials)
    set_seed(s['trial_seed']); x = ctx['get_inputs']()[0].float()
    with torch.no_grad():
        y = model(x)
    want = [x, model.fc.weight, model.fc.bias, y]
    got_meta = s['inputs'] + s['outputs']
    assert len(got_meta) == 4
    for w, m in zip(want, got_meta):
        raw = open(m['path'], 'rb').read()[m['offset']:m['offset'] + m['bytes']]
        got = np.frombuffer(raw, dtype=np.float32)
        assert np.array_equal(got, w.detach().numpy().reshape(-1)), 'values differ'
print('same')
"""
if len(frames) == 2:
    c = subprocess.run([args.python, "-c", check], input=json.dumps(frames[1]), capture_output=True, text=True,
                       timeout=300)
    expect("trial seeds, inputs, parameters and outputs are KernelBench's", c.stdout.strip() == "same",
           c.stdout + c.stderr)

# Verdicts, metrics and the fast_p table; one oracle per task for the whole run.
# Consecutive candidates of one task share its oracle (as every candidate of a
# search run does); the next task's oracle replaces it.
pairs = [("1_Tiny_ReLU", "relu_ok"), ("1_Tiny_ReLU", "relu_wrong"), ("2_Tiny_Linear", "linear_ok"),
         ("3_Tiny_Scale", "scale_ok")]
argv = ["eval", "--json", "--max-time", "0.1", "--seeds", "3"]
for task, cand in pairs:
    argv += ["--problem", f"kernelbench/level1/{task}={cands / (cand + '.md')}"]
code, out = ksearch(*argv)
try:
    result = json.loads(out[out.index("{"):])
except ValueError:
    result = None
expect("ksearch eval --problem prints JSON and exits 4 (a candidate fails) with a wrong problem",
       code == 4 and result is not None, out)
if result:
    rows = result["problems"]
    status = [r["status"] for r in rows]
    expect("verdicts: three correct, the wrong one incorrect", status == ["passed", "incorrect", "passed", "passed"],
           status)
    expect("all trials are checked (3 seeds before timing, one after)",
           "input seed" in rows[1]["workloads"][0]["message"], rows[1])
    expect("eager baselines are measured", all(r["eager_ms"] > 0 for r in rows), [r["eager_ms"] for r in rows])
    pids = {r["metrics"].get("oracle_pid") for r in rows if r["task"].endswith("1_Tiny_ReLU")}
    expect("one oracle process per task for the whole run", len(pids) == 1 and None not in pids, pids)
    s = result["summary"]
    speed = [r["speedup_over_eager"] for r in rows]
    expect("fast_0 is the correctness rate", s["fast_p_over_eager"]["fast_0"] == 0.75, s)
    want_fast1 = sum(1 for x in speed if x > 1) / 4
    expect("fast_1 counts correct problems faster than eager over all problems",
           abs(s["fast_p_over_eager"]["fast_1"] - want_fast1) < 1e-12, (s, speed))
    expect("n_total and n_correct", s["n_total"] == 4 and s["n_correct"] == 3, s)

# The listing needs no Python.
code, out = ksearch("tasks", "--kernelbench", fixtures, extra_env={"KSEARCH_PYTHON": "/nonexistent"})
expect("ksearch tasks --kernelbench lists the problems", code == 0 and "kernelbench/level1/2_Tiny_Linear" in out, out)

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
