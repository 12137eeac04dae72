#!/usr/bin/env python3
"""The exports' Python runtime against libksearch's C++ on the same inputs.

1. Expressions: curated and randomly generated (seeded) expressions, with
   variable values that reach every rule (integer overflow, C division,
   doubles, errors): the parse error, the value, eval_int and eval_double of
   lib/util/expr.cpp (through mirror_tool) must equal the runtime's Expr, message
   for message and bit for bit.
2. Launch plans: every shipped TriMul candidate, the task's CUDA reference and
   its tunable starting point are exported (`ksearch export --format bundle`);
   for every build, every workload of the task and further shapes (some of
   which a plan must refuse), the grid, block, cluster, shared memory, scratch
   sizes and argument bytes the C++ resolver computes - with the kernel catalog
   it builds from the cubin - must equal what the runtime computes from the
   manifest. Synthetic plans cover variants, clusters, typed arguments and the
   error messages.
3. Scalar inputs (FlashInfer's `shape: null`): the value libksearch holds for
   one (store_element/load_element) for every scalar dtype and awkward values;
   expressions reading floating scalars; every FlashInfer task's reference,
   baseline and starting point (and the GQA demonstration's answers) resolved
   on every workload with its scalar values and on further shapes and scalar
   values; synthetic plans passing scalars of every type by name, reading them
   in expressions, and every error about them.
4. GEMM steps and per-step "when": plans with {"gemm": {...}} steps among kernel
   launches and variants, over tensors and typed scratch buffers of several
   dtypes, resolved alike (every field, the bytes each operand reaches, the
   description, which steps run) or refused with the same message: the JSON's
   shape, dtype combinations, leading dimensions, strides, algo, and a plan
   with no step left to run.

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


def unbits(b):
    return struct.unpack("<d", struct.pack("<Q", int(b)))[0]


def py_expr(text, variables, reals=None):
    try:
        e = rt.Expr(text)
    except rt.ExprError as err:
        # A lone byte of a UTF-8 sequence: the C++ message holds the byte, which JSON writes as U+FFFD.
        return {"parse_error": str(err).encode("utf-8", "surrogateescape").decode("utf-8", "replace")}
    out = {"variables": e.variables()}
    try:
        is_int, v = e.eval(variables, reals)
        out["value"] = {"int": str(v)} if is_int else {"double": bits(v)}
    except rt.ExprError as err:
        out["value"] = {"error": str(err)}
    try:
        out["eval_int"] = {"int": str(e.eval_int(variables, reals))}
    except rt.ExprError as err:
        out["eval_int"] = {"error": str(err)}
    try:
        out["eval_double"] = {"double": bits(e.eval_double(variables, reals))}
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


def rand_expr(depth=0, names=VARS):
    r = rng.random()
    if depth > 5 or r < 0.25:
        return rand_number() if rng.random() < 0.5 else rng.choice(names)
    if r < 0.55:
        op = rng.choice(["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||"])
        sp = rng.choice(["", " ", "  "])
        return "%s%s%s%s%s" % (rand_expr(depth + 1, names), sp, op, sp, rand_expr(depth + 1, names))
    if r < 0.65:
        return rng.choice(["-", "!", "+"]) + rand_expr(depth + 1, names)
    if r < 0.75:
        return "(%s)" % rand_expr(depth + 1, names)
    if r < 0.82:
        return "%s ? %s : %s" % (rand_expr(depth + 1, names), rand_expr(depth + 1, names),
                                 rand_expr(depth + 1, names))
    f = rng.choice(FUNCS)
    n = rng.choice([1, 2, 2, 2, 3]) if f not in ("abs", "sqrt", "log", "log2", "exp", "floor", "ceil") else \
        rng.choice([1, 1, 1, 2])
    return "%s(%s)" % (f, ", ".join(rand_expr(depth + 1, names) for _ in range(n)))


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

# Floating scalar inputs read in expressions (RealVars): beside the integers, a name in both is the integer.
REALSETS = [
    {"sm_scale": 0.08838834764831845, "routed_scaling_factor": 2.5},
    {"sm_scale": 0.0625, "N": 0.5, "r": -1e300, "tiny": 5e-324},
    {"sm_scale": float("nan"), "r": float("inf"), "z": -0.0},
    {},
]
REAL_TEXTS = [
    "sm_scale", "sm_scale * 1.4426950408889634", "1 / sm_scale", "sm_scale * N", "N", "N + r", "r * 0", "z", "-z",
    "sm_scale > 0.05 ? 1 : 2", "cdiv(N, sm_scale)", "floor(routed_scaling_factor * 4)", "routed_scaling_factor * 2",
    "min(sm_scale, N)", "max(N, r)", "abs(r)", "sqrt(sm_scale)", "log(r)", "tiny * 0.5", "tiny / 2", "z == 0",
    "sm_scale == sm_scale", "sm_scale != sm_scale", "!sm_scale", "sm_scale && r", "unknown", "sm_scale + unknown",
    "r % 2", "N % sm_scale", "round_up(N, 2) * sm_scale", "pow(sm_scale, -2)", "exp(r)",
]
real_vars = [{"N": 1024, "B": 2}, {"N": -7}, {}]
real_cases = []
for text in REAL_TEXTS:
    for v in real_vars:
        for r in REALSETS:
            real_cases.append({"text": text, "vars": v, "reals": r})
for _ in range(600):
    t = rand_expr(names=VARS + ["sm_scale", "r", "z", "tiny"])
    real_cases.append({"text": t, "vars": rng.choice(VARSETS), "reals": rng.choice(REALSETS)})
for c in real_cases:
    c["reals_bits"] = {k: bits(v) for k, v in c["reals"].items()}

cpp = tool({"mode": "expr", "cases": cases + [{"text": c["text"], "vars": c["vars"], "reals": c["reals_bits"]}
                                              for c in real_cases]})
cpp_real = cpp[len(cases):]
cpp = cpp[:len(cases)]
mismatch = 0
for c, want in zip(real_cases, cpp_real):
    got = py_expr(c["text"], c["vars"], c["reals"])
    if got != want:
        mismatch += 1
        if mismatch <= 10:
            print("expression %r with %s and reals %s:\n  C++    %s\n  Python %s" % (c["text"][:120], c["vars"],
                                                                                    c["reals"], want, got))
expect("expressions reading floating scalars: the runtime agrees on %d cases" % len(real_cases), mismatch == 0,
       "%d differ" % mismatch)
expect("the floating-scalar cases give doubles and name the scalars among the known names",
       sum("double" in r.get("value", {}) for r in cpp_real) > 100 and
       any("sm_scale" in r.get("value", {}).get("error", "") and "known" in r["value"]["error"] for r in cpp_real))

mismatch = 0
for c, want in zip(cases, cpp):
    got = py_expr(c["text"], c["vars"])
    if got != want:
        mismatch += 1
        if mismatch <= 10:
            print("expression %r with %s:\n  C++    %s\n  Python %s" % (c["text"][:120], c["vars"], want, got))
expect("expressions: the runtime agrees with lib/util/expr.cpp on %d cases" % len(cases), mismatch == 0,
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


def gemm_py(g):
    return {"a": g.a, "b": g.b, "c": g.c, "d": g.d, "bias": g.bias, "types": [g.a_type, g.b_type, g.d_type],
            "mnk_batch": [g.m, g.n, g.k, g.batch], "trans": [g.trans_a, g.trans_b],
            "ld": [g.lda, g.ldb, g.ldc, g.ldd], "strides": [g.stride_a, g.stride_b, g.stride_c, g.stride_d],
            "alpha": bits(g.alpha), "beta": bits(g.beta), "epilogue": g.epilogue, "compute": g.compute,
            "algo": g.algo, "bytes": [str(g.bytes_a()), str(g.bytes_b()), str(g.bytes_c()), str(g.bytes_d()),
                                      str(g.bytes_bias())],
            "describe": g.describe()}


def resolved_py(p):
    launches = []
    for l in p.launches:
        if l.gemm is not None:
            launches.append({"step": l.step, "where": p.step_where(l), "gemm": gemm_py(l.gemm)})
            continue
        a = []
        for x in l.args:
            a.append({"buffer": x.buffer} if x.is_buffer else {"bytes": x.data.hex(), "size": x.size})
        launches.append({"step": l.step, "kernel": l.kernel, "symbol": l.symbol, "grid": list(l.grid),
                         "block": list(l.block), "cluster": list(l.cluster), "has_cluster": l.has_cluster,
                         "shared_bytes": l.shared_bytes, "args": a})
    return {"variant": p.variant, "launches": launches, "scratch": [[n, b] for n, b in p.scratch],
            "describe": p.describe()}


def scalars_cpp(typed):
    return {k: {"dtype": dt, "value": bits(v)} for k, (dt, v) in typed.items()}


def compare_plan(label, request, py_find, py_names):
    request = dict(request, cases=[dict(c, scalars=scalars_cpp(c.get("typed", {}))) for c in request["cases"]])
    for c in request["cases"]:
        c.pop("typed", None)
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
        typed = {k: (x["dtype"], unbits(x["value"])) for k, x in case["scalars"].items()}
        try:
            got = resolved_py(rt.resolve_plan(plan, case["vars"], request["tensors"], py_find, py_names,
                                              limits_py(request["limits"]), typed, request.get("dtypes")))
        except rt.PlanError as e:
            got = {"error": str(e)}
        if "error" in want:
            n_err += 1
        else:
            n_ok += 1
        expect("%s %s %s" % (label, case["vars"], typed), got == want, "\n  C++    %s\n  Python %s" % (want, got))
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

# ---------------------------------------------------------------------------
# 3. Scalar inputs

# The value a scalar input holds: store_element, then load_element.
awkward = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999999999999994, 0.1, 1 / 3, 127.4, 127.5, -128.5, 128.0, -129.0,
           255.5, 256.0, 32767.5, -32768.5, 65535.0, 2.0 ** 31 - 0.5, 2.0 ** 31, -2.0 ** 31 - 1, 2.0 ** 32, 1e10,
           -1e10, 2.0 ** 53 + 1, 2.0 ** 62, 2.0 ** 63, -2.0 ** 63, 1e19, -1e19, 1e300, -1e300, 3.4028234663852886e38,
           3.4028235677973366e38, 3.5e38, 1e-45, 1e-46, 5e-324, 0.08838834764831845, 1 / 192 ** 0.5, 2.5,
           float("inf"), float("-inf"), float("nan")]
awkward += [rng.uniform(-300, 300) for _ in range(40)] + [rng.choice([-1, 1]) * 10 ** rng.uniform(-40, 40)
                                                          for _ in range(40)]
scalar_cases = [{"dtype": dt, "value": bits(v)} for dt in rt.SCALAR_DTYPES for v in awkward]
cpp = tool({"mode": "scalar", "cases": scalar_cases})
mismatch = 0
for c, want in zip(scalar_cases, cpp):
    got = bits(rt.scalar_value(c["dtype"], unbits(c["value"])))
    if got != want:
        mismatch += 1
        if mismatch <= 10:
            print("scalar %s %r: C++ %r, Python %r" % (c["dtype"], unbits(c["value"]), unbits(want), unbits(got)))
expect("scalar values: the runtime holds what store_element/load_element hold (%d cases)" % len(scalar_cases),
       mismatch == 0, "%d differ" % mismatch)

# Every FlashInfer task: reference, baseline, starting point (and the GQA demonstration's answers).
FLASHINFER = ["flashinfer/gqa_paged_decode_h32_kv4_d128_ps1", "flashinfer/mla_paged_decode_h16_ckv512_kpe64_ps1",
              "flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1",
              "flashinfer/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"]


def scale_variants(workload_dims, typed):
    """Further cases for a task's plan: other shapes and scalar values (some of which a plan refuses)."""
    out = []
    for k, f in (("batch_size", 7), ("batch_size", 300000000), ("total_q", 3), ("total_q", 2 ** 40), ("seq_len", 3),
                 ("seq_len", 300000), ("num_kv_indices", 0), ("num_kv_indices", 10 ** 9)):
        if k in workload_dims:
            d = dict(workload_dims)
            d[k] = f
            out.append((d, typed))
    for name, (dt, v) in typed.items():
        for x in ([float("nan"), float("inf"), -0.0, 1e-40, 3.5e38, 1.0] if dt in ("f32", "f64") else
                  [-1.0, 2.0 ** 31 - 1, 2.0 ** 31, -2.0 ** 31, 1e12]):
            t = dict(typed)
            t[name] = (dt, rt.scalar_value(dt, x))
            out.append((workload_dims, t))
    return out


