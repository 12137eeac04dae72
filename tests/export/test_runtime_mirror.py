#!/usr/bin/env python3
"""The exports' Python runtime against libksearch's C++ on the same inputs.

1. Expressions: curated and randomly generated (seeded) expressions, with
   variable values that reach every rule (integer overflow, C division,
   doubles, errors): the parse error, the value, eval_int and eval_double of
   lib/core/expr.cpp (through mirror_tool) must equal the runtime's Expr, message
   for message and bit for bit.
2. Launch plans: every shipped TriMul candidate, the task's CUDA reference and
   its tunable starting point are exported (`ksearch export --format bundle`);
   for every build, every workload of the task and further shapes (some of
   which a plan must refuse), the grid, block, cluster, shared memory, scratch
   sizes and argument bytes the C++ resolver computes - with the kernel catalog
   it builds from the cubin - must equal what the runtime computes from the
   manifest. Synthetic plans cover variants, clusters, typed arguments and the
   error messages.

  test_runtime_mirror.py --tool MIRROR_TOOL --ksearch KSEARCH --source-dir SRC --work DIR
"""
import argparse
import glob
import importlib.util
import json
import os
import random
import shutil
import struct
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--tool", required=True)
ap.add_argument("--ksearch", required=True)
ap.add_argument("--source-dir", required=True)
ap.add_argument("--work", required=True)
args = ap.parse_args()

spec = importlib.util.spec_from_file_location(
    "ksearch_runtime", os.path.join(args.source_dir, "lib/export/runtime/ksearch_runtime.py"))
rt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rt)

failures = []


