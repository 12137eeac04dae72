#!/usr/bin/env python3
"""Attacks through the ksearch CLI, as a hostile model (or a careless user)
would make them:

1. A candidate prints the API key (and the key reversed, which no redaction
   can catch), its environment and its parent's, then crashes. The next
   prompt carries its output to the provider. The key must appear in no
   request body the local test server received, in no file of the run
   folder, and in the environment of no process ksearch started.
2. /dev/zero given as a solution, a task and a transcript fails at once.
3. A 20 MB answer: refused by default (not stored); accepted with
   --max-answer-size and stored once (prose) or with one copy of the
   extracted source (code).
"""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from e2e_common import setup

args, _, work = setup("--server")
task = Path(args.source_dir) / "tests/fixtures/tasks/scale3"
KEY = "sk-test-e2e-Never-Leak-41b7d2"
failures = []

PLAN = '```json launch_plan\n{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n'


def kernel(body="for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];", headers=""):
    return (f"```cpp kernel.cpp\n#include <cstdint>\n{headers}void scale3(const float* x, float* y, std::int64_t n) {{\n"
            f"{body}\n}}\n```\n" + PLAN)


LEAK = kernel(
    headers="#include <cstdio>\n#include <cstdlib>\n#include <fcntl.h>\n#include <string>\n#include <unistd.h>\n",
    body=r'''  const char* k = std::getenv("OPENAI_API_KEY");
  std::string key = k ? k : "(unset)";
  std::printf("KEY=%s REVERSED=%s\n", key.c_str(), std::string(key.rbegin(), key.rend()).c_str());
  const char* files[] = {"/proc/self/environ", "/proc/1/environ"};
  for (const char* f : files) {
    int fd = open(f, O_RDONLY);
    char buf[8192];
    long n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : 0;
    for (long i = 0; i < n; ++i) if (buf[i] == 0) buf[i] = ' ';
    if (n > 0) { buf[n] = 0; std::printf("ENV(%s)=%s\n", f, buf); }
  }
  std::fflush(stdout);
  usleep(500000);
  std::abort();''')


def descendants(root):
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
            parent[int(d)] = int(stat[stat.rfind(")") + 2:].split()[1])
        except OSError:
            pass
    out = []
    for pid in parent:
        p = parent.get(pid, 0)
        while p > 1:
            if p == root:
                out.append(pid)
                break
            p = parent.get(p, 0)
    return out