fi_ok = fi_err = fi_scalar_args = 0
for task in FLASHINFER:
    tspec = json.loads(subprocess.run([args.ksearch, "tasks", "--spec", task], check=True, capture_output=True,
                                      text=True).stdout)
    sols = [("reference", tspec["references"]["cuda"]), ("baseline", tspec["baselines"]["cuda"]),
            ("starting point", tspec["starting_points"][0])]
    if task.startswith("flashinfer/gqa"):
        sols += [(os.path.basename(p), p) for p in
                 sorted(glob.glob(os.path.join(args.source_dir, "examples/flashinfer/candidates/v*.md")))]
    for label, sol in sols:
        label = "%s %s" % ("_".join(task.split("/")[1].split("_")[:3]), label)
        if isinstance(sol, dict):
            path = os.path.join(work, "%s_%s.json" % (task.split("/")[1], label.split()[-1]))
            with open(path, "w") as f:
                json.dump(sol, f)
        else:
            path = sol
        out = os.path.join(work, os.path.basename(path) + "." + task.split("/")[1] + ".bundle.json")
        p = subprocess.run([args.ksearch, "export", "--format", "bundle", "--task", task, "--solution", path,
                            "--cache-dir", cache, "-o", out], capture_output=True, text=True)
        expect("%s exports as a bundle" % label, p.returncode == 0, p.stderr)
        if p.returncode != 0:
            continue
        manifest = json.load(open(out))
        sol = rt.Solution(manifest)
        expect("%s: the manifest lists the scalar inputs in order, shape null" % label,
               [t.name for t in sol.inputs] == [t["name"] for t in tspec["tensors"] if t.get("role") != "output"] and
               [t.name for t in sol.scalar_inputs] == [t["name"] for t in tspec["tensors"] if t["shape"] is None] and
               sol.scalar_inputs and all(w[3] for w in sol.workloads))
        tensors = sorted(sol.tensor_names)
        for bi, build in enumerate(sol.builds):
            cubin_path = os.path.join(work, "%s.build%d.cubin" % (os.path.basename(out), bi))
            with open(cubin_path, "wb") as f:
                f.write(build.cubin())
            cases = []
            for name, dims, b, scalars in sol.workloads:
                if b != bi:
                    continue
                typed = {t.name: (t.dtype, scalars[t.name]) for t in sol.scalar_inputs}
                for d, ty in [(dims, typed)] + (scale_variants(dims, typed) if name == sol.workloads[-1][0] else []):
                    cases.append({"vars": rt.plan_variables(d, build.params, ty), "typed": ty})

            def find(name, build=build):
                sym = build.symbol_for(name)
                return None if sym is None else rt.KernelDesc(sym, build.recorded_params(sym))

            request = {"plan": manifest["plan"], "tensors": tensors, "limits": H100, "cases": cases,
                       "catalog": {"cubin_path": cubin_path, "lowered_names": build.lowered_names}}
            ok, err = compare_plan("%s build %d" % (label, bi), request, find, build.kernel_names())
            fi_ok += ok
            fi_err += err
            fi_scalar_args += sum(1 for k in rt.LaunchPlan(manifest["plan"]).kernels for a in k.args
                                  if a.text in [t.name for t in sol.scalar_inputs])
