#!/usr/bin/env python3
"""How fast the evaluation server drops a client that sends no whole request,
and whether another client waits meanwhile (docs/evaluation.md, "The
evaluation server"). Starts a server with one `ksearch eval --server` on the
host fixture task scale3, then, several times each:

  silent   connect, send nothing: seconds until the server closes it;
  half     connect, send half a request: the same;
  beside   with a silent connection open, another client's whole request
           ("device"): seconds until it is answered.

and stops the server. Prints the times; it never fails on a time.

    benchmarks/eval/silent_client.py BUILD_DIR [REPEATS]
"""
import glob
import os
import socket
import subprocess
import sys
import tempfile
import time

build = sys.argv[1]
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
here = os.path.dirname(os.path.abspath(__file__))
source = os.path.normpath(os.path.join(here, "..", ".."))
ks = os.path.join(build, "examples", "cli", "ksearch")
task = os.path.join(source, "tests", "fixtures", "tasks", "scale3")

ANSWER = """```cpp kernel.cpp
#include <cstdint>
void scale3(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];
}
```
```json launch_plan
{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}
```
"""


def server_dir():
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return os.path.join(xdg, "ksearch")
    return f"/tmp/ksearch-{os.getuid()}"


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def until_closed(s, limit=60):
    t0 = time.monotonic()
    s.settimeout(limit)
    while s.recv(4096):
        pass
    return time.monotonic() - t0


with tempfile.TemporaryDirectory() as tmp:
    solution = os.path.join(tmp, "answer.md")
    with open(solution, "w") as f:
        f.write(ANSWER)
    cache = os.path.join(tmp, "cache")
    args = [ks, "eval", "--task", task, "--solution", solution, "--cache-dir", cache, "--server",
            "--server-idle", "120", "--max-time", "0.05"]
    before = set(glob.glob(os.path.join(server_dir(), "eval-*.sock")))
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    sockets = set(glob.glob(os.path.join(server_dir(), "eval-*.sock"))) - before
    if len(sockets) != 1:
        sys.exit(f"cannot tell the new server's socket among {sockets or 'none'}")
    path = sockets.pop()
    try:
        for _ in range(repeats):
            print(f"silent  dropped after {until_closed(connect(path)):.3f} s")
        for _ in range(repeats):
            s = connect(path)
            s.sendall(b'{"protocol": 1, "op": "dev')
            print(f"half    dropped after {until_closed(s):.3f} s")
        for _ in range(repeats):
            quiet = connect(path)
            time.sleep(0.2)
            other = connect(path)
            t0 = time.monotonic()
            other.sendall(b'{"protocol": 1, "op": "device"}\n')
            other.settimeout(60)
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = other.recv(4096)
                if not chunk:
                    break
                reply += chunk
            print(f"beside  answered after {(time.monotonic() - t0) * 1000:.1f} ms ({len(reply)} bytes)")
            other.close()
            quiet.close()
    finally:
        subprocess.run([ks, "eval", "--task", task, "--solution", solution, "--cache-dir", cache, "--stop-server"],
                       stdout=subprocess.DEVNULL)