# ---------------------------------------------------------------------------
# 1. The key
script = [{"kind": "answer", "text": LEAK}, {"kind": "answer", "text": kernel()}]
(work / "script.json").write_text(json.dumps(script))
env = dict(os.environ, OPENAI_API_KEY=KEY, KSEARCH_CACHE_DIR=str(work / "cache"))
env.pop("KSEARCH_API_KEY", None)
server = subprocess.Popen([args.server, "--script", str(work / "script.json"), "--log", str(work / "requests.jsonl")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
holders, scanned = set(), [0]
try:
    line = server.stdout.readline()
    if "listening on" not in line:
        sys.exit(f"test server did not start: {line!r}")
    base_url = line.split("listening on", 1)[1].strip()
    run = subprocess.Popen([args.ksearch, "run", "--task", str(task), "--language", "cpp", "--strategy", "greedy",
                            "--max-rounds", "2", "--timing-cap", "0.2", "--quiet", "--model", "test-model",
                            "--base-url", base_url, "--run-dir", str(work / "live")],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def scan():
        while run.poll() is None:
            for pid in descendants(run.pid):
                try:
                    # A child between fork and exec still shows ksearch's own
                    # environment; it is not yet the program it becomes.
                    if os.readlink(f"/proc/{pid}/exe") == os.path.realpath(args.ksearch):
                        continue
                    e = open(f"/proc/{pid}/environ", "rb").read()
                except OSError:
                    continue
                scanned[0] += 1
                if KEY.encode() in e:
                    try:
                        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
                    except OSError:  # it exited meanwhile; it held the key all the same
                        cmd = f"pid {pid}"
                    holders.add(cmd)
            time.sleep(0.005)

    scanner = threading.Thread(target=scan)
    scanner.start()
    out, err = run.communicate(timeout=600)
    scanner.join()
finally:
    server.terminate()
    server.wait(timeout=10)
if run.returncode not in (0, 3):
    sys.exit(f"live run failed ({run.returncode}):\n{err}")
requests = [json.loads(l) for l in open(work / "requests.jsonl")]
bodies = "\n".join(r["body"] for r in requests)
if not all(r["headers"].get("authorization") == f"Bearer {KEY}" for r in requests):
    failures.append("the key did not travel where it belongs, in the Authorization header")
if "KEY=" not in bodies:
    failures.append("the candidate's output never reached the second prompt: the test proves nothing")
for needle, what in ((KEY, "the key"), (KEY[::-1], "the reversed key")):
    if needle in bodies:
        failures.append(f"{what} was sent to the provider")
    for f in (work / "live").rglob("*"):
        if f.is_file() and needle in f.read_text(errors="replace"):
            failures.append(f"{what} is in {f.relative_to(work)}")
if scanned[0] == 0:
    failures.append("no child process of ksearch was seen: the environment scan proves nothing")
for h in holders:
    failures.append(f"a process started by ksearch holds the key in its environment: {h}")
print(f"key attack: {scanned[0]} process environments scanned, {len(holders)} held the key")

# ---------------------------------------------------------------------------
# 2. /dev/zero everywhere a file is read


def quick(argv, what):
    # Refused at once or read forever: the 60 s bound only tells them apart, whatever the load.
    t0 = time.time()
    r = subprocess.run([args.ksearch, *argv], capture_output=True, text=True, timeout=300, env=env)
    dt = time.time() - t0
    if r.returncode == 0 or "not a regular file" not in r.stderr or dt > 60:
        failures.append(f"{what}: exit {r.returncode} after {dt:.2f} s: {r.stderr.strip()[:300]}")
    print(f"{what}: refused in {dt:.3f} s")


quick(["eval", "--task", str(task), "--solution", "/dev/zero"], "/dev/zero as a solution")
quick(["eval", "--task", "/dev/zero", "--solution", str(work / "none.md")], "/dev/zero as a task")
quick(["run", "--task", str(task), "--language", "cpp", "--llm", "replay:/dev/zero", "--run-dir",
       str(work / "zero-run")], "/dev/zero as a transcript")

# ---------------------------------------------------------------------------
# 3. A 20 MB answer
MB20 = 20_000_000
model = work / "big_model.py"
model.write_text(
    "import sys\nsys.stdin.read()\n"
    f"mode = sys.argv[1]\n"
    f"kernel = {kernel()!r}\n"
    f"if mode == 'prose':\n    sys.stdout.write('Filler prose. ' * ({MB20} // 14) + '\\n' + kernel)\n"
    f"else:\n    pad = '// filler comment line in the source\\n' * ({MB20} // 37)\n"
    f"    sys.stdout.write(kernel.replace('#include <cstdint>\\n', '#include <cstdint>\\n' + pad))\n")


def folder_bytes(d):
    seen, total = set(), 0
    for f in Path(d).rglob("*"):
        st = f.lstat()
        if f.is_file() and (st.st_dev, st.st_ino) not in seen:  # hard links count once
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def big_run(name, mode, extra):
    r = subprocess.run([args.ksearch, "run", "--task", str(task), "--language", "cpp", "--strategy", "greedy",
                        "--max-rounds", "1", "--timing-cap", "0.2", "--quiet", "--llm",
                        f"command:{sys.executable} {model} {mode}", "--run-dir", str(work / name), *extra],
                       capture_output=True, text=True, timeout=600, env=env)
    if r.returncode not in (0, 3):
        failures.append(f"{name}: exit {r.returncode}: {r.stderr[-500:]}")
    return folder_bytes(work / name), [json.loads(l)["status"] for l in open(work / name / "attempts.jsonl")]


size, statuses = big_run("big-default", "prose", [])
print(f"20 MB answer, default cap: {statuses}, run folder {size / 1e6:.2f} MB")
if statuses != ["generation_failed"] or size > 1_000_000:
    failures.append(f"a 20 MB answer under the default cap: {statuses}, {size} bytes stored")
size, statuses = big_run("big-prose", "prose", ["--max-answer-size", "32M"])
print(f"20 MB prose answer, 32M cap: {statuses}, run folder {size / 1e6:.2f} MB")
if statuses != ["passed"] or not (MB20 <= size < 1.1 * MB20):
    failures.append(f"a 20 MB prose answer is stored {size / MB20:.2f} times ({statuses})")
size, statuses = big_run("big-code", "code", ["--max-answer-size", "32M"])
print(f"20 MB code answer, 32M cap: {statuses}, run folder {size / 1e6:.2f} MB")
# The answer once in the transcript, its source once as a file (best/ links to it).
if statuses != ["passed"] or not (2 * MB20 <= size < 2.1 * MB20):
    failures.append(f"a 20 MB code answer takes {size / MB20:.2f} times its size ({statuses})")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("security e2e: all attacks contained")