print("FlashInfer plans compared: %d resolutions, %d refusals, %d scalar arguments in the plans"
      % (fi_ok, fi_err, fi_scalar_args))
expect("every FlashInfer solution resolved on every workload, scalars passed by name",
       fi_ok >= 3 * (14 + 12 + 11 + 20) + 3 * 14 and fi_err > 0 and fi_scalar_args >= 12, "%d, %d" % (fi_ok, fi_err))

# Synthetic plans passing scalars of every type by name and reading them in expressions.
KS = [{"name": "ks", "symbol": "ks", "params": [[0, 8], [8, 4], [16, 8], [24, 4], [28, 1], [29, 1], [30, 2], [32, 8],
                                                [40, 1], [44, 4], [48, 4]]},
      {"name": "k8", "symbol": "k8", "params": [[0, 8], [8, 8]]},
      {"name": "k4", "symbol": "k4", "params": [[0, 8], [8, 4]]},
      {"name": "kn", "symbol": "kn", "params": None}]
KS_CPP = [dict(k, max_threads_per_block=0, static_shared_bytes=0) for k in KS]


def find_ks(name):
    for k in KS:
        if k["name"] == name:
            return rt.KernelDesc(k["symbol"], None if k["params"] is None else [tuple(p) for p in k["params"]])
    return None


