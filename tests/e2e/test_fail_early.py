#!/usr/bin/env python3
"""End to end: a run fails before it spends, and says every retry.

Against the local OpenAI-compatible test server (which logs every request):
- a CUDA run on a machine without a GPU ends within seconds with a clear
  error, makes no request at all and leaves no run folder;
- a dead --base-url ends at once (no minutes of silent retries);
- an endpoint that refuses the key on GET /models ends before any prompt;
- a server without GET /models gets a warning, and the run goes on;
- a model the server does not list gets a warning, and the run goes on;
- every retry of a failing request is one line on stderr;
- a command model that does not exist ends before any prompt.
"""
import json
import os
import socket
import subprocess
import sys
import time

from e2e_common import setup

args, src, work = setup("--server")
task = src / "tests/fixtures/tasks/scale3"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"), OPENAI_API_KEY="sk-test-fail-early")
failures = []


def check(name, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + name)
    if not ok:
        failures.append(f"{name}\n{detail}")


KERNEL = ("```cpp kernel.cpp\n#include <cstdint>\nvoid scale3(const float* x, float* y, std::int64_t n) {\n"
          "  for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];\n}\n```\n```json launch_plan\n"
          '{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n')


class Server:
    def __init__(self, name, script=(), extra=()):
        self.log = work / f"{name}-requests.jsonl"
        (work / f"{name}-script.json").write_text(json.dumps(list(script)))
        self.p = subprocess.Popen([args.server, "--script", str(work / f"{name}-script.json"), "--log", str(self.log),
                                   *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.p.stdout.readline()
        if "listening on" not in line:
            sys.exit(f"test server did not start: {line!r}")
        self.url = line.split("listening on", 1)[1].strip()

    def requests(self):
        return [json.loads(l) for l in self.log.read_text().splitlines()] if self.log.exists() else []

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=10)
        self.p.stdout.close()


def run(name, *argv, timeout=300):
    t0 = time.time()
    r = subprocess.run([args.ksearch, "run", *map(str, argv), "--run-dir", str(work / name)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    return r, time.time() - t0


# 1. No GPU: a CUDA run ends in seconds, asks nothing, writes nothing.
has_gpu = subprocess.run([args.ksearch, "devices"], capture_output=True, env=env).returncode == 0
if has_gpu:
    print("skip: this machine has a GPU, so the no-GPU run cannot be checked here")
else:
    s = Server("nogpu", [{"kind": "answer", "text": "never", "repeat": 5}])
    try:
        r, secs = run("nogpu", "--task", "examples/softmax", "--language", "cuda", "--model", "test-model",
                      "--base-url", s.url, timeout=120)
    finally:
        s.stop()  # its threads are joined: every request it received is in its log
    reqs = s.requests()
    check("no GPU: exit 1 with an error that names the missing GPU",
          r.returncode == 1 and "needs a GPU" in r.stderr and "Nothing was sent to the LLM" in r.stderr,
          f"exit {r.returncode}\n{r.stderr}")
    # Seconds when honest, also on a loaded machine; the margin only catches a run that did real work.
    check(f"no GPU: over within seconds ({secs:.2f} s)", secs < 60)
    check("no GPU: zero requests reached the LLM server", reqs == [], json.dumps(reqs)[:2000])
    check("no GPU: no run folder left behind", not (work / "nogpu").exists())

# 2. A dead endpoint: nothing listens on the port.
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
dead_port = sock.getsockname()[1]
sock.close()
r, secs = run("dead", "--task", task, "--model", "test-model", "--base-url", f"http://127.0.0.1:{dead_port}/v1",
              timeout=300)
check("dead endpoint: exit 1, says the endpoint does not answer",
      r.returncode == 1 and "does not answer" in r.stderr and "nothing was sent to the model" in r.stderr,
      f"exit {r.returncode}\n{r.stderr}")
# A refused connection fails in milliseconds; silent retries would back off for minutes (8 retries: over 180 s).
check(f"dead endpoint: over at once ({secs:.2f} s), no retries", secs < 60 and "retry" not in r.stderr, r.stderr)
check("dead endpoint: no run folder", not (work / "dead").exists())

# 3. The key is refused on GET /models: no prompt is sent.
s = Server("refused", [{"kind": "answer", "text": KERNEL}], ["--models-status", "401"])
try:
    r, _ = run("refused", "--task", task, "--model", "test-model", "--base-url", s.url, timeout=60)
    reqs = s.requests()
finally:
    s.stop()
check("refused key: exit 1, HTTP 401 named", r.returncode == 1 and "HTTP 401" in r.stderr, r.stderr)
check("refused key: one GET /models, no prompt",
      [(q["method"], q["path"].rsplit("/", 1)[-1]) for q in reqs] == [("GET", "models")], json.dumps(reqs)[:1000])

# 4 and 5. A server without GET /models, then one that does not list the
# model: a warning each, and the run goes on. 6. Every retry is one line.
for name, extra, needle in [("noroute", ["--models-status", "404"], "answered HTTP 404 to GET /models"),
                            ("unlisted", ["--models", "other-model,third-model"], "lists 2 models, not \"test-model\"")]:
    script = [{"kind": "error", "status": 503, "message": "overloaded"},
              {"kind": "rate_limited", "retry_after": "0"},
              {"kind": "answer", "text": KERNEL}]
    s = Server(name, script, extra)
    try:
        r, _ = run(name, "--task", task, "--model", "test-model", "--base-url", s.url, "--strategy", "greedy",
                   "--max-rounds", "1", "--timing-cap", "0.05", "--quiet")
        reqs = s.requests()
    finally:
        s.stop()
    check(f"{name}: a warning, then the run passes",
          r.returncode == 0 and f"ksearch: warning: openai:test-model: " in r.stderr and needle in r.stderr,
          f"exit {r.returncode}\n{r.stderr}")
    retry_lines = [l for l in r.stderr.splitlines() if "request failed" in l and "retry" in l]
    check(f"{name}: one stderr line per retry (2 retries)",
          len(retry_lines) == 2 and "retry 1 of 8" in retry_lines[0] and "HTTP 503" in retry_lines[0]
          and "retry 2 of 8" in retry_lines[1] and "HTTP 429" in retry_lines[1]
          and all("generate request failed" in l for l in retry_lines), r.stderr)
    check(f"{name}: the server saw GET /models and 3 prompts",
          [q["method"] for q in reqs] == ["GET", "POST", "POST", "POST"], json.dumps([q["method"] for q in reqs]))

# 7. A command model that does not exist.
r, secs = run("nocommand", "--task", task, "--llm", "command:/no/such/model-program --flag", timeout=60)
check("missing command model: exit 2, named, before any prompt",
      r.returncode == 2 and "/no/such/model-program" in r.stderr and "not an executable program" in r.stderr
      and not (work / "nocommand").exists(), f"exit {r.returncode}\n{r.stderr}")

if failures:
    sys.exit(f"{len(failures)} failure(s):\n" + "\n".join(failures))
print("fail-early checks passed")
