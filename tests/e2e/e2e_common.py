"""The command line every end-to-end script takes, its fresh work folder, a
run killed with SIGKILL at a point of its run folder's state, and reading a
run folder."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def setup(*more, **helps):
    """Parses --ksearch, --source-dir, --work and the options named in `more`
    (all required; `helps` maps an option's attribute name to its help), then
    empties the work folder. Returns (args, source folder, work folder)."""
    ap = argparse.ArgumentParser()
    for name in ("--ksearch", *more, "--source-dir", "--work"):
        ap.add_argument(name, required=True, help=helps.get(name.lstrip("-").replace("-", "_")))
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return args, Path(args.source_dir), work


def lines(path):
    """Complete lines of a journal file (0 when it does not exist yet)."""
    try:
        with open(path) as f:
            return sum(1 for line in f if line.endswith("\n"))
    except FileNotFoundError:
        return 0


def children(pid):
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid == pid:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return out


def alive(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_and_kill(cmd, run_dir, log_path, until, env):
    """Starts cmd, SIGKILLs it once until(run_dir) holds (a state of the run
    folder, never a time), and checks that its child processes end too."""
    log_name = Path(log_path).name
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 300
        while not until(run_dir):
            if p.poll() is not None:
                sys.exit(f"{log_name}: the run ended (rc {p.returncode}) before the kill point; see its log")
            if time.time() > deadline:
                p.kill()
                sys.exit(f"{log_name}: kill point not reached in 300 s")
            time.sleep(0.02)
        kids = children(p.pid)
        p.send_signal(signal.SIGKILL)
        p.wait()
    # Workers watch their parent and must exit on their own (in about half a second; the limit is a
    # safety net for a loaded machine, a worker that never exits still fails).
    deadline = time.time() + 60
    while any(alive(k) for k in kids) and time.time() < deadline:
        time.sleep(0.05)
    left = [k for k in kids if alive(k)]
    if left:
        for k in left:
            os.kill(k, signal.SIGKILL)
        sys.exit(f"{log_name}: processes {left} outlived the killed run")
    print(f"{log_name}: killed at {lines(run_dir / 'attempts.jsonl')} attempts, "
          f"{lines(run_dir / 'transcript.jsonl')} LLM answers; {len(kids)} child process(es) ended with it")


def jsonl(path):
    return [json.loads(line) for line in open(path) if line.endswith("\n")]


def events(run_dir, kind):
    """The run's events of one type, in order."""
    return [e for e in jsonl(Path(run_dir) / "events.jsonl") if e["type"] == kind]


def journal(run_dir):
    """The attempts without their measured numbers: what two runs of one search share."""
    return [(a["seq"], a["round"], a["solution_id"], a["status"]) for a in jsonl(Path(run_dir) / "attempts.jsonl")]


def snapshots(run_dir):
    return sorted((Path(run_dir) / "world_model").glob("v*.json"), key=lambda p: int(p.stem[1:]))


def last_tree(run_dir):
    return json.loads(snapshots(run_dir)[-1].read_text())["decision_tree"]


def tree_shape(tree):
    """A decision tree without measured numbers (timings differ between runs)."""
    nodes = []
    for n in tree["nodes"]:
        a = n.get("action") or {}
        ref = n.get("solution_ref") or {}
        nodes.append((n["node_id"], n.get("parent_id"), a.get("title"), a.get("score_0_to_1"),
                      a.get("difficulty_1_to_5"), ref.get("solution_id")))
    return sorted(nodes, key=str), tree.get("active_leaf_id")


def first_prompt(run_dir, kind):
    """The prompt of the run's first LLM call of `kind` ("" when none)."""
    for e in jsonl(Path(run_dir) / "transcript.jsonl"):
        if e["kind"] == kind:
            return e["request"]["prompt"]
    return ""


def same_end(full, other, expect):
    """A run killed and resumed ends where the uninterrupted run ends: the same
    attempts, final tree and best kernel, each strategy event once."""
    full, other = Path(full), Path(other)
    expect(journal(full) == journal(other),
           f"{other.name}: attempts differ from {full.name}'s:\n  {journal(full)}\n  {journal(other)}")
    expect(tree_shape(last_tree(full)) == tree_shape(last_tree(other)),
           f"{other.name}: final tree differs from {full.name}'s")
    best = [json.loads((d / "best.json").read_text())["solution_id"] for d in (full, other)]
    expect(best[0] == best[1], f"{other.name}: best {best[1]} differs from {full.name}'s {best[0]}")
    m = json.loads((other / "manifest.json").read_text())
    expect(m["status"] == "finished" and m.get("resumed", 0) >= 1,
           f"{other.name}: manifest says {m['status']}, resumed {m.get('resumed')}")
    seqs = [e["journal_seq"] for e in jsonl(other / "events.jsonl") if "journal_seq" in e]
    expect(len(seqs) == len(set(seqs)) and seqs == sorted(seqs), f"{other.name}: strategy events duplicated")


def run_logged(cmd, log_path, env, want=0, timeout=600):
    """Runs cmd with its output in log_path; ends the script, showing the log, when its exit status
    is not `want`. Returns the log."""
    with open(log_path, "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
    if rc != want:
        sys.exit(f"{Path(log_path).name}: exit status {rc}, not {want}; log:\n" + Path(log_path).read_text())
    return Path(log_path).read_text()


def logged_ksearch(ksearch, work, env):
    """ksearch(name, *argv, rc=0) runs the CLI, keeps its output in work/name.log, and ends the
    script (naming the log) when the exit code is not rc; returns (stdout, stderr)."""
    def run(name, *argv, rc=0):
        p = subprocess.run([ksearch, *map(str, argv)], capture_output=True, text=True, env=env, timeout=600)
        (work / f"{name}.log").write_text(f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}")
        if p.returncode != rc:
            sys.exit(f"{name}: exit {p.returncode}, expected {rc}; see {work / (name + '.log')}:\n{p.stdout}\n{p.stderr}")
        return p.stdout, p.stderr
    return run


class Expectations:
    """Checks that are all made before the script fails, so that one run
    reports every broken expectation at once."""

    def __init__(self):
        self.failures = []

    def __call__(self, cond, what):
        if not cond:
            self.failures.append(what)
        return cond

    def finish(self):
        if self.failures:
            sys.exit("\n".join(self.failures))


def edited_copy(source, dest, edit, name="manifest.json"):
    """A copy of the run folder `source` at `dest` whose JSON file `name` went
    through edit(obj) (as a folder made elsewhere, or forged, looks). Returns dest."""
    shutil.copytree(source, dest)
    obj = json.loads((dest / name).read_text())
    edit(obj)
    (dest / name).write_text(json.dumps(obj, indent=2))
    return dest


def start_test_server(server, script, log=None):
    """Starts the OpenAI-compatible test server (ks-openai-test-server) on the script file `script`, logging
    requests to `log` when given. Returns (process, base URL); the caller ends the process."""
    p = subprocess.Popen([str(server), "--script", str(script), *(["--log", str(log)] if log else [])],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = p.stdout.readline()
    if "listening on" not in line:
        p.kill()
        p.wait()
        sys.exit(f"test server did not start: {line!r}")
    return p, line.split("listening on", 1)[1].strip()