every = ["x", "sm_scale", "scale64", "offset", "flag", "tiny", "half", "big", "u",
         {"f32": "sm_scale * 1.4426950408889634"}, "offset + N"]
scalar_plans = [
    {"kernels": [{"name": "ks", "grid": ["cdiv(N, 256) + offset % 2"], "block": [256], "args": every}]},
    {"kernels": [{"name": "ks", "grid": ["N"], "block": [1], "shared_bytes": "offset * 4", "args": every}],
     "scratch": [{"name": "buf", "dtype": "bool", "shape": ["N", "tiny + 200"]},
                 {"name": "b8", "dtype": "f8e4m3fn", "shape": ["N"]}, {"name": "b16", "dtype": "i16", "shape": [2]}],
     "variants": [{"when": "sm_scale > 0.09", "kernels": [{"name": "k8", "grid": [1], "block": [1],
                                                           "args": ["buf", {"f64": "sm_scale / scale64"}]}]},
                  {"when": "flag && half < 0", "kernels": [{"name": "k4", "grid": ["sm_scale * 100"], "block": [1],
                                                             "args": ["b8", {"i32": "big"}]}]}]},
    {"kernels": [{"name": "k4", "grid": [1], "block": [1], "args": ["x", "scale64"]}]},
    {"kernels": [{"name": "k8", "grid": [1], "block": [1], "args": ["x", "sm_scale"]}]},
    {"kernels": [{"name": "k8", "grid": [1], "block": [1], "args": ["x", "offset"]}]},
    {"kernels": [{"name": "k4", "grid": [1], "block": [1], "args": ["x", "nosuch"]}]},
    {"kernels": [{"name": "k4", "grid": [1], "block": [1], "args": ["x", "sm_scale + nosuch"]}]},
    {"kernels": [{"name": "k4", "grid": [1], "block": [1], "args": ["x", "sm_scale + 1"]}]},
    {"kernels": [{"name": "k4", "grid": [1], "block": [1], "args": ["x", {"i32": "sm_scale"}]}]},
    {"kernels": [{"name": "k4", "grid": [1], "block": [1], "args": ["x", "offset"]}],
     "scratch": [{"name": "offset", "bytes": 4}]},
    {"kernels": [{"name": "k8", "grid": [1], "block": [1], "args": ["x", "sm_scale"]}],
     "scratch": [{"name": "sm_scale", "bytes": 4}]},
    {"kernels": [{"name": "kn", "grid": [1], "block": [1], "args": ["x", "sm_scale", "big", "flag", "half16"]}]},
    {"kernels": [{"name": "k4", "grid": ["unknown_dim"], "block": [1], "args": ["x", "offset"]}]},
    {"kernels": [{"name": "k4", "grid": ["N"], "block": [1], "args": ["x", "tiny"]}]},
]
scalar_sets = [
    {"sm_scale": ("f32", rt.scalar_value("f32", 0.08838834764831845)), "scale64": ("f64", 0.1),
     "offset": ("i32", 224.0), "flag": ("bool", 1.0), "tiny": ("i8", -100.0), "half": ("i16", -3.0),
     "big": ("i64", 2.0 ** 40), "u": ("u8", 255.0), "half16": ("f16", 1.5)},
    {"sm_scale": ("f32", rt.scalar_value("f32", 0.1)), "scale64": ("f64", float("nan")), "offset": ("i32", -7.0),
     "flag": ("bool", 0.0), "tiny": ("i8", 127.0), "half": ("i16", 32767.0), "big": ("i64", -1.0), "u": ("u8", 0.0),
     "half16": ("f16", 0.0)},
    {"sm_scale": ("f32", rt.scalar_value("f32", 0.25)), "scale64": ("f64", 0.0), "offset": ("i32", 2.0 ** 31 - 1),
     "flag": ("bool", 1.0), "tiny": ("i8", -128.0), "half": ("i16", -1.0), "big": ("i64", 2.0 ** 33),
     "u": ("u8", 7.0), "half16": ("f16", 2.0)},
    {"sm_scale": ("f32", float("inf")), "scale64": ("f64", -0.0), "offset": ("i32", 0.0), "flag": ("bool", 1.0),
     "tiny": ("i8", 0.0), "half": ("i16", -5.0), "big": ("i64", 0.0), "u": ("u8", 1.0), "half16": ("f16", 1.0)},
]
ssyn_ok = ssyn_err = 0
for i, plan in enumerate(scalar_plans):
    cases = []
    for n in (1, 1000, 70000):
        for typed in scalar_sets:
            cases.append({"vars": rt.plan_variables({"N": n}, {}, typed), "typed": typed})
    request = {"plan": plan, "tensors": ["x", "out"], "limits": H100, "cases": cases, "catalog": {"kernels": KS_CPP}}
    ok, err = compare_plan("synthetic scalar plan %d" % i, request, find_ks, [k["name"] for k in KS])
    ssyn_ok += ok
    ssyn_err += err