def expect(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL:", what, detail)


def tool(request):
    p = subprocess.run([args.tool], input=json.dumps(request).encode(), capture_output=True)
    if p.returncode != 0:
        sys.exit("mirror_tool failed: " + p.stderr.decode())
    return json.loads(p.stdout)


# ---------------------------------------------------------------------------
# 1. Expressions

def bits(d):
    return str(struct.unpack("<Q", struct.pack("<d", d))[0])


def py_expr(text, variables):
    try:
        e = rt.Expr(text)
    except rt.ExprError as err:
        # A lone byte of a UTF-8 sequence: the C++ message holds the byte, which JSON writes as U+FFFD.
        return {"parse_error": str(err).encode("utf-8", "surrogateescape").decode("utf-8", "replace")}
    out = {"variables": e.variables()}
    try:
        is_int, v = e.eval(variables)
        out["value"] = {"int": str(v)} if is_int else {"double": bits(v)}
    except rt.ExprError as err:
        out["value"] = {"error": str(err)}
    try:
        out["eval_int"] = {"int": str(e.eval_int(variables))}
    except rt.ExprError as err:
        out["eval_int"] = {"error": str(err)}
    try:
        out["eval_double"] = {"double": bits(e.eval_double(variables))}
    except rt.ExprError as err:
        out["eval_double"] = {"error": str(err)}
    return out


BIG = 9223372036854775807
CURATED = [
    "1", "0", "42", "007", "1.5", ".5", "1.", "1e3", "1E-3", "2.5e+2", "1.e5", ".", ".e5", "1e", "1e+", "5e-324",
    "1e-310", "1e-400", "1e308", "1e309", "9223372036854775807", "9223372036854775808", "-9223372036854775807-1",
    "-9223372036854775808", "N", "N + 1", "N*N", "N/2", "N/0", "N%0", "-7/2", "-7%2", "7%-2", "7/-2", "-7%-2",
    "(-9223372036854775807-1)/-1", "(-9223372036854775807-1)%-1", "9223372036854775807+1", "-9223372036854775807-2",
    "3037000500*3037000500", "3037000499*3037000499", "N/2.0", "N%2.5", "7.5%0.0", "1/0.0", "cdiv(N, 256)",
    "cdiv(-7, 2)", "cdiv(7, -2)", "cdiv(7, 0)", "cdiv(1.5, 2)", "ceil_div(10, 3)", "round_up(10, 4)",
    "round_up(9223372036854775807, 2)", "round_up(-9, 4)", "min(3, 2.5)", "min(2, 2.0)", "max(2, 2.0)", "max(2.0, 2)",
    "min(1)", "min()", "max(1, 2, 3, -4)", "abs(-3)", "abs(-3.5)", "abs(-9223372036854775807-1)", "sqrt(16)",
    "sqrt(-1)", "sqrt(2)", "pow(2, 10)", "pow(-8, 1.0/3)", "pow(0, -1)", "pow(10, 400)", "pow(-10, 401)", "log(0)",
    "log(1)", "log(-1)", "log2(1024)", "log2(0)", "exp(1)", "exp(1000)", "exp(-1000)", "floor(2.5)", "floor(-2.5)",
    "ceil(2.5)", "ceil(-2.5)", "floor(7)", "ceil(7)", "floor(1e300)", "1 ? 2 : 3", "0 ? 2 : 3", "0.0 ? 1 : 2",
    "N > 3 ? N : 3", "1 ? 2", "1 && 0", "1 || 0", "0 && N/0", "1 || N/0", "0.5 && 1", "!0", "!3", "!!3", "!0.0",
    "- -3", "--3", "+3", "-+-3", "1 < 2", "1 <= 1", "2 > 1", "1 >= 2", "1 == 1.0", "1 != 1.0", "1 < 2 < 3",
    "1 = 2", "1 == 2 == 3", "2**3", "2 * * 3", "1 +", "(1", "1)", "()", "", "   ", "foo(1)", "cdiv(1)",
    "cdiv(1, 2, 3)", "pow(2)", "N N", "2N", "N2", "_x", "x_1 * 2", "unknown + 1", "1 ++ 2", "1 +- 2", "1 ! 2",
    "N >= 1 && C % 8 == 0", "(N*N) % 128 == 0", "6*H*C", "cdiv(6*H*C, 256)", "3 * (128 + 128) * (32 + 8) * 2",
    "max(1, (N) / 2)", "min(cdiv(N*C, 256), 1048576)", "1/sqrt(H)", "1.0/C", "N.5", "1..2", "1e5e5", "$", "N @ 2",
    "\u00e9", "N\u00b72", "a\tb", "N\n+1", " N ", "(((N)))", "cdiv(N,   256)", "max(-0.0, 0.0)", "min(0.0, -0.0)",
    "-0.0", "0.0 * -1", "1e308 * 10", "-1e308 * 10", "1e308 * 10 - 1e308 * 10", "1e308*10 == 1e308*10",
    "(1e308*10 - 1e308*10) == (1e308*10 - 1e308*10)", "(1e308*10 - 1e308*10) ? 1 : 2", "floor(1e308*10)",
    "9.3e18", "9.1e18 + 0", "-9.1e18", "4611686018427387904 * 2", "4611686018427387904 * -2",
    "2.0 * 4611686018427387904", "N / 3 * 3 + N % 3", "1" * 4097, "(" * 199 + "1" + ")" * 199,
    "(" * 100 + "1" + ")" * 100, "-" * 199 + "1", "-" * 200 + "1", "+".join(["1"] * 200), "+".join(["1"] * 201),
    "?".join(["1"] * 3), "1 ? 2 : 3 ? 4 : 5",
]
VARSETS = [
    {"N": 1024, "B": 2, "C": 384, "H": 128, "x_1": 7, "_x": -3},
    {"N": 0, "B": -5, "C": 3, "H": BIG, "x_1": -BIG - 1, "_x": 1},
    {"N": -7, "B": 3037000500, "C": 1, "H": 2, "x_1": 0, "_x": 0},
    {},
]

rng = random.Random(20261126)
VARS = ["N", "B", "C", "H", "x_1", "_x", "zz"]
FUNCS = ["min", "max", "cdiv", "ceil_div", "round_up", "abs", "sqrt", "pow", "log", "log2", "exp", "floor", "ceil",
         "nope"]


def rand_number():
    r = rng.random()
    if r < 0.45:
        return str(rng.choice([0, 1, 2, 3, 7, 8, 32, 128, 255, 256, 1000, 65535, 65536, 1 << 31, (1 << 32) + 1,
                               3037000500, BIG, BIG + 1]))
    if r < 0.8:
        return str(rng.randint(0, 5000))
    return rng.choice(["0.5", ".25", "1.5", "2.", "1e3", "3e-2", "1e308", "6.02e23", "1e-5", "0.0", "7.25E1",
                       "123456789.123456789", "9.2e18", "9.3e18"])


def rand_expr(depth=0):
    r = rng.random()
    if depth > 5 or r < 0.25:
        return rand_number() if rng.random() < 0.5 else rng.choice(VARS)
    if r < 0.55:
        op = rng.choice(["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||"])
        sp = rng.choice(["", " ", "  "])
        return "%s%s%s%s%s" % (rand_expr(depth + 1), sp, op, sp, rand_expr(depth + 1))
    if r < 0.65:
        return rng.choice(["-", "!", "+"]) + rand_expr(depth + 1)
    if r < 0.75:
        return "(%s)" % rand_expr(depth + 1)
    if r < 0.82:
        return "%s ? %s : %s" % (rand_expr(depth + 1), rand_expr(depth + 1), rand_expr(depth + 1))
    f = rng.choice(FUNCS)
    n = rng.choice([1, 2, 2, 2, 3]) if f not in ("abs", "sqrt", "log", "log2", "exp", "floor", "ceil") else \
        rng.choice([1, 1, 1, 2])
    return "%s(%s)" % (f, ", ".join(rand_expr(depth + 1) for _ in range(n)))


def mutate(text):
    if not text:
        return text
    i = rng.randrange(len(text) + 1)
    r = rng.random()
    if r < 0.4:
        return text[:i] + text[i + 1:]
    if r < 0.8:
        return text[:i] + rng.choice("()+-*/%<>=!&|?:,.e _aZ09") + text[i:]
    return text[:i] + text[i:][::-1]


cases = []
for text in CURATED:
    for v in VARSETS:
        cases.append({"text": text, "vars": v})
for _ in range(3000):
    t = rand_expr()
    if rng.random() < 0.25:
        t = mutate(t)
    cases.append({"text": t, "vars": rng.choice(VARSETS)})

cpp = tool({"mode": "expr", "cases": cases})
mismatch = 0
for c, want in zip(cases, cpp):
    got = py_expr(c["text"], c["vars"])
    if got != want:
        mismatch += 1
        if mismatch <= 10:
            print("expression %r with %s:\n  C++    %s\n  Python %s" % (c["text"][:120], c["vars"], want, got))
expect("expressions: the runtime agrees with lib/core/expr.cpp on %d cases" % len(cases), mismatch == 0,
       "%d differ" % mismatch)
kinds = {"parse_error": 0, "int": 0, "double": 0, "error": 0}
for r in cpp:
    if "parse_error" in r:
        kinds["parse_error"] += 1
    else:
        kinds[next(iter(r["value"]))] += 1
print("expressions compared: %d (%s)" % (len(cases), ", ".join("%s %d" % kv for kv in kinds.items())))
expect("the expression cases reach parse errors, integers, doubles and evaluation errors",
       all(n > 50 for n in kinds.values()), str(kinds))

# ---------------------------------------------------------------------------
# 2. Launch plans

H100 = {"max_threads_per_block": 1024, "max_block": [1024, 1024, 64], "max_grid": [2147483647, 65535, 65535],
        "max_shared_per_block": 49152, "max_shared_per_block_optin": 232448, "cluster_launch": True,
        "max_cluster_size": 16}


def limits_py(j):
    return rt.DeviceLimits(j["max_threads_per_block"], j["max_block"], j["max_grid"], j["max_shared_per_block"],
                           j["max_shared_per_block_optin"], j["cluster_launch"], j["max_cluster_size"])


def resolved_py(p):
    launches = []
    for l in p.launches:
        a = []
        for x in l.args:
            a.append({"buffer": x.buffer} if x.is_buffer else {"bytes": x.data.hex(), "size": x.size})
        launches.append({"kernel": l.kernel, "symbol": l.symbol, "grid": list(l.grid), "block": list(l.block),
                         "cluster": list(l.cluster), "has_cluster": l.has_cluster, "shared_bytes": l.shared_bytes,
                         "args": a})
    return {"variant": p.variant, "launches": launches, "scratch": [[n, b] for n, b in p.scratch],
            "describe": p.describe()}


def compare_plan(label, request, py_find, py_names):
    cpp = tool(dict(request, mode="plan"))
    try:
        plan = rt.LaunchPlan(request["plan"])
    except rt.PlanError as e:
        expect("%s: the plan is refused alike" % label, cpp.get("plan_error") == str(e),
               "C++ %s / Python %s" % (cpp.get("plan_error"), e))
        return 0, 0
    if "plan_error" in cpp:
        expect("%s: the plan is refused alike" % label, False, "C++ refuses it: " + cpp["plan_error"])
        return 0, 0
    expect("%s: kernel names" % label, cpp["kernel_names"] == plan.kernel_names())
    n_ok = n_err = 0
    for case, want in zip(request["cases"], cpp["results"]):
        try:
            got = resolved_py(rt.resolve_plan(plan, case["vars"], request["tensors"], py_find, py_names,
                                              limits_py(request["limits"])))
        except rt.PlanError as e:
            got = {"error": str(e)}
        if "error" in want:
            n_err += 1
        else:
            n_ok += 1
        expect("%s %s" % (label, case["vars"]), got == want, "\n  C++    %s\n  Python %s" % (want, got))
    return n_ok, n_err


work = args.work
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
cache = os.path.join(work, "cache")
spec_json = json.loads(subprocess.run([args.ksearch, "tasks", "--spec", "gpumode/trimul"], check=True,
                                      capture_output=True, text=True).stdout)
solutions = sorted(glob.glob(os.path.join(args.source_dir, "examples/trimul/candidates/v*.md")))
for name, key in (("reference.json", None), ("starting_point.json", 0)):
    sol = spec_json["references"]["cuda"] if key is None else spec_json["starting_points"][key]
    path = os.path.join(work, name)
    with open(path, "w") as f:
        json.dump(sol, f)
    solutions.append(path)

extra_shapes = [dict(B=1, N=32, C=128, H=128), dict(B=3, N=64, C=64, H=128), dict(B=1, N=48, C=96, H=128),
                dict(B=2, N=1536, C=256, H=128), dict(B=1, N=2048, C=128, H=128), dict(B=1, N=40000, C=128, H=128),
                dict(B=1, N=8, C=8, H=64), dict(B=0, N=32, C=128, H=128), dict(B=1, N=32, C=128, H=256),
                dict(B=70000, N=32, C=128, H=128)]
total_ok = total_err = 0
for path in solutions:
    label = os.path.basename(path)
    out = os.path.join(work, label + ".bundle.json")
    p = subprocess.run([args.ksearch, "export", "--format", "bundle", "--task", "gpumode/trimul", "--solution", path,
                        "--cache-dir", cache, "-o", out], capture_output=True, text=True)
    expect("%s exports as a bundle" % label, p.returncode == 0, p.stderr)
    if p.returncode != 0:
        continue
    manifest = json.load(open(out))
    sol = rt.Solution(manifest)
    tensors = [t["name"] for t in manifest["task"]["tensors"]]
    for bi, build in enumerate(sol.builds):
        cubin_path = os.path.join(work, "%s.build%d.cubin" % (label, bi))
        with open(cubin_path, "wb") as f:
            f.write(build.cubin())
        shapes = [w[1] for w in sol.workloads if w[2] == bi] + (extra_shapes if bi == sol.default_build else [])
        cases = [{"vars": dict(s, **build.params)} for s in shapes]

        def find(name, build=build):
            sym = build.symbol_for(name)
            return None if sym is None else rt.KernelDesc(sym, build.recorded_params(sym))

        request = {"plan": manifest["plan"], "tensors": tensors, "limits": H100, "cases": cases,
                   "catalog": {"cubin_path": cubin_path, "lowered_names": build.lowered_names}}
        ok, err = compare_plan("%s build %d" % (label, bi), request, find, build.kernel_names())
        total_ok += ok
        total_err += err
print("TriMul plans compared: %d solutions, %d resolutions, %d refusals" % (len(solutions), total_ok, total_err))
expect("every TriMul solution resolved on every workload", total_ok >= len(solutions) * 25, str(total_ok))
expect("some extra shapes are refused", total_err > 0)

# Synthetic plans: explicit kernel catalogs, every rule of the resolver.
K = [{"name": "k1", "symbol": "k1", "params": [[0, 8], [8, 8], [16, 4], [24, 8], [32, 4], [36, 2], [38, 1]]},
     {"name": "k2", "symbol": "_Z2k2Pf", "params": [[0, 8], [8, 4], [12, 4], [16, 8]], "max_threads_per_block": 512,
      "static_shared_bytes": 1024},
     {"name": "gemm<128, 64>", "symbol": "_Z4gemmILi128ELi64EEvPf", "params": None},
     {"name": "tiny", "symbol": "tiny", "params": [[0, 16]]}]


def find_explicit(name):
    for k in K:
        if k["name"].replace(" ", "") == name.replace(" ", ""):
            return rt.KernelDesc(k["symbol"], None if k["params"] is None else [tuple(p) for p in k["params"]],
                                 k.get("max_threads_per_block", 0), k.get("static_shared_bytes", 0))
    return None


K_CPP = [{"name": k["name"], "symbol": k["symbol"], "params": k["params"],
          "max_threads_per_block": k.get("max_threads_per_block", 0),
          "static_shared_bytes": k.get("static_shared_bytes", 0)} for k in K]
# The C++ catalog matches names exactly; name the template kernel both ways.
K_CPP.append(dict(K_CPP[2], name="gemm<128,64>"))
k1_args = ["x", "buf", "N", {"i64": "N*N"}, {"f32": "1.0/C"}, "C", "B % 2"]
plans = [
    {"kernels": [{"name": "k1", "grid": ["cdiv(N, 256)"], "block": [256], "args": k1_args}],
     "scratch": [{"name": "buf", "dtype": "f16", "shape": ["N", "C"]}]},
    {"kernels": [{"name": "k1", "grid": ["N"], "block": [128, 2], "shared_bytes": "C*1024", "args": k1_args}],
     "scratch": [{"name": "buf", "bytes": "N*8"}],
     "variants": [{"when": "N <= 64", "kernels": [{"name": "k2", "grid": [1], "block": ["N*8"],
                                                   "shared_bytes": "C*100", "args": ["x", "N", {"i32": "C"},
                                                                                     {"f64": 0.25}]}]},
                  {"when": "N > 100000", "kernels": [{"name": "gemm<128, 64>", "grid": [2, 2, 2], "block": [32],
                                                      "cluster": [2, 2, "B"], "args": ["y", "x", 7]}],
                   "scratch": None}]},
    {"variants": [{"when": "C == 3", "kernels": [{"name": "k2", "grid": [1], "block": [1], "args": ["x", "N", "C",
                                                                                                  "nosuch"]}]}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": ["x", "N", "C", "buf"]}],
     "scratch": [{"name": "buf", "dtype": "f32", "shape": ["N", "-C"]}, {"name": "buf", "bytes": 8}]},
    {"kernels": [{"name": "gemm<128,64>", "grid": ["N"], "block": [1024, 2], "cluster": [4, 1, 1],
                  "args": ["x", {"f32": "sqrt(C)"}]}]},
    {"kernels": [{"name": "tiny", "grid": [1], "block": [1], "args": ["N"]}]},
    {"kernels": [{"name": "k1", "grid": [1], "block": [1], "args": ["x", "x", "N", "N", {"f32": "1e300*1e10"},
                                                                    "C", "N"]}]},
    {"kernels": [{"name": "missing", "grid": [1], "block": [1], "args": []}]},
    {"kernels": [{"name": "gemm<1,2>", "grid": [1], "block": [1], "args": []}]},
    {"kernels": [{"name": "k1", "grid": [1, 2, 3, 4], "block": [1], "args": []}]},
    {"kernels": [{"name": "k1", "grid": ["N/"], "block": [1], "args": []}]},
    {"kernels": [{"name": "k1", "grid": [1], "block": [1], "args": [1.5]}]},
    {"kernels": [{"name": "k1", "grid": [1], "block": [1], "args": [{"f16": "1"}]}]},
    {"kernels": []},
    {},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": ["x", "N", "C", "N"]}],
     "scratch": [{"name": "N", "bytes": 4}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": ["x", "N", "C", "N"]}],
     "scratch": [{"name": "x", "bytes": 4}]},
]
var_cases = [{"N": 32, "C": 3, "B": 2}, {"N": 1000, "C": 48, "B": 1}, {"N": 300000, "C": 4, "B": 3},
             {"N": 300000, "C": 4, "B": 4}, {"N": 64, "C": 700, "B": 0}, {"N": 5000000000, "C": 1, "B": 1},
             {"N": 70000, "C": 226, "B": 1}, {"N": 16, "C": 1, "B": 1}]
syn_ok = syn_err = 0
for i, plan in enumerate(plans):
    request = {"plan": plan, "tensors": ["x", "y", "out"], "limits": H100,
               "cases": [{"vars": v} for v in var_cases], "catalog": {"kernels": K_CPP}}
    ok, err = compare_plan("synthetic plan %d" % i, request, find_explicit, [k["name"] for k in K_CPP])
    syn_ok += ok
    syn_err += err
# The same rules on a device without clusters and with small limits.
small = dict(H100, cluster_launch=False, max_cluster_size=8, max_threads_per_block=256,
             max_shared_per_block_optin=49152, max_grid=[65535, 65535, 65535])
for i, plan in enumerate(plans[:5]):
    request = {"plan": plan, "tensors": ["x", "y", "out"], "limits": small,
               "cases": [{"vars": v} for v in var_cases], "catalog": {"kernels": K_CPP}}
    ok, err = compare_plan("synthetic plan %d, small device" % i, request, find_explicit, [k["name"] for k in K_CPP])
    syn_ok += ok
    syn_err += err
print("synthetic plans compared: %d resolutions, %d refusals" % (syn_ok, syn_err))
expect("synthetic plans reach both resolutions and refusals", syn_ok > 10 and syn_err > 20)

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("runtime mirror: all checks passed")
