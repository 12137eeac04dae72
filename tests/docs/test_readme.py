"""The README keeps its promises (issue 45): at most 150 lines; the two set-up
commands are the scripts CI runs, and the README names every Debian package
and PyPI package they install before they install it; every command in its
shell blocks runs here (the ones marked `[needs GPU]`, `[needs API key]`, ...
are checked against `ksearch <command> --help` and `ksearch tasks` instead of
run); its C and Python snippets name only what the headers and the package
declare; every document it or docs/README.md links exists, and docs/README.md
indexes every file under docs/.

    test_readme.py --ksearch BUILD/examples/cli/ksearch --source-dir SRC --work DIR

Each problem is one line; the test fails when there is any.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

MAX_LINES = 150
SETUP = ["examples/main_job.sh", "tests/run_tests.sh"]

ap = argparse.ArgumentParser()
ap.add_argument("--ksearch", required=True)
ap.add_argument("--source-dir", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--only-static", action="store_true", help="check without running the CPU commands")
args = ap.parse_args()
src = Path(args.source_dir)
ksearch = Path(args.ksearch).resolve()
work = Path(args.work)
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)

problems = []


def problem(what):
    problems.append(what)
    print("PROBLEM:", what, flush=True)


readme = (src / "README.md").read_text()
lines = readme.split("\n")
if readme.endswith("\n"):
    lines = lines[:-1]
if len(lines) > MAX_LINES:
    problem(f"README.md has {len(lines)} lines, more than {MAX_LINES}")
print(f"README.md: {len(lines)} lines")

# ---- Blocks: fenced (```lang) and indented (4 spaces, outside fences).
fenced = []    # (lang, [lines])
indented = []  # lines
in_fence = None
for line in lines:
    m = re.match(r"^```(\w*)", line)
    if m and in_fence is None:
        in_fence = (m.group(1), [])
        continue
    if line.startswith("```") and in_fence is not None:
        fenced.append(in_fence)
        in_fence = None
        continue
    if in_fence is not None:
        in_fence[1].append(line)
    elif line.startswith("    ") and line.strip():
        indented.append(line.strip())
if in_fence is not None:
    problem("README.md: a code fence is never closed")


def split_comment(line):
    """`cmd  # comment` -> (cmd, comment): the first # after a blank that is
    outside quotes starts the comment."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


# ---- The set-up commands: the two scripts, and what they install said first.
setup_cmds = [split_comment(l)[0] for l in indented]
if setup_cmds != SETUP:
    problem(f"the README's set-up commands are {setup_cmds}, not the two CI runs: {SETUP}")
for s in SETUP:
    p = src / s
    if not p.is_file() or not os.access(p, os.X_OK):
        problem(f"{s} is not an executable file")
first_setup = readme.find("    " + SETUP[0])
deps = (src / "cmake/install-deps.sh").read_text()
m = re.search(r'^packages="([^"]+)"', deps, re.M)
if not m:
    problem("cmake/install-deps.sh: no packages=\"...\" line to read")
else:
    for pkg in m.group(1).split():
        at = re.search(r"(?<![\w-])" + re.escape(pkg) + r"(?![\w-])", readme)
        if not at or at.start() > first_setup:
            problem(f"the README does not name the Debian package {pkg} (installed by the set-up commands) "
                    f"before the commands")
for s in SETUP:
    for pkg in re.findall(r"pip install --quiet (\S+)", (src / s).read_text()):
        at = readme.find(pkg)
        if at < 0 or at > readme.find("## Try it"):
            problem(f"{s} pip-installs {pkg}; the README's set-up section does not say so")

# ---- Shell blocks: run the CPU commands, check the marked ones.
env = dict(os.environ)
env["PATH"] = f"{ksearch.parent}{os.pathsep}{env.get('PATH', '')}"
env["KSEARCH_CACHE_DIR"] = str(work / "cache")
for k in ("OPENAI_API_KEY", "KSEARCH_API_KEY"):
    env.pop(k, None)  # a CPU command must not need one
(work / "examples").symlink_to(src / "examples")  # commands run from a checkout

help_cache = {}


def help_of(command):
    if command not in help_cache:
        r = subprocess.run([str(ksearch), command, "--help"], capture_output=True, text=True, timeout=60)
        help_cache[command] = r.stdout if r.returncode == 0 else None
    return help_cache[command]