print("synthetic scalar plans compared: %d resolutions, %d refusals" % (ssyn_ok, ssyn_err))
expect("synthetic scalar plans reach both resolutions and refusals", ssyn_ok > 20 and ssyn_err > 30)

# ---------------------------------------------------------------------------
# 4. GEMM steps ({"gemm": {...}} among the kernels) and per-step "when": the JSON's shape, the resolution
# (dtype combinations from the tensors' and typed scratch buffers' dtypes, leading dimensions and batch
# strides with their defaults, alpha and beta, algo, the bytes each operand reaches, the description) and
# every message, on valid and invalid plans, alone and among kernel launches and variants.

GEMM_TENSORS = ["x", "w", "y", "o16", "xb", "wb", "ob", "x32", "w32", "o32", "bias16", "bias32", "idx", "untyped"]
# Some in other spellings of the same dtype; "untyped" has none (a tensor a GEMM step cannot take).
GEMM_DTYPES = {"x": "float16", "w": "f16", "y": "f32", "o16": "f16", "xb": "bf16", "wb": "bfloat16", "ob": "bf16",
               "x32": "f32", "w32": "float32", "o32": "f32", "bias16": "f16", "bias32": "f32", "idx": "i32"}
K2 = {"name": "k2", "grid": [1], "block": [1], "args": ["x", "M", "N", "tmp"]}


