#!/usr/bin/env python3
"""End to end: a ksearch CLI that scripts well. One check per fix:

- --json prints only JSON on stdout (progress on stderr), errors included;
- distinct exit codes: 0 passed, 3 ran without a passing kernel, 4 the
  evaluated candidate fails, 1 error, 2 usage (and --help says so);
- the live line carries the first line of a failure's reason;
- `show RUN --attempt ID`: code, compiler log, evaluation, diff against the
  parent (applied to the parent, the diff gives the attempt's code);
- SIGTERM is handled like Ctrl-C: the first says it stops after the round and
  leaves the manifest "stopped"; a second stops at once and still leaves it
  "stopped"; the run resumes;
- `resume --max-rounds` is the run's total budget; below the rounds done it
  is refused with the reason;
- `eval` accepts every solution file a run folder holds (and best.json, an
  attempt folder, the run folder);
- --language is inferred for a task with one language;
- task names follow one scheme, and every listed name loads from any folder;
- a world-model fallback (a `command:` model that only writes code) is a
  warning on stderr with its likely cause, and `show` lists it;
- --llm-timeout limits a `command:` model's answer;
- the README's ksearch commands use options that exist and tasks that load,
  from any folder.
Runs use the host task scale3 and the local OpenAI-compatible test server.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from e2e_common import setup

args, src, work = setup("--server")
args.ksearch = str(Path(args.ksearch).resolve())
args.server = str(Path(args.server).resolve())
task = src / "tests/fixtures/tasks/scale3"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"), OPENAI_API_KEY="sk-test-cli")
failures = []


def check(name, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + name)
    if not ok:
        failures.append(f"{name}\n{str(detail)[-3000:]}")


def kernel(reps=1, factor="3.0f", broken=False):
    sig = "std::int64_t n" + ("" if broken else ")")
    return (f"```cpp kernel.cpp\n#include <cstdint>\nvoid scale3(const float* x, float* y, {sig} {{\n"
            f"  for (int r = 0; r < {reps}; ++r) {{\n    for (std::int64_t i = 0; i < n; ++i) y[i] = {factor} * x[i];\n"
            f"    asm volatile(\"\" ::: \"memory\");\n  }}\n}}\n```\n```json launch_plan\n"
            '{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n')


class Server:
    """With gate, every answer after the first `free` ones (the default too) is held until the file
    gate exists: the test decides when a run may go on, not a delay."""

    def __init__(self, name, answers, gate=None, free=0):
        script = {"behaviours": [{"kind": "answer", "text": t} for t in answers],
                  "default": {"kind": "answer", "text": answers[-1]}}
        if gate:
            for b in script["behaviours"][free:] + [script["default"]]:
                b["wait_file"] = str(gate)
        (work / f"{name}.json").write_text(json.dumps(script))
        self.log = work / f"{name}-requests.jsonl"
        self.p = subprocess.Popen([args.server, "--script", str(work / f"{name}.json"), "--log", str(self.log)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.p.stdout.readline()
        if "listening on" not in line:
            sys.exit(f"test server did not start: {line!r}")
        self.url = line.split("listening on", 1)[1].strip()

    def prompts(self):
        """POST requests received so far (a prompt reached the server)."""
        return self.log.read_text().count('"method":"POST"') if self.log.exists() else 0

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=10)
        self.p.stdout.close()


class Stderr:
    """A process's stderr, read on a thread, so the test can wait for a line without blocking on the pipe."""

    def __init__(self, p):
        self.lines, self.closed, self.cv = [], False, threading.Condition()
        self.t = threading.Thread(target=self._read, args=(p.stderr,), daemon=True)
        self.t.start()

    def _read(self, pipe):
        for line in pipe:
            with self.cv:
                self.lines.append(line)
                self.cv.notify_all()
        with self.cv:
            self.closed = True
            self.cv.notify_all()

    def wait_for(self, needle, limit=300):
        """Whether a line holding needle came before the pipe closed (limit: a safety net against a hang)."""
        with self.cv:
            self.cv.wait_for(lambda: self.closed or any(needle in l for l in self.lines), timeout=limit)
            return any(needle in l for l in self.lines)

    def text(self):
        self.t.join(timeout=60)
        with self.cv:
            return "".join(self.lines)


def wait_until(cond, limit=300):
    """Polls cond; the limit is a safety net against a hang, never what a test measures."""
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def ended(p, limit=300):
    """p's exit status, or None (and p killed) if it did not end: a hang fails the check, not the suite."""
    try:
        return p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None