task_names = None


def known_tasks():
    global task_names
    if task_names is None:
        r = subprocess.run([str(ksearch), "tasks", "--json"], capture_output=True, text=True, timeout=120, env=env)
        task_names = {t["name"] for t in json.loads(r.stdout)} if r.returncode == 0 else set()
    return task_names


def check_against_help(cmd, where):
    """A command not run here: its options must exist, its task must be known."""
    words = shlex.split(cmd)
    if not words or words[0] != "ksearch":
        problem(f"{where}: a marked command that is not `ksearch ...`: {cmd}")
        return
    if len(words) < 2 or help_of(words[1]) is None:
        problem(f"{where}: `ksearch {words[1] if len(words) > 1 else ''} --help` fails")
        return
    text = help_of(words[1])
    for i, w in enumerate(words[2:], start=2):
        if w.startswith("--"):
            name = w.split("=", 1)[0]
            if not re.search(r"(^|\s)" + re.escape(name) + r"(\s|$)", text) and f"--{name[2:]}." not in text:
                problem(f"{where}: `ksearch {words[1]}` has no option {name}")
        if w == "--task" and i + 1 < len(words):
            t = words[i + 1]
            if not t.startswith(("./", "/", "~")) and t not in known_tasks():
                problem(f"{where}: task {t} is not one `ksearch tasks` lists")


ran = checked = 0
for lang, block in fenced:
    if lang not in ("sh", "bash", "console"):
        continue
    for raw in block:
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        cmd, comment = split_comment(raw)
        where = f"README `{cmd}`"
        if "[needs" in comment:
            check_against_help(cmd, where)
            checked += 1
            continue
        if args.only_static:
            check_against_help(cmd, where) if cmd.startswith("ksearch ") else None
            continue
        print(f"$ {cmd}", flush=True)
        try:
            r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            problem(f"{where}: did not finish in 900 s")
            continue
        ran += 1
        if r.returncode != 0:
            problem(f"{where}: exit {r.returncode}; it is not marked [needs ...]\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
print(f"ran {ran} CPU commands, checked {checked} marked ones against --help")
if ran + checked == 0:
    problem("the README has no shell commands")

# ---- C and Python snippets: only declared names.
headers = "".join(p.read_text() for p in (src / "include/ksearch").glob("*.h"))
package = "".join(p.read_text() for p in (src / "bindings/python/ksearch").glob("*.py"))
for lang, block in fenced:
    text = "\n".join(block)
    if lang == "c":
        for name in sorted(set(re.findall(r"\b(ks_\w+|KS_\w+)\b", text))):
            if not re.search(r"\b" + name + r"\b", headers):
                problem(f"README's C snippet uses {name}, which no header declares")
    elif lang == "python":
        try:
            compile(text, "README python snippet", "exec")
        except SyntaxError as e:
            problem(f"README's Python snippet does not compile: {e}")
        init = (src / "bindings/python/ksearch/__init__.py").read_text()
        for name in sorted(set(re.findall(r"\bksearch\.(\w+)", text))):
            if f'"{name}"' not in init:
                problem(f"README's Python snippet uses ksearch.{name}, which the package does not export")

# ---- Documents: links lead somewhere; docs/README.md indexes every file.
docs = src / "docs"
for path, text in (("README.md", readme), ("docs/README.md", (docs / "README.md").read_text())):
    base = src if path == "README.md" else docs
    for ref in set(re.findall(r"\b(docs/[\w./-]+\.md)\b", text)):
        if not (src / ref).is_file():
            problem(f"{path} names {ref}, which does not exist")
    for ref in set(re.findall(r"\]\(([^)#]+)\)", text)):
        if not ref.startswith("http") and not (base / ref).exists():
            problem(f"{path} links {ref}, which does not exist")
index = (docs / "README.md").read_text()
for f in sorted(docs.rglob("*")):
    rel = f.relative_to(docs).as_posix()
    if f.is_file() and rel != "README.md" and f"]({rel})" not in index:
        problem(f"docs/README.md does not index docs/{rel}")

if problems:
    print(f"FAIL: {len(problems)} problem(s)")
    sys.exit(1)
print("ok: the README's commands run or are checked, and the documents are indexed")