def gemm(**fields):
    g = {"a": "x", "b": "w", "d": "o16", "m": "M", "n": "N", "k": "K"}
    g.update(fields)
    return {k: v for k, v in g.items() if v is not None}


gemm_plans = [
    # Valid: defaults; f16 to f32 output, transposed, batched with dense strides; every field set.
    {"kernels": [{"gemm": gemm()}]},
    {"kernels": [{"gemm": gemm(d="y", trans_a=True, trans_b=True, batch="B")}]},
    {"kernels": [{"gemm": gemm(a="x32", b="w32", c="y", d="o32", bias="bias32", lda="K + 8", ldb="2 * N", ldc="N",
                               ldd="N + 1", batch="B", stride_a="M * (K + 8)", stride_b=0, stride_c="M * N",
                               stride_d="M * (N + 1)", alpha=0.5, beta="1.0 / K", epilogue="relu_bias",
                               compute="tf32", algo="K % 7")}]},
    {"kernels": [{"gemm": gemm(a="xb", b="wb", d="ob", beta=1, epilogue="gelu", trans_b=True, ldb="K * 2",
                               algo=63)}]},
    {"kernels": [{"gemm": gemm(a="xb", b="wb", d="o32", c="y", beta=-2.5, bias="bias32", epilogue="gelu_bias",
                               batch="B", stride_c=0, alpha="pow(2, -3)")}]},
    {"kernels": [{"gemm": gemm(d="o16", c="o16", beta=1.0, epilogue="relu", trans_a=False, trans_b=None,
                               compute="f32", algo=None, lda=None)}]},
    # Huge strides: the bytes an operand reaches saturate instead of wrapping round.
    {"kernels": [{"gemm": gemm(batch=3, stride_a="9223372036854775807", stride_b="4611686018427387904")}]},
    # Typed scratch operands, between kernels; a bytes-sized scratch buffer has no dtype.
    {"kernels": [{"gemm": gemm(d="tmp")}, K2, {"gemm": gemm(a="tmp", b="w32", d="y", m="M", n="N", k="N")}],
     "scratch": [{"name": "tmp", "dtype": "f32", "shape": ["M", "N"]}]},
    {"kernels": [{"gemm": gemm(d="raw")}], "scratch": [{"name": "raw", "bytes": "M * N * 4"}]},
    # Per-step "when": either step, neither (refused), in variants, with floating scalars... and bad ones.
    {"kernels": [{"gemm": gemm(), "when": "M > 64"}, {"name": "k2", "grid": [1], "block": [1],
                                                        "args": ["x", "M", "N", "x"], "when": "M <= 64"},
                 {"gemm": gemm(d="y"), "when": "B == 3"}]},
    {"kernels": [{"gemm": gemm(), "when": "M < 0"}, {"name": "k2", "grid": [1], "block": [1],
                                                       "args": ["x", "M", "N", "x"], "when": 0}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": ["x", "M", "N", "x"]}],
     "variants": [{"when": "B > 1", "kernels": [{"gemm": gemm(), "when": "K > 16"}, {"gemm": gemm(d="y"),
                                                                                      "when": "M * 0.5 > 1"}]}]},
    {"kernels": [{"gemm": gemm(), "when": "M / 0"}]},
    {"kernels": [{"gemm": gemm(), "when": "Q"}]},
    # Resolution errors.
    {"kernels": [{"gemm": gemm(a="nosuch")}]},
    {"kernels": [{"gemm": gemm(c="nosuch", beta=1)}]},
    {"kernels": [{"gemm": gemm(b="untyped")}]},
    {"kernels": [{"gemm": gemm(c="y", beta=1)}]},
    {"kernels": [{"gemm": gemm(d="y", c="o16")}]},
    {"kernels": [{"gemm": gemm(bias="bias32", epilogue="bias")}]},
    {"kernels": [{"gemm": gemm(b="w32")}]},
    {"kernels": [{"gemm": gemm(a="xb", b="wb", d="o16")}]},
    {"kernels": [{"gemm": gemm(a="x32", b="w32", d="o16")}]},
    {"kernels": [{"gemm": gemm(a="idx", b="idx", d="idx")}]},
    {"kernels": [{"gemm": gemm(compute="tf32")}]},
    {"kernels": [{"gemm": gemm(m="M - 64")}]},
    {"kernels": [{"gemm": gemm(n="N * 100000000")}]},
    {"kernels": [{"gemm": gemm(k="Q")}]},
    {"kernels": [{"gemm": gemm(batch="B - 3")}]},
    {"kernels": [{"gemm": gemm(lda="K - 1")}]},
    {"kernels": [{"gemm": gemm(trans_a=True, lda="M - 1")}]},
    {"kernels": [{"gemm": gemm(ldb="2147483648")}]},
    {"kernels": [{"gemm": gemm(ldc="N - 1", beta=1)}]},
    {"kernels": [{"gemm": gemm(ldd="N / 2.5")}]},
    {"kernels": [{"gemm": gemm(stride_d="0 - 1", batch=2)}]},
    {"kernels": [{"gemm": gemm(ldd="2 * N", ldc="N", beta=1)}]},
    {"kernels": [{"gemm": gemm(batch=2, stride_d=0)}]},
    {"kernels": [{"gemm": gemm(d="w")}]},
    {"kernels": [{"gemm": gemm(d="o16", bias="o16", epilogue="bias")}]},
    {"kernels": [{"gemm": gemm(batch=2, n=32, ldd=128, stride_d=32)}]},
    {"kernels": [{"gemm": gemm(alpha="1 / 0")}]},
    {"kernels": [{"gemm": gemm(beta="nosuch")}]},
    {"kernels": [{"gemm": gemm(algo=64)}]},
    {"kernels": [{"gemm": gemm(algo="K - 100")}]},
    {"kernels": [{"gemm": gemm(d="x")}], "scratch": [{"name": "x", "dtype": "f16", "shape": [1]}]},
    # The JSON's shape (lib/core/launch_plan.cpp read_gemm and read_launch).
    {"kernels": [{"gemm": gemm(a=None)}]},
    {"kernels": [{"gemm": gemm(m=None)}]},
    {"kernels": [{"gemm": gemm(d="")}]},
    {"kernels": [{"gemm": gemm(b=7)}]},
    {"kernels": [{"gemm": gemm(c=["y"])}]},
    {"kernels": [{"gemm": gemm(transpose_a=True)}]},
    {"kernels": [{"gemm": gemm(epilogue="silu")}]},
    {"kernels": [{"gemm": gemm(epilogue=1)}]},
    {"kernels": [{"gemm": gemm(compute="fp16")}]},
    {"kernels": [{"gemm": gemm(epilogue="relu_bias")}]},
    {"kernels": [{"gemm": gemm(bias="bias16")}]},
    {"kernels": [{"gemm": gemm(bias="bias16", epilogue="none")}]},
    {"kernels": [{"gemm": gemm(trans_a="yes")}]},
    {"kernels": [{"gemm": gemm(trans_b=1)}]},
    {"kernels": [{"gemm": gemm(m=2.5)}]},
    {"kernels": [{"gemm": gemm(alpha=True)}]},
    {"kernels": [{"gemm": gemm(algo=[1])}]},
    {"kernels": [{"gemm": gemm(n="N +")}]},
    {"kernels": [{"gemm": gemm(beta="1..5")}]},
    {"kernels": [{"gemm": "matmul"}]},
    {"kernels": [{"gemm": None}]},
    {"kernels": [{"gemm": gemm(), "name": "k2"}]},
    {"kernels": [{"gemm": gemm(), "when": True}]},
    {"kernels": [{"gemm": gemm(), "when": "M >"}]},
    # Expression errors come after every shape error, wherever they are.
    {"kernels": [{"gemm": gemm(m="M +")}, {"gemm": gemm(epilogue="bad")}]},
    {"kernels": [{"gemm": gemm(m="M +", k="K )")}, {"name": "k2", "grid": ["N/"], "block": [1], "args": []}]},
    {"kernels": [{"name": "k2", "grid": ["N/"], "block": [1], "args": []}],
     "variants": [{"when": "M )", "kernels": [{"gemm": gemm()}]}]},
    {"kernels": [{"name": "k2", "grid": ["N/"], "block": [1], "args": []}],
     "variants": [{"when": "M", "kernels": [{"gemm": gemm(a=None)}]}]},
    # read_launch's other checks, now mirrored message for message.
    {"kernels": [{"grid": [1], "block": [1], "args": []}]},
    {"kernels": [{"name": 3, "grid": [1], "block": [1], "args": []}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1]}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": {"x": 1}}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": [], "smem": 4}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": [], "when": [1]}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": []}], "extra": 1},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": []}], "scratch": [{"bytes": 4}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": []}], "scratch": [{"name": "s", "bytes": 4,
                                                                                       "align": 16}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": []}], "scratch": [{"name": "s", "shape": [4]}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": []}], "scratch": [{"name": "s", "dtype": "f32"}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": []}],
     "scratch": [{"name": "s", "dtype": 4, "shape": [4]}]},
    {"kernels": [{"name": "k2", "grid": [1], "block": [1], "args": []}],
     "variants": [{"when": "M > 1", "kernels": [{"gemm": gemm()}], "scratch": [], "note": "x"}]},
]
gemm_vars = [{"M": 64, "N": 128, "K": 32, "B": 2}, {"M": 1, "N": 1, "K": 1, "B": 1}, {"M": 65, "N": 7, "K": 9, "B": 3},
             {"M": 128, "N": 4096, "K": 100, "B": 3}, {"M": 0, "N": 8, "K": 8, "B": 1},
             {"M": 100000, "N": 30000, "K": 30000, "B": 5}]