def ksearch(*argv, cwd=None, timeout=600):
    return subprocess.run([args.ksearch, *map(str, argv)], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


def greedy(url, run_dir, rounds, *extra):
    return ["run", "--task", task, "--strategy", "greedy", "--model", "test-model", "--base-url", url,
            "--max-rounds", str(rounds), "--timing-cap", "0.05", "--run-dir", run_dir, *extra]


def parses(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def attempts(run):
    return [json.loads(l) for l in (run / "attempts.jsonl").read_text().splitlines() if l]


# A run with a passing, a failing (compile error) and an incorrect round, in
# human form (live lines) and with --json (JSON only on stdout).
srv = Server("mixed", [kernel(4), kernel(broken=True), kernel(1, "2.0f"), kernel(1)])
try:
    human = ksearch(*greedy(srv.url, work / "human", 4))
    js = ksearch(*greedy(srv.url, work / "json", 4, "--json"))
finally:
    srv.stop()
check("run: exit 0 with a passing kernel", human.returncode == 0, human.stdout + human.stderr)
line = [l for l in human.stdout.splitlines() if l.startswith("[  2/4")]
check("live line of a compile error carries the first line of its reason",
      len(line) == 1 and "compile_error" in line[0] and "error: expected" in line[0], human.stdout)
line = [l for l in human.stdout.splitlines() if l.startswith("[  3/4")]
check("live line of a wrong result carries the first line of its reason",
      len(line) == 1 and "incorrect" in line[0] and "differ from the reference" in line[0], human.stdout)
out = parses(js.stdout)
check("--json: stdout is one JSON document", out is not None and out.get("exit_code") == 0 and "best" in out,
      js.stdout)
check("--json: the start and round lines went to stderr", "[  1/4" in js.stderr and "run folder" in js.stderr,
      js.stderr)

# Errors with --json: a JSON document on stdout, and distinct exit codes.
r = ksearch("run", "--task", "no/such-task", "--llm", "offline", "--strategy", "tune", "--json")
e = parses(r.stdout)
check("--json error: JSON on stdout, exit 1, status not_found",
      r.returncode == 1 and e and e["error"]["status"] == "not_found" and e["error"]["exit_code"] == 1
      and "no/such-task" in e["error"]["message"], r.stdout + r.stderr)
r = ksearch("run", "--task", task, "--max-roundz", "3", "--json")
e = parses(r.stdout)
check("--json usage error: JSON on stdout, exit 2",
      r.returncode == 2 and e and e["error"]["exit_code"] == 2 and "--max-rounds" in e["error"]["message"],
      r.stdout + r.stderr)
r = ksearch("show", work / "nothing", "--json")
check("--json on show: the error as JSON", r.returncode == 1 and parses(r.stdout) is not None, r.stdout + r.stderr)
for cmd in ("run", "resume", "eval"):
    h = ksearch(cmd, "--help").stdout
    check(f"{cmd} --help documents the exit codes",
          all(s in h for s in ("Exit status: 0", "1 error", "2 usage error", "3 the run ended without a passing kernel",
                               "4 the evaluated candidate does not pass", "130 interrupted")), h)

# Exit 3: every candidate fails.
srv = Server("allbad", [kernel(broken=True)])
try:
    r = ksearch(*greedy(srv.url, work / "allbad", 2, "--quiet"))
finally:
    srv.stop()
check("run without a passing kernel: exit 3", r.returncode == 3, r.stdout + r.stderr)

# eval: every solution file of a run folder; exit 0 or 4 as recorded.
run = work / "human"
rows = attempts(run)
ok_all = True
detail = []
for a in rows:
    d = run / "attempts" / f"{a['seq']:04d}-{a['solution_id']}"
    if not (d / "solution.json").exists():
        continue
    for target in (d / "solution.json", d):
        r = ksearch("eval", "--task", task, "--solution", target, "--max-time", "0.05", "--json")
        j = parses(r.stdout)
        want = 0 if a["status"] == "passed" else 4
        good = r.returncode == want and j is not None and j.get("status") == a["status"] and j.get("exit_code") == want
        ok_all &= good
        detail.append(f"{target}: exit {r.returncode} (want {want}), {r.stderr[-300:]}")
check("eval accepts attempts/*/solution.json and attempt folders; exit 0 passed, 4 failed", ok_all, "\n".join(detail))
for target in (run / "best" / "solution.json", run / "best.json", run / "best", run):
    r = ksearch("eval", "--task", task, "--solution", target, "--max-time", "0.05")
    check(f"eval accepts {target.relative_to(work)}", r.returncode == 0 and "passed" in r.stdout, r.stdout + r.stderr)
# eval --server: the same verdict from this user's evaluation server, which a
# second fresh process finds warm; --stop-server ends it and what it left.
served = [ksearch("eval", "--task", task, "--solution", run / "best", "--max-time", "0.05", "--json", "--server",
                  "--server-idle", "120", "--cache-dir", work / "server-cache") for _ in range(2)]
js = [parses(x.stdout) or {} for x in served]
pids = [j.get("metrics", {}).get("evaluation_server_pid") for j in js]
check("eval --server: passed twice, by one server, warm the second time",
      all(x.returncode == 0 for x in served) and pids[0] and pids[0] == pids[1]
      and js[1]["metrics"]["phases"]["worker_start_s"] == 0 and js[1]["metrics"]["phases"]["reference_compile_s"] == 0,
      "\n".join(x.stdout[-500:] + x.stderr[-500:] for x in served))
r = ksearch("eval", "--stop-server", "--cache-dir", work / "server-cache")
check("eval --stop-server: stopped", r.returncode == 0 and "stopped" in r.stderr, r.stderr)
r = ksearch("eval", "--stop-server", "--cache-dir", work / "server-cache")
check("eval --stop-server again: none runs", r.returncode == 0 and "no evaluation server" in r.stderr, r.stderr)
r = ksearch("eval", "--task", task, "--solution", work / "no-such-file.json")
check("eval of a missing file: exit 1, named", r.returncode == 1 and "no-such-file.json" in r.stderr, r.stderr)

# show --attempt: the failing round's code, log and evaluation; the diff
# against its parent rebuilds its code from the parent's.
bad = next(a for a in rows if a["status"] == "compile_error")
r = ksearch("show", run, "--attempt", bad["seq"])
check("show --attempt: code, compiler log, evaluation",
      r.returncode == 0 and "== kernel.cpp ==" in r.stdout and "== compiler and run log ==" in r.stdout
      and "error: expected" in r.stdout and "== evaluation ==" in r.stdout and "compile_error" in r.stdout, r.stdout)


def apply_diff(old, diff):
    """Applies a unified diff of one file to `old`."""
    lines = old.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out, pos = [], 0
    for part in re.split(r"^(@@ -\d+,\d+ \+\d+,\d+ @@)$", diff, flags=re.M)[1:]:
        m = re.match(r"@@ -(\d+),(\d+) \+\d+,\d+ @@", part)
        if m:
            start = int(m.group(1)) - (1 if int(m.group(2)) else 0)
            out += lines[pos:start]
            pos = start
            continue
        for l in part.strip("\n").split("\n"):
            if l.startswith(" "):
                out.append(l[1:])
                pos += 1
            elif l.startswith("-"):
                pos += 1
            elif l.startswith("+"):
                out.append(l[1:])
    return "\n".join(out + lines[pos:]) + "\n"


child = next(a for a in rows if a["parent_id"] and a["status"] == "incorrect")
r = ksearch("show", run, "--attempt", child["solution_id"][:10], "--json")
j = parses(r.stdout)
parent = next(a for a in rows if a["solution_id"] == child["parent_id"])
pcode = (run / "attempts" / f"{parent['seq']:04d}-{parent['solution_id']}" / "kernel.cpp").read_text()
ccode = (run / "attempts" / f"{child['seq']:04d}-{child['solution_id']}" / "kernel.cpp").read_text()
diff = j["diff_against_parent"] if j else ""
file_diff = diff.split("--- parent/launch_plan")[0]
check("show --attempt ID-prefix --json: the attempt, its parent and the diff",
      j is not None and j["seq"] == child["seq"] and j["parent_seq"] == parent["seq"]
      and "--- parent/kernel.cpp" in diff and "+++ kernel.cpp" in diff, r.stdout + r.stderr)
check("the diff applied to the parent's code gives the attempt's code",
      apply_diff(pcode, file_diff.split("+++ kernel.cpp\n", 1)[-1]) == ccode, diff)
r = ksearch("show", run, "--attempt", "999")
check("show --attempt of an unknown id: exit 1, says what exists", r.returncode == 1 and "no such attempt" in r.stderr,
      r.stderr)

# SIGTERM once: stop after the round, manifest "stopped", exit 130; resume.
# The test sets the pace: rounds 1 and 2 are answered, round 3's answer is
# held until the run has said it will stop after the round; the second run's
# first answer is held for good, so only the second SIGTERM can end it.
go_term, go_twice = work / "term-go", work / "term2-go"
srv = Server("slow", [kernel(1)] * 2, gate=go_term, free=2)
srv2 = Server("slow2", [kernel(1)], gate=go_twice)
try:
    term = work / "term"
    p = subprocess.Popen([args.ksearch, *map(str, greedy(srv.url, term, 30))], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    err = Stderr(p)
    wait_until(lambda: srv.prompts() >= 3 or p.poll() is not None)  # round 3 waits for its answer
    p.send_signal(signal.SIGTERM)
    said = err.wait_for("stopping after the current round")
    go_term.touch()  # round 3 may finish now
    rc = ended(p)
    err = err.text()
    m = json.loads((term / "manifest.json").read_text())
    check("SIGTERM: says it stops after the current round", said, err)
    check("SIGTERM: exit 130, manifest stopped (cancelled)",
          rc == 130 and m["status"] == "stopped" and m["stop_reason"] == "cancelled",
          f"exit {rc}, manifest {m['status']} {m.get('stop_reason')}\n{err}")
    done = max(a["round"] for a in attempts(term))
    check("SIGTERM: the round in progress was finished, no later one begun", done == 3, attempts(term))
    # SIGTERM twice, during an answer that never comes: stopped at once, still "stopped".
    twice = work / "term2"
    p = subprocess.Popen([args.ksearch, *map(str, greedy(srv2.url, twice, 30))], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    err = Stderr(p)
    wait_until(lambda: srv2.prompts() >= 1 or p.poll() is not None)  # the run is waiting for its answer
    p.send_signal(signal.SIGTERM)
    said = err.wait_for("stopping after the current round")
    p.send_signal(signal.SIGTERM)
    rc = ended(p)
    err = err.text()
    m = json.loads((twice / "manifest.json").read_text())
    check("second SIGTERM: stops at once (exit 130), manifest stopped (interrupted)",
          said and rc == 130 and m["status"] == "stopped" and m["stop_reason"] == "interrupted"
          and "stopped at once" in err,
          f"exit {rc}, {m['status']} {m.get('stop_reason')}\n{err}")
    r = ksearch("show", twice)
    check("show of a twice-interrupted run says stopped", "status stopped (interrupted)" in r.stdout, r.stdout)

    # resume --max-rounds: the total budget; below the rounds done refused.
    if done > 1:
        r = ksearch("resume", term, "--max-rounds", str(done - 1), "--quiet")
        check("resume --max-rounds below the rounds done: refused, exit 2, explained",
              r.returncode == 2 and f"below the {done} rounds this run has already done" in r.stderr
              and "total round budget" in r.stderr, r.stderr)
    r = ksearch("resume", term, "--max-rounds", str(done + 2), "--json")
    j = parses(r.stdout)
    counted = [a for a in attempts(term) if a["round"] > 0]
    m = json.loads((term / "manifest.json").read_text())
    check(f"resume --max-rounds {done + 2} on a 30-round run stopped after {done}: {done + 2} rounds in all",
          r.returncode == 0 and j and j["rounds"] == done + 2 and len(counted) == done + 2
          and m["config"]["max_rounds"] == done + 2 and m["status"] == "finished", r.stdout + r.stderr)
    go_twice.touch()
    r = ksearch("resume", twice, "--max-rounds", "1", "--quiet")
    m = json.loads((twice / "manifest.json").read_text())
    check("a twice-interrupted run resumes", r.returncode == 0 and m["status"] == "finished", r.stdout + r.stderr)
finally:
    srv.stop()
    srv2.stop()

# --language inferred: scale3 has only a cpp version.
srv = Server("lang", [kernel(1)])
try:
    r = ksearch("run", "--task", task, "--model", "test-model", "--base-url", srv.url, "--max-rounds", "1",
                "--strategy", "greedy", "--timing-cap", "0.05", "--run-dir", work / "lang")
finally:
    srv.stop()
m = json.loads((work / "lang" / "manifest.json").read_text()) if (work / "lang" / "manifest.json").exists() else {}
check("--language inferred for a one-language task",
      r.returncode == 0 and m.get("config", {}).get("language") == "cpp" and "language cpp" in r.stdout,
      r.stdout + r.stderr)

# Task names: one scheme, and every listed name loads from any folder.
r = ksearch("tasks", "--json", cwd="/")
listed = json.loads(r.stdout)
names = [t["name"] for t in listed]
examples = [t["name"] for t in listed if t["source"] != "built-in"]
suites = {t["name"].split("/")[0] + "/" for t in listed if t["source"] == "built-in"}
check("tasks: examples/matmul and examples/softmax, every example as examples/<name>",
      "examples/matmul" in names and "examples/softmax" in names and all(n.startswith("examples/") for n in examples),
      names)
bad = [n for n in names if ksearch("tasks", "--spec", n, cwd="/").returncode != 0]
check("tasks: every listed name loads from /", not bad, bad)

# A `command:` model that only writes code: wm_init falls back, and the run says so on stderr (--quiet
# or not) with the likely cause, and `show` lists it; the command's time limit is --llm-timeout.
code_only = work / "code_only.py"
code_only.write_text("import sys\nsys.stdin.read()\nprint(" + repr(kernel(1)) + ")\n")
r = ksearch("run", "--task", task, "--language", "cpp", "--llm", f"command:{sys.executable} {code_only}",
            "--max-rounds", 1, "--timing-cap", "0.05", "--quiet", "--run-dir", work / "code_only")
check("a world-model fallback is a warning on stderr with its likely cause",
      r.returncode == 0 and "ksearch: warning: world model (wm_init): all 3 answers to wm_init were rejected" in r.stderr
      and "--strategy greedy" in r.stderr, r.stderr)
shown = ksearch("show", work / "code_only", "--no-tree").stdout
check("show lists the fallback and why", "world model fallback (wm_init): all 3 answers" in shown, shown)
slow = work / "slow.py"
slow.write_text("import sys, time\nsys.stdin.read()\ntime.sleep(30)\n")
r = ksearch("run", "--task", task, "--language", "cpp", "--strategy", "greedy", "--llm-timeout", "0.5",
            "--llm", f"command:{sys.executable} {slow}", "--max-rounds", 1, "--quiet", "--run-dir", work / "slow")
answers = [json.loads(l) for l in (work / "slow" / "transcript.jsonl").read_text().splitlines() if l]
manifest = json.loads((work / "slow" / "manifest.json").read_text())
check("--llm-timeout limits a command model's answer, and the manifest keeps it",
      r.returncode == 3 and len(answers) == 1 and not answers[0]["response"]["ok"]
      and manifest["llm"]["command"]["timeout_s"] == 0.5, (r.stderr, answers[:1], manifest.get("llm")))
r = ksearch("run", "--task", task, "--llm-timeout", "5", "--model", "m", "--max-rounds", 1, "--run-dir", work / "x")
check("--llm-timeout without a command model is refused", r.returncode != 0 and "--llm-timeout applies to" in r.stderr,
      r.stderr)

# The README: every `ksearch ...` command uses options its --help lists, and
# every --task it names loads from another folder.
readme = (src / "README.md").read_text()
cmds = [l.split("#")[0].strip() for l in readme.splitlines() if re.match(r"\s*ksearch \w+", l)]
helps = {}
problems = []
for c in cmds:
    words = c.split()
    sub = words[1]
    helps.setdefault(sub, ksearch(sub, "--help").stdout)
    for opt in re.findall(r"(?<!\S)(--[a-z][a-z0-9-]*)", c):
        if f"  {opt}" not in helps[sub] and f", {opt}" not in helps[sub]:
            problems.append(f"{c}: {opt} is not an option of ksearch {sub}")
    if "--task" in words:
        name = words[words.index("--task") + 1]
        if name.startswith(("/", "~", "$", "./")) or "<" in name:
            continue  # a path to the reader's own task (./ says it is one), or a placeholder
        if "/" in name and not name.startswith(tuple(suites) + ("examples/",)):
            problems.append(f"{c}: --task {name} is a relative path, which works only from one folder")
        elif not name.startswith("kernelbench/") and ksearch("tasks", "--spec", name, cwd="/").returncode != 0:
            problems.append(f"{c}: --task {name} does not load from /")
check(f"README: {len(cmds)} ksearch commands use real options and tasks that load anywhere", cmds and not problems,
      "\n".join(problems))

if failures:
    sys.exit(f"{len(failures)} failure(s):\n" + "\n".join(failures))
print("CLI scripting checks passed")
