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
4. A run folder is untrusted input (it is shared, attached to bug reports,
   downloaded): links in it to a private folder or file are never followed,
   for reading, writing or deleting; an answer of invalid UTF-8 resumes and
   replays with the same ids; escape sequences a candidate prints or writes
   do not reach the terminal; kernel files (/proc) and FIFOs are refused at
   once; an export never writes through a link; LLM options are checked with
   any model source.
"""
import json
import os
import shutil
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

# ---------------------------------------------------------------------------
# 4. Run folders are untrusted input
SECRET = "FAKE-PRIVATE-KEY-do-not-print-5e1f"
ESC_SRC = r'\x1b[2K\r\x1b[32mpassed\x1b[0m'  # in C source: erases the line and paints a fake "passed"
answers = {
    "good": kernel(),
    # Invalid UTF-8 in the code and in the file name (0xE9 alone, 0xFF 0xFE).
    "utf8": None,
    "escape": kernel(headers="#include <cstdio>\n#include <cstdlib>\n// \x1b]0;owned\x07 \x1b[31mred comment\n",
                     body=f'  std::printf("{ESC_SRC} all workloads\\n");\n  std::fprintf(stderr, "{ESC_SRC}\\n");\n'
                          '  std::fflush(stdout);\n  std::abort();'),
}
utf8_answer = kernel().replace("kernel.cpp", "kern\udce9l.cpp").replace(
    "#include <cstdint>\n", "#include <cstdint>\n// caf\udce9 \udcff\udcfe\n")
answer_model = work / "answer_model.py"
answer_model.write_text(
    "import sys\nsys.stdin.read()\n"
    f"answers = {answers!r}\nutf8 = {utf8_answer.encode('utf-8', 'surrogateescape')!r}\n"
    "mode = sys.argv[1]\n"
    "sys.stdout.buffer.write(utf8 if mode == 'utf8' else answers[mode].encode())\n")
env4 = dict(env)
env4.pop("OPENAI_API_KEY", None)


def ks(*argv, timeout=300):
    try:
        r = subprocess.run([args.ksearch, *map(str, argv)], capture_output=True, timeout=timeout, env=env4)
    except subprocess.TimeoutExpired:
        return None
    return r.returncode, (r.stdout + r.stderr).decode(errors="replace"), r.stdout + r.stderr


def quick_run(name, mode="good", rounds=1):
    d = work / name
    r = ks("run", "--task", task, "--language", "cpp", "--strategy", "greedy", "--max-rounds", rounds, "--timing-cap",
           "0.05", "--quiet", "--llm", f"command:{sys.executable} {answer_model} {mode}", "--run-dir", d)
    if r[0] not in (0, 3):
        sys.exit(f"{name}: the run for the attack failed ({r[0]}):\n{r[1]}")
    return d


def private(name, files=None):
    """A folder standing for ~/.ssh: a fake key (and `files`), outside every run."""
    d = work / "home" / name
    d.mkdir(parents=True)
    (d / "id_ed25519").write_text(SECRET)
    for n, content in (files or {}).items():
        (d / n).write_bytes(content)
    return d


def snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def refused(what, r, needles, forbidden=(SECRET,)):
    if r is None:
        failures.append(f"{what}: still running after its timeout")
        return
    code, out, _ = r
    bad = code == 0 or code < 0 or "internal error" in out
    missing = [n for n in needles if n not in out]
    leaked = [f for f in forbidden if f in out]
    if bad or missing or leaked:
        failures.append(f"{what}: exit {code}, missing {missing}, printed {leaked}:\n{out[-1500:]}")
    else:
        print(f"ok: {what}")


# best/ linked to a private folder: resume must not empty it.
run = quick_run("link-best")
home = private("best")
before = snapshot(home)
shutil.rmtree(run / "best")
os.symlink(home, run / "best")
refused("resume with best/ linked to a private folder", ks("resume", run, "--max-rounds", "2", "--quiet"),
        [f"{run / 'best'} is a symbolic link"])
if snapshot(home) != before:
    failures.append(f"resume changed the folder best/ links to: {sorted(snapshot(home))}")

# Linked logs: resume must not append through them.
for log in ("events.jsonl", "transcript.jsonl", "attempts.jsonl"):
    run = quick_run(f"link-{log}")
    home = private(log, {log: (run / log).read_bytes()})
    before = snapshot(home)
    (run / log).unlink()
    os.symlink(home / log, run / log)
    refused(f"resume with a linked {log}", ks("resume", run, "--max-rounds", "2", "--quiet"),
            [f"{run / log} is a symbolic link"])
    if snapshot(home) != before:
        failures.append(f"resume wrote through the linked {log}")

# world_model/ linked to a private folder: no snapshot is written there.
transcript_fixture = Path(args.source_dir) / "tests/fixtures/wm_e2e/transcript.jsonl"
run = work / "link-wm"
r = ks("run", "--task", task, "--language", "cpp", "--llm", f"replay:{transcript_fixture}", "--max-rounds", "2",
       "--wm-stagnation-window", "2", "--timing-cap", "0.05", "--quiet", "--run-dir", run)
if r[0] != 0 or not (run / "world_model").is_dir():
    sys.exit(f"the world-model run for the attack failed ({r[0]}):\n{r[1]}")
home = private("world_model", {p.name: p.read_bytes() for p in (run / "world_model").iterdir()})
before = snapshot(home)
shutil.rmtree(run / "world_model")
os.symlink(home, run / "world_model")
refused("resume with world_model/ linked to a private folder", ks("resume", run, "--max-rounds", "8", "--quiet"),
        [f"{run / 'world_model'} is a symbolic link"])
if snapshot(home) != before:
    failures.append(f"resume wrote world-model snapshots into a linked folder: {sorted(snapshot(home))}")

# An attempt's source file linked to a private file: never printed or embedded.
run = quick_run("link-source")
home = private("source")
attempt = next((run / "attempts").iterdir())
(attempt / "kernel.cpp").unlink()
os.symlink(home / "id_ed25519", attempt / "kernel.cpp")
link_msg = f"{attempt / 'kernel.cpp'} is a symbolic link"
refused("show --attempt of a linked source file", ks("show", run, "--attempt", "0"), [link_msg])
refused("eval --solution RUN whose best source is linked", ks("eval", "--task", task, "--solution", run), [link_msg])
refused("eval --solution ATTEMPT_FOLDER with a linked source",
        ks("eval", "--task", task, "--solution", attempt), [link_msg])
r = ks("report", run, "-o", work / "link-source.html")
page = (work / "link-source.html").read_text(errors="replace") if (work / "link-source.html").exists() else ""
if r[0] != 0 or SECRET in page or SECRET in r[1] or link_msg not in page:
    failures.append(f"report of a run with a linked source: exit {r[0]}, secret in the page: {SECRET in page}, "
                    f"the refusal named there: {link_msg in page}\n{r[1][-800:]}")
else:
    print("ok: report of a run with a linked source file")

# An answer of invalid UTF-8: run, resume and replay agree on every id.
run = quick_run("utf8", "utf8")
ids = lambda d: [json.loads(l)["solution_id"] for l in open(d / "attempts.jsonl")]
first = ids(run)
r = ks("resume", run, "--max-rounds", "2", "--quiet")
if r[0] != 0:
    failures.append(f"resume of a run whose model answered invalid UTF-8: exit {r[0]}:\n{r[1][-800:]}")
elif ids(run)[:1] != first or json.loads((run / "manifest.json").read_text())["status"] == "failed":
    failures.append(f"resume of the invalid-UTF-8 run changed its ids: {first} then {ids(run)}")
r = ks("replay", run, "--run-dir", work / "utf8-replay", "--quiet")
if r[0] != 0 or ids(work / "utf8-replay") != ids(run) or "Reproduced" not in r[1]:
    failures.append(f"replay of the invalid-UTF-8 run: exit {r[0]}, ids {ids(run)} vs "
                    f"{ids(work / 'utf8-replay') if (work / 'utf8-replay' / 'attempts.jsonl').exists() else None}:\n"
                    f"{r[1][-800:]}")
else:
    print(f"ok: an invalid-UTF-8 answer runs, resumes and replays as {first}")

# Escape sequences a candidate writes (source, quoted by the compiler) and
# prints (log): they would paint "passed" over "crashed" on the screen.
run = quick_run("escape", "escape")
(work / "escape.md").write_text(answers["escape"])
(work / "escape_compile.md").write_text(kernel(headers='#error "\x1b[2K\x1b[1A\x1b[32mpassed\x1b[0m"\n'))
for what, r, status in (
        ("eval (a crash)", ks("eval", "--task", task, "--solution", work / "escape.md"), b"crashed"),
        ("eval (a compile error)", ks("eval", "--task", task, "--solution", work / "escape_compile.md"),
         b"compile_error"),
        ("show --attempt", ks("show", run, "--attempt", "0"), b"crashed"),
        ("show", ks("show", run, "--attempts"), b"crashed")):
    raw = r[2]
    if b"\x1b" in raw or b"\r" in raw or b"\x07" in raw or status not in raw:
        failures.append(f"{what}: a candidate's control sequences reached the terminal: {raw[-600:]!r}")
    else:
        print(f"ok: {what} prints a candidate's output without control sequences")

# Kernel files and FIFOs as solutions and tasks: refused at once, never read.
fifo = work / "fifo"
os.mkfifo(fifo)
for argv, what, needle in (
        (["eval", "--task", task, "--solution", "/proc/kmsg"], "--solution /proc/kmsg", "/proc/kmsg"),
        (["eval", "--task", task, "--solution", "/proc/self/status"], "--solution /proc/self/status", "(/proc, /sys)"),
        (["eval", "--task", "/proc/self/status", "--solution", work / "escape.md"], "--task /proc/self/status",
         "(/proc, /sys)"),
        (["eval", "--task", task, "--solution", fifo], "--solution FIFO", "not a regular file")):
    t0 = time.time()
    r = ks(*argv, timeout=20)
    refused(f"{what} ({time.time() - t0:.2f} s)", r, [needle], ())
    if time.time() - t0 > 5:
        failures.append(f"{what}: took {time.time() - t0:.1f} s to refuse")

# Exports: atomic, and never through a link at the destination unless asked.
out_dir = work / "export"
out_dir.mkdir()
candidate = Path(args.source_dir) / "examples/trimul/candidates/v1_naive_fp32.md"
exp = ["export", "--format", "gpumode", "--task", "gpumode/trimul", "--solution", candidate, "--cache-dir",
       work / "cache"]
r = ks(*exp, "-o", out_dir / "submission.py")
if r[0] != 0:
    print(f"export checks skipped: no export here (NVRTC?): {r[1].strip()[:200]}")
else:
    names = sorted(p.name for p in out_dir.iterdir())
    if names != ["submission.py"]:
        failures.append(f"export left more than its file: {names}")
    home = private("export", {"authorized_keys": b"ssh-ed25519 AAAA user@host\n"})
    before = snapshot(home)
    os.symlink(home / "authorized_keys", out_dir / "linked.py")
    refused("export -o onto a link", ks(*exp, "-o", out_dir / "linked.py"),
            [f"{out_dir / 'linked.py'} is a symbolic link", "--follow-symlinks"], ())
    if snapshot(home) != before or not (out_dir / "linked.py").is_symlink():
        failures.append("export -o wrote through a link")
    r = ks(*exp, "-o", out_dir / "linked.py", "--follow-symlinks")
    if r[0] != 0 or not (home / "authorized_keys").read_text().startswith("# GPUMode submission"):
        failures.append(f"export --follow-symlinks did not write the link's target: exit {r[0]}\n{r[1][-500:]}")
    else:
        print("ok: export refuses a link at -o, and follows it with --follow-symlinks")

# LLM options are checked whatever answers the prompts.
for argv, needle in ((["--llm", "offline", "--temperature", "abc"], '--temperature needs a number, got "abc"'),
                     (["--llm", f"command:{sys.executable} {answer_model} good", "--max-output-tokens", "-5"],
                      "--max-output-tokens must be positive"),
                     (["--llm", "offline", "--request-timeout", "0"], "--request-timeout must be positive")):
    d = work / "flags-run"
    r = ks("run", "--task", task, "--language", "cpp", "--max-rounds", "1", "--run-dir", d, *argv)
    refused(" ".join(argv[2:]) + " with " + argv[1].split(":")[0], r, [needle], ())
    if r and r[0] != 2:
        failures.append(f"{argv}: exit {r[0]}, not the usage error 2")
    if d.exists():
        failures.append(f"{argv}: a run folder was made")
        shutil.rmtree(d)

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("security e2e: all attacks contained")