g_ok = g_err = 0
for i, plan in enumerate(gemm_plans):
    request = {"plan": plan, "tensors": GEMM_TENSORS, "dtypes": GEMM_DTYPES, "limits": H100,
               "cases": [{"vars": v} for v in gemm_vars], "catalog": {"kernels": K_CPP}}
    ok, err = compare_plan("GEMM plan %d %s" % (i, json.dumps(plan)[:150]), request, find_explicit,
                           [k["name"] for k in K_CPP])
    g_ok += ok
    g_err += err
print("GEMM-step plans compared: %d resolutions, %d refusals" % (g_ok, g_err))
expect("GEMM-step plans reach both resolutions and refusals", g_ok > 40 and g_err > 100, "%d, %d" % (g_ok, g_err))

# What the comparisons above stand on: the C++ resolves the GEMM steps, skips steps by "when", keeps their
# places, and says what these plans should make it say.
probe = tool({"mode": "plan", "plan": gemm_plans[9], "tensors": GEMM_TENSORS, "dtypes": GEMM_DTYPES, "limits": H100,
              "catalog": {"kernels": K_CPP}, "cases": [{"vars": gemm_vars[3], "scalars": {}},
                                                       {"vars": gemm_vars[0], "scalars": {}}]})
big, small = probe["results"]
expect("C++: M = 128 runs the GEMM step kernels[0] and skips the kernel kernels[1]",
       [l["step"] for l in big["launches"]] == [0, 2] and big["launches"][0]["gemm"]["types"] == ["f16", "f16", "f16"]
       and big["launches"][1]["gemm"]["describe"] == "cuBLASLt GEMM 128x4096x100 x @ w -> y algo 0", str(big))
