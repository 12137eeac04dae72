"""One CLI vocabulary (issue 45): one name per concept across commands, the
old spellings kept; did-you-mean for task names; `ksearch tasks` as a table
sorted as a person counts; exit codes for the edges; an export of a host run
refused with the right reason; --quiet and --verbose on every command."""
import os
import re
import subprocess
import sys

from e2e_common import setup

args, src, work = setup()
ks = args.ksearch
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
env.pop("COLUMNS", None)
failures = []


def run(argv, rc=0, extra_env=None):
    p = subprocess.run([ks] + [str(a) for a in argv], env=dict(env, **(extra_env or {})), capture_output=True,
                       text=True, timeout=600)
    if p.returncode != rc:
        failures.append(f"ksearch {' '.join(map(str, argv))}: exit {p.returncode}, expected {rc}\n"
                        f"stdout: {p.stdout[-1500:]}\nstderr: {p.stderr[-1500:]}")
    return p


def check(cond, what, detail=""):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(f"{what}\n{detail}")


# The output file: -o/--output everywhere, --out kept as another spelling.
for cmd in ("report", "compare", "export"):
    h = " ".join(run([cmd, "--help"]).stdout.split())  # the help wraps its lines
    check("-o, --output FILE" in h and "Also spelled --out" in h, f"{cmd} --help: -o/--output, --out named", h)
# The timing cap: --timing-cap on run and eval, eval's --max-time kept.
h = " ".join(run(["eval", "--help"]).stdout.split())
check("--timing-cap S" in h and "Also spelled --max-time" in h, "eval --help: --timing-cap, --max-time named", h)
check("--timing-cap S" in run(["run", "--help"]).stdout, "run --help: --timing-cap")

# A small host run to work on.
r1 = work / "r1"
base = ["run", "--task", "examples/matmul", "--llm", "offline", "--timing-cap", "0.1"]
run(base + ["--max-rounds", "2", "--run-dir", r1, "--quiet"])

# --max-rounds 0 is a usage error (2), not "no candidate passed" (3).
p = run(base + ["--max-rounds", "0", "--run-dir", work / "r0"], rc=2)
check("--max-rounds must be at least 1" in p.stderr, "run --max-rounds 0: exit 2 with the reason", p.stderr)
check(not (work / "r0").exists(), "run --max-rounds 0 makes no run folder")

p = run(["replay", r1, "--run-dir", work / "r0", "--max-rounds", "0"], rc=2)
check("--max-rounds must be at least 1" in p.stderr, "replay --max-rounds 0: exit 2 with the reason", p.stderr)
p = run(["resume", r1, "--max-rounds", "0"], rc=2)
check("--max-rounds must be at least 1" in p.stderr, "resume --max-rounds 0: exit 2 with the reason", p.stderr)

for spelling, name in (("--output", "a.html"), ("--out", "b.html"), ("-o", "c.html")):
    run(["report", r1, spelling, work / name])
    check((work / name).is_file(), f"report {spelling} writes the page")
    run(["compare", r1, spelling, work / ("cmp-" + name)])
    check((work / ("cmp-" + name)).is_file(), f"compare {spelling} writes the page")

for spelling in ("--timing-cap", "--max-time"):
    run(["eval", "--task", "examples/matmul", "--solution", r1, spelling, "0.1"])
p = run(["eval", "--task", "examples/matmul", "--solution", r1, "--timing-cap", "0"], rc=2)
check("--timing-cap must be positive" in p.stderr, "eval --timing-cap 0: a usage error naming it", p.stderr)

# Exporting a host (cpp) run says why, not that x86-64 is no NVRTC target.
p = run(["export", "--format", "gpumode", "--solution", r1, "-o", work / "sub.py"], rc=2)
check("host C++" in p.stderr and "NVRTC target" not in p.stderr and "x86-64" not in p.stderr,
      "export of a cpp run folder: the language is the reason", p.stderr)

# Did-you-mean for task names, as --task takes them; no list of every task.
for typed in ("examples/matmal", "matmull"):
    p = run(["run", "--task", typed, "--llm", "offline"], rc=1)
    check("did you mean examples/matmul?" in p.stderr and "mean matmul" not in p.stderr and len(p.stderr) < 400,
          f"an unknown task {typed}: did you mean examples/matmul", p.stderr)
p = run(["eval", "--task", "gpumode/trimull", "--solution", r1], rc=1)
check("did you mean gpumode/trimul" in p.stderr, "eval: did you mean gpumode/trimul", p.stderr)

# ksearch tasks: a table with a header, what each task needs, sorted as a
# person counts; cut to $COLUMNS.
p = run(["tasks"], extra_env={"COLUMNS": "100"})
rows = p.stdout.split("\n\n")[0].splitlines()
check(rows and re.match(r"TASK\s+LANGUAGES\s+NEEDS\s+WHAT", rows[0]), "tasks: a header row", p.stdout[:500])
check(all(len(r) <= 100 for r in rows), "tasks: rows cut to $COLUMNS", "\n".join(r for r in rows if len(r) > 100))
names = [r.split()[0] for r in rows[1:] if r.strip()]
matmul = [r for r in rows if r.startswith("examples/matmul ")]
check(matmul and " CPU " in matmul[0], "tasks: examples/matmul needs the CPU only", "\n".join(matmul))
softmax = [r for r in rows if r.startswith("examples/softmax ")]
check(softmax and " GPU " in softmax[0], "tasks: examples/softmax needs a GPU", "\n".join(softmax))


def natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


check(names == sorted(names, key=natural), "tasks: sorted naturally (2 before 10)", "\n".join(names))
level1 = [n for n in names if n.startswith("kernelbench/level1/")]
check(len(level1) < 2 or natural(level1[0]) < natural(level1[1]), "tasks: kernelbench level 1 in numeric order",
      "\n".join(level1[:5]))
p = run(["tasks", "--long"])
check("source: built-in" in p.stdout, "tasks --long: the sources", p.stdout[:300])

# --quiet and --verbose: every command takes them.
for argv in (["tasks", "--quiet"], ["tasks", "--verbose"], ["show", r1, "--verbose"], ["devices", "--quiet"]):
    p = subprocess.run([ks] + [str(a) for a in argv], env=env, capture_output=True, text=True, timeout=120)
    check("unknown option" not in p.stderr, f"ksearch {' '.join(map(str, argv))}: accepted", p.stderr)

if failures:
    print("\n".join(["", "FAILURES:"] + failures))
    sys.exit(1)
print("ok: one CLI vocabulary")