expect("C++: M = 64 runs only the kernel, as kernels[1]",
       [l.get("kernel") for l in small["launches"]] == ["k2"] and small["launches"][0]["step"] == 1, str(small))
full = tool({"mode": "plan", "plan": gemm_plans[2], "tensors": GEMM_TENSORS, "dtypes": GEMM_DTYPES, "limits": H100,
             "catalog": {"kernels": K_CPP}, "cases": [{"vars": gemm_vars[0], "scalars": {}}]})["results"][0]
g = full["launches"][0]["gemm"]
expect("C++: a batched, strided GEMM step with every field set resolves to those values",
       g["ld"] == [40, 256, 128, 129] and g["strides"] == [64 * 40, 0, 64 * 128, 64 * 129] and
       g["mnk_batch"] == [64, 128, 32, 2] and unbits(g["alpha"]) == 0.5 and unbits(g["beta"]) == 1 / 32 and
       g["algo"] == 4 and g["compute"] == "tf32" and g["epilogue"] == "relu_bias" and
       g["bytes"] == [str(4 * (64 * 40 + 63 * 40 + 32)), str(4 * (31 * 256 + 128)),
                      str(4 * (64 * 128 + 63 * 128 + 128)), str(4 * (64 * 129 + 63 * 129 + 128)), str(4 * 128)] and
       g["describe"] == "cuBLASLt GEMM 2 x 64x128x32 x32 @ w32 -> o32 + 0.03125 * y epilogue relu_bias compute tf32 "
                        "algo 4", str(g))
huge = tool({"mode": "plan", "plan": gemm_plans[6], "tensors": GEMM_TENSORS, "dtypes": GEMM_DTYPES, "limits": H100,
             "catalog": {"kernels": K_CPP}, "cases": [{"vars": gemm_vars[0], "scalars": {}}]})["results"][0]
expect("C++: the bytes a huge batch stride reaches saturate at 2^64 - 1",
       huge["launches"][0]["gemm"]["bytes"][:2] == [str(2 ** 64 - 1)] * 2, str(huge))
none_runs = tool({"mode": "plan", "plan": gemm_plans[10], "tensors": GEMM_TENSORS, "dtypes": GEMM_DTYPES,
                  "limits": H100, "catalog": {"kernels": K_CPP}, "cases": [{"vars": gemm_vars[0], "scalars": {}}]})
expect("C++: a plan whose every step's when is zero is refused",
       none_runs["results"][0].get("error") == "launch plan: kernels: every step's \"when\" is zero for this workload: "
                                               "nothing would run", str(none_runs))

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("runtime mirror: all checks passed")
