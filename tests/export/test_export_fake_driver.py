#!/usr/bin/env python3
"""Exported modules through the runtime's real ctypes layer, against the fake
CUDA driver of tests/cuda (fake_libcuda.cpp: launches are recorded with their
argument bytes, not run). PyTorch on the CPU stands in for device memory: a
test double of the runtime's driver class accepts CPU tensors and passes
stream 0; everything else - module loading, kernel lookup, parameter layouts,
the dynamic shared memory opt-in, cuLaunchKernel and cuLaunchKernelEx with
cluster dimensions - goes through ctypes to the fake library.

Checked: a GPUMode submission (v4 TriMul) passes every tensor of
custom_kernel(data) where the plan says (weights by reference.py's names, the
mask converted to float32 when it is int64, the output it returns, scratch in
one allocation), a KernelBench ModelNew (a native task, and one with module
parameters from a problem file or from the namespace KernelBench runs it in),
and a FlashInfer-Bench entry point in destination-passing style with
per-shape builds, variants and clusters; bad inputs get clear errors.
A plan with GEMM steps (tests/export/fixtures/gemm_bias_gelu) runs them with
PyTorch's matmul on the CPU tensors between the recorded kernels, per-step
"when" choosing the path, and its results are checked numerically.

  test_export_fake_driver.py --python PY --ksearch KSEARCH --fake-libcuda LIB --source-dir SRC --work DIR
"""
import argparse
import ctypes
import importlib.util
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--python", required=True)
ap.add_argument("--ksearch", required=True)
ap.add_argument("--fake-libcuda", required=True)
ap.add_argument("--source-dir", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--inner", action="store_true")
args = ap.parse_args()

if not args.inner:
    # Run under the interpreter that has PyTorch.
    if args.python == "NONE":
        print("skipped: no Python with PyTorch (Debian: apt-get install python3-torch)")
        sys.exit(77)
    os.environ["KSEARCH_LIBCUDA"] = args.fake_libcuda
    os.environ["KSFAKE_DEVICES"] = "9.0"
    sys.exit(subprocess.call([args.python] + sys.argv + ["--inner"]))

import torch  # noqa: E402

failures = []


def expect(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL:", what, detail)
    else:
        print("ok:", what)


def raises(fn, *words):
    try:
        fn()
    except Exception as e:  # the runtime's KsRuntimeError, named in the message
        msg = "%s: %s" % (type(e).__name__, e)
        return all(w in msg for w in words), msg
    return False, "no error"


work = args.work
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
cache = os.path.join(work, "cache")
src = args.source_dir


def export(fmt, task, solution, out, *extra):
    p = subprocess.run([args.ksearch, "export", "--format", fmt, "--task", task, "--solution", solution, "--cache-dir",
                        cache, "-o", out] + list(extra), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("export failed: " + p.stderr)
    return out


def import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


fake = ctypes.CDLL(args.fake_libcuda)
fake.ksfake_launch_json.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]


def launches():
    out = []
    buf = ctypes.create_string_buffer(1 << 16)
    for i in range(fake.ksfake_launch_count()):
        n = fake.ksfake_launch_json(i, buf, len(buf))
        assert n >= 0
        out.append(json.loads(buf.value.decode()))
    fake.ksfake_clear_launches()
    return out


def cpu_driver(base):
    """The runtime's own driver class of an exported module, taking CPU tensors (test double)."""

    class CpuTensors(base):
        def device_of(self, tensor):
            return 0

        def stream(self, tensor):
            return None

    return CpuTensors()


def arg_value(hexbytes, size):
    return int.from_bytes(bytes.fromhex(hexbytes)[:size], "little")


def check_launches(label, module, recorded, pointers, dims, scalars=None):
    """Every recorded launch against the plan: buffers by name, values by expression, scratch inside one block,
    scalar inputs (name -> (the bytes the kernel must get, the value in expressions)) by name."""
    rt = module
    sol = module._RUNNER.solution
    scalars = scalars or {}
    build = sol.builds[sol.build_for(dims)]
    variables = dict(dims, **build.params)
    reals = {}
    for name, (data, value) in scalars.items():
        if isinstance(value, float):
            reals[name] = value
        else:
            variables[name] = value
    plan = rt.LaunchPlan(module.MANIFEST["plan"])
    body = plan.kernels
    for when, kernels, scratch, has in plan.variants:
        if when.eval_double(variables, reals) != 0:
            body = kernels
            break
    ok = len(recorded) == len(body)
    scratch_ptrs = []
    detail = ""
    for l, k in zip(recorded, body):
        sym = build.symbol_for(k.kernel)
        params = build.recorded_params(sym)
        if l["kernel"] != sym:
            ok, detail = False, "kernel %s, plan says %s" % (l["kernel"], sym)
        for j, a in enumerate(k.args):
            size = params[j][1]
            v = arg_value(l["args"][j], size)
            if a.kind == "name_or_expr" and a.text in scalars:
                good = bytes.fromhex(l["args"][j])[:size] == scalars[a.text][0] and size == len(scalars[a.text][0])
            elif a.kind == "name_or_expr" and a.text in pointers:
                good = v == pointers[a.text]
            elif a.kind == "name_or_expr" and a.text in [s.name for s in (plan.scratch + sum(
                    [v_[2] for v_ in plan.variants], []))]:
                scratch_ptrs.append(v)
                good = v != 0 and v % 256 == 0
            elif a.kind == "f32":
                good = bytes.fromhex(l["args"][j])[:4] == struct.pack("<f", a.expr.eval_double(variables, reals))
            elif a.kind == "f64":
                good = bytes.fromhex(l["args"][j])[:8] == struct.pack("<d", a.expr.eval_double(variables, reals))
            else:
                good = v == a.expr.eval_int(variables, reals) % (1 << (8 * size))
            if not good:
                ok, detail = False, "launch %s arg %d `%s` = %#x" % (l["kernel"], j, a.text, v)
    expect("%s: %d launches, every argument where the plan puts it" % (label, len(recorded)), ok, detail)
    return recorded, scratch_ptrs


# ---------------------------------------------------------------------------
# GPUMode: v4 TriMul
sub = export("gpumode", "gpumode/trimul", os.path.join(src, "examples/trimul/candidates/v4_pipelined_fp16.md"),
             os.path.join(work, "submission.py"))
g = import_file(sub, "ks_submission")
g._RUNNER._driver = cpu_driver(g.CudaDriver)
B, N, C, H = 1, 32, 128, 128
torch.manual_seed(0)
x = torch.randn(B, N, N, C)
weights = {k: torch.randn(H, C) for k in ("left_proj.weight", "right_proj.weight", "left_gate.weight",
                                          "right_gate.weight", "out_gate.weight")}
weights.update({"norm.weight": torch.randn(C), "norm.bias": torch.randn(C), "to_out_norm.weight": torch.randn(H),
                "to_out_norm.bias": torch.randn(H), "to_out.weight": torch.randn(C, H)})
config = {"hidden_dim": H, "dim": C}
names = {"x": None, "norm_weight": "norm.weight", "norm_bias": "norm.bias", "left_proj": "left_proj.weight",
         "right_proj": "right_proj.weight", "left_gate": "left_gate.weight", "right_gate": "right_gate.weight",
         "out_gate": "out_gate.weight", "to_out_norm_weight": "to_out_norm.weight",
         "to_out_norm_bias": "to_out_norm.bias", "to_out": "to_out.weight"}
mask = torch.ones(B, N, N)
launches()
out = g.custom_kernel((x, mask, weights, config))
expect("custom_kernel returns the output [B, N, N, C] float32",
       tuple(out.shape) == (B, N, N, C) and out.dtype == torch.float32)
ptr = {k: (weights[v].data_ptr() if v else x.data_ptr()) for k, v in names.items()}
ptr.update(mask=mask.data_ptr(), out=out.data_ptr())
rec, scratch = check_launches("gpumode v4, float32 mask", g, launches(), ptr, dict(B=B, N=N, C=C, H=H))
expect("the launches are v4's six kernels in plan order",
       [l["kernel"] for l in rec] == ["v4_pack_weights", "v4_ln_input", "v4_project", "v4_triangle", "v4_out_norm",
                                      "v4_output"], [l["kernel"] for l in rec])
expect("61440 bytes of dynamic shared memory passed (the fake refuses it without the opt-in)",
       [l["shared_bytes"] for l in rec] == [0, 0, 61440, 61440, H * 33 * 4, 61440])
expect("scratch buffers are distinct, 256-byte aligned", len(set(scratch)) == 8, str(scratch))

imask = torch.randint(0, 2, (B, N, N))
out2 = g.custom_kernel((x, imask, weights, config))
rec2 = launches()
mask_arg = [k.args for k in g._RUNNER.solution.plan.kernels if k.kernel == "v4_project"][0]
mask_index = [a.text for a in mask_arg].index("mask")
mask_ptr = arg_value(rec2[2]["args"][mask_index], 8)
expect("an int64 mask reaches the kernel as a float32 copy", len(rec2) == 6 and mask_ptr not in (0, imask.data_ptr(),
                                                                                                  mask.data_ptr()))
expect("a second call allocates a new output", out2.data_ptr() != 0 and tuple(out2.shape) == (B, N, N, C))

ok, msg = raises(lambda: g.custom_kernel((x.double(), mask, weights, config)), "input \"x\"", "float32")
expect("a float64 input is refused by name", ok, msg)
bad = dict(weights)
bad["left_proj.weight"] = torch.randn(64, C)
ok, msg = raises(lambda: g.custom_kernel((x, mask, bad, config)), "dimension H")
expect("weights of another hidden size are refused, naming the dimension", ok, msg)
ok, msg = raises(lambda: g.custom_kernel((x[..., :64], mask, weights, config)), "dimension C")
expect("inputs that disagree on a dimension are refused", ok, msg)
ok, msg = raises(lambda: g.custom_kernel((x, mask, {k: v for k, v in weights.items() if k != "to_out.weight"},
                                          config)), "to_out.weight", "reference.py")
expect("a missing weight is named", ok, msg)

# ---------------------------------------------------------------------------
# KernelBench: a native task without parameters, then one with module parameters.
spec = json.loads(subprocess.run([args.ksearch, "tasks", "--spec", "kernelbench/level1/19_ReLU"], check=True,
                                 capture_output=True, text=True).stdout)
relu_sol = os.path.join(work, "relu_start.json")
json.dump(spec["starting_points"][0], open(relu_sol, "w"))
relu = open(export("kernelbench", "kernelbench/level1/19_ReLU", relu_sol, os.path.join(work, "relu_modelnew.py"))).read()
ctx = {}
exec(compile(relu, "<string>", "exec"), ctx)  # as KernelBench's load_custom_model does
ctx["_RUNNER"]._driver = cpu_driver(ctx["CudaDriver"])
m = ctx["ModelNew"]()
xr = torch.rand(7, 33)
y = m(xr)
rec = launches()
expect("ReLU ModelNew: output shaped like x", tuple(y.shape) == (7, 33) and len(rec) == 1)
expect("ReLU ModelNew: x and output pointers, n = 231",
       arg_value(rec[0]["args"][0], 8) == xr.data_ptr() and arg_value(rec[0]["args"][1], 8) == y.data_ptr() and
       231 in [arg_value(a, 8) for a in rec[0]["args"][2:]], str(rec[0]))

ln_sol = os.path.join(work, "ln_start.json")
spec = json.loads(subprocess.run([args.ksearch, "tasks", "--spec", "kernelbench/level1/40_LayerNorm"], check=True,
                                 capture_output=True, text=True).stdout)
json.dump(spec["starting_points"][0], open(ln_sol, "w"))
problem_file = os.path.join(src, "tests/export/fixtures/kb_layernorm_problem.py")
problem = open(problem_file).read()
for label, extra, with_problem in (("embedded problem file", ["--problem-file", problem_file], False),
                                   ("Model of KernelBench's namespace", [], True)):
    text = open(export("kernelbench", "kernelbench/level1/40_LayerNorm", ln_sol,
                       os.path.join(work, "ln_modelnew_%d.py" % len(extra)), *extra)).read()
    expect("LayerNorm ModelNew (%s): the problem source is %s" % (label, "embedded" if extra else "absent"),
           ("_PROBLEM_SOURCE = None" in text) != bool(extra))
    ctx = {}
    if with_problem:
        exec(compile(problem, "<string>", "exec"), ctx)  # KernelBench executes the reference first, same dict
    exec(compile(text, "<string>", "exec"), ctx)
    ctx["_RUNNER"]._driver = cpu_driver(ctx["CudaDriver"])
    torch.manual_seed(42)
    model = ctx["ModelNew"]((3, 5, 7))
    with torch.no_grad():
        model.problem.ln.weight.uniform_()  # distinct values, so the check below reads them
    xl = torch.rand(2, 3, 5, 7)
    yl = model(xl)
    rec = launches()
    w_ptr = model.problem.ln.weight.data_ptr()
    b_ptr = model.problem.ln.bias.data_ptr()
    apply = [l for l in rec if l["kernel"] == "ln_apply"]
    expect("LayerNorm ModelNew (%s): x, the module's weight and bias, output" % label,
           len(apply) == 1 and [arg_value(a, 8) for a in apply[0]["args"][:5:2]] == [xl.data_ptr(), w_ptr,
                                                                                     yl.data_ptr()] and
           arg_value(apply[0]["args"][3], 8) == b_ptr, str(apply))
ctx = {}
exec(compile(open(os.path.join(work, "ln_modelnew_0.py")).read(), "<string>", "exec"), ctx)
ctx["_RUNNER"]._driver = cpu_driver(ctx["CudaDriver"])
ok, msg = raises(lambda: ctx["ModelNew"]((3, 5, 7))(torch.rand(2, 3, 5, 7)), "problem Model", "--problem-file")
expect("without a problem Model, the missing parameters are explained", ok, msg)

# ---------------------------------------------------------------------------
# FlashInfer-Bench: the Solution's main.py imported as its python builder does (a package).
fi_dir = os.path.join(src, "tests/export/fixtures/flashinfer_rmsnorm")
for sol_file, label in (("solution.json", "per-shape builds and a variant"),
                        ("solution_clusters.json", "thread-block clusters")):
    out = export("flashinfer", fi_dir, os.path.join(fi_dir, sol_file), os.path.join(work, "fi_" + sol_file))
    solution = json.load(open(out))
    pkg = os.path.join(work, "pkgroot_" + sol_file.replace(".", "_"), "fib_python_ksearch")
    for s in solution["sources"]:
        os.makedirs(os.path.dirname(os.path.join(pkg, s["path"])), exist_ok=True)
        open(os.path.join(pkg, s["path"]), "w").write(s["content"])
    open(os.path.join(pkg, "__init__.py"), "w").close()
    sys.path.insert(0, os.path.dirname(pkg))
    entry = importlib.import_module("fib_python_ksearch.main")
    sys.path.pop(0)
    del sys.modules["fib_python_ksearch.main"], sys.modules["fib_python_ksearch"]
    entry._RUNNER._driver = cpu_driver(entry.CudaDriver)
    rows_by_batch = {}
    for batch in (1, 7, 4096, 100):
        hs = torch.randn(batch, 128).to(torch.bfloat16)
        w = torch.randn(128).to(torch.bfloat16)
        o = torch.empty(batch, 128, dtype=torch.bfloat16)
        entry.run(hs, w, o)
        rec, _ = check_launches("flashinfer %s, batch %d" % (label, batch), entry, launches(),
                                {"hidden_states": hs.data_ptr(), "weight": w.data_ptr(), "output": o.data_ptr()},
                                dict(batch_size=batch, hidden_size=128))
        rows_by_batch[batch] = rec[0]
    if sol_file == "solution.json":
        expect("batch 1 runs the variant", rows_by_batch[1]["kernel"] == "rmsnorm_one" and
               not rows_by_batch[1]["extended"])
        expect("batch 7 and 100 run the default build (2 rows per block), 4096 its tuned one (8)",
               [rows_by_batch[b]["block"][1] for b in (7, 100, 4096)] == [2, 2, 8] and
               rows_by_batch[4096]["grid"][0] == 512, str(rows_by_batch))
    else:
        expect("small batches launch clusters of 2, large ones of 16 (non-portable, opted in)",
               rows_by_batch[7]["cluster"] == [2, 1, 1] and rows_by_batch[4096]["cluster"] == [16, 1, 1] and
               all(r["extended"] for r in rows_by_batch.values()), str(rows_by_batch))
    ok, msg = raises(lambda: entry.run(torch.randn(3, 128), w, torch.empty(3, 128)), "hidden_states", "bfloat16")
    expect("flashinfer (%s): a float32 input is refused by name" % label, ok, msg)
    ok, msg = raises(lambda: entry.run(torch.randn(3, 2, 128).to(torch.bfloat16), w,
                                       torch.empty(3, 128, dtype=torch.bfloat16)), "hidden_states", "3 dimensions")
    expect("flashinfer (%s): an input of another rank is refused" % label, ok, msg)
    ok, msg = raises(lambda: entry.run(torch.randn(3, 128).to(torch.bfloat16), w,
                                       torch.empty(4, 128, dtype=torch.bfloat16)), "output", "shape")
    expect("flashinfer (%s): a destination of the wrong shape is refused" % label, ok, msg)

# ---------------------------------------------------------------------------
# The four built-in FlashInfer-Bench tasks: each starting kernel's Solution, called as FlashInfer-Bench calls it
# (inputs in definition order with scalar inputs as Python numbers, then the preallocated outputs). Small shapes:
# the runtime binds dimensions from the tensors, and the fake driver runs nothing.
TORCH_DTYPES = {"bf16": "bfloat16", "f32": "float32", "i32": "int32", "f8e4m3": "float8_e4m3fn"}
FI_TASKS = {
    "gqa_paged_decode_h32_kv4_d128_ps1": (
        dict(batch_size=3, num_qo_heads=32, num_kv_heads=4, head_dim=128, num_pages=64, page_size=1, len_indptr=4,
             num_kv_indices=10),
        [{"sm_scale": 0.1}, {"sm_scale": torch.tensor(0.25)}, {"sm_scale": 0.1}]),
    "mla_paged_decode_h16_ckv512_kpe64_ps1": (
        dict(batch_size=2, num_qo_heads=16, head_dim_ckv=512, head_dim_kpe=64, page_size=1, num_pages=32,
             len_indptr=3, num_kv_indices=5),
        [{"sm_scale": 1 / 192 ** 0.5}, {"sm_scale": 1}]),
    "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1": (
        dict(num_qo_heads=16, head_dim_ckv=512, head_dim_kpe=64, page_size=1, total_q=6, num_pages=40, len_indptr=3,
             num_kv_indices=9),
        [{"sm_scale": 0.0625}, {"sm_scale": 0.3}]),
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": (
        dict(seq_len=3, num_experts=256, num_local_experts=2, hidden_size=256, intermediate_size=128,
             gemm1_out_size=256, num_hidden_blocks=2, num_intermediate_blocks=1, num_gemm1_out_blocks=2),
        [{"local_expert_offset": 224, "routed_scaling_factor": 2.5},
         {"local_expert_offset": torch.tensor(32, dtype=torch.int32), "routed_scaling_factor": 1.0}]),
}
HAS_FP8 = hasattr(torch, "float8_e4m3fn")


def expected_scalar(dtype, v):
    """(bytes, value) a kernel gets for scalar input of `dtype` given the Python value `v`."""
    v = v.item() if isinstance(v, torch.Tensor) else v
    if dtype == "f32":
        data = struct.pack("<f", float(v))
        return data, struct.unpack("<f", data)[0]
    assert dtype == "i32"
    return struct.pack("<i", int(v)), int(v)


for definition, (dims, calls) in FI_TASKS.items():
    task = "flashinfer/" + definition
    tspec = json.loads(subprocess.run([args.ksearch, "tasks", "--spec", task], check=True, capture_output=True,
                                      text=True).stdout)
    start = os.path.join(work, definition + "_start.json")
    json.dump(tspec["starting_points"][0], open(start, "w"))
    out = export("flashinfer", task, start, os.path.join(work, definition + ".json"))
    solution = json.load(open(out))
    pkg = os.path.join(work, "pkgroot_" + definition, "fib_python_ksearch_fi")
    for s_ in solution["sources"]:
        os.makedirs(os.path.dirname(os.path.join(pkg, s_["path"])), exist_ok=True)
        open(os.path.join(pkg, s_["path"]), "w").write(s_["content"])
    open(os.path.join(pkg, "__init__.py"), "w").close()
    sys.path.insert(0, os.path.dirname(pkg))
    entry = importlib.import_module("fib_python_ksearch_fi.main")
    sys.path.pop(0)
    del sys.modules["fib_python_ksearch_fi.main"], sys.modules["fib_python_ksearch_fi"]
    entry._RUNNER._driver = cpu_driver(entry.CudaDriver)
    launches()
    specs = [t for t in tspec["tensors"]]
    scalar_types = {t["name"]: t["dtype"] for t in specs if t["shape"] is None}
    short = "_".join(definition.split("_")[:3])
    if any(t["dtype"] == "f8e4m3" for t in specs) and not HAS_FP8:
        # This PyTorch has no float8 dtype: the runtime says so instead of misreading another dtype.
        fake_inputs = [torch.zeros([entry.Expr(str(e)).eval_int(dims) for e in t["shape"]], dtype=torch.uint8)
                       if t["shape"] is not None else 1 for t in specs if t.get("role") != "output"]
        ok, msg = raises(lambda: entry._RUNNER.run(fake_inputs), "float8_e4m3fn", "PyTorch")
        expect("%s: without float8 in PyTorch %s the runtime refuses, naming the dtype" % (short, torch.__version__),
               ok, msg)
        print("note: %s: launches not checked here (PyTorch %s has no float8_e4m3fn; PyTorch 2.1 or newer does)"
              % (short, torch.__version__))
        continue
    for n, scalars in enumerate(calls):
        torch.manual_seed(n)
        args_, pointers, outputs = [], {}, []
        for t in specs:
            if t["shape"] is None:
                args_.append(scalars[t["name"]])
                continue
            shape = [entry.Expr(str(e)).eval_int(dims) for e in t["shape"]]
            dt = getattr(torch, TORCH_DTYPES[t["dtype"]])
            x = torch.randn(shape).to(dt) if t["dtype"] != "i32" else torch.randint(0, 8, shape, dtype=dt)
            pointers[t["name"]] = x.data_ptr()
            (outputs if t.get("role") == "output" else args_).append(x)
        entry.run(*(args_ + outputs))
        expect_scalars = {k: expected_scalar(scalar_types[k], v) for k, v in scalars.items()}
        rec, _ = check_launches("%s call %d (%s)" % (short, n, ", ".join("%s=%s" % kv for kv in scalars.items())),
                                entry, launches(), pointers, dims, expect_scalars)
        expect("%s call %d: the plan's %d kernels launched, every scalar input passed in its own type" % (
            short, n, len(entry._RUNNER.solution.plan.kernels)),
            len(rec) == len(entry._RUNNER.solution.plan.kernels) and
            sum(a.text in scalars for k in entry._RUNNER.solution.plan.kernels for a in k.args) >= len(scalars))
    expect("%s: calls with the same shapes and scalar values reuse one resolved plan (%d kept for %d calls)" % (
        short, len(entry._RUNNER._bound), len(calls)),
        len(entry._RUNNER._bound) == len(set(repr({k: (v.item() if isinstance(v, torch.Tensor) else v)
                                                  for k, v in c.items()}) for c in calls)))
    first_scalar = next(t for t in specs if t["shape"] is None)["name"]
    names = [t["name"] for t in specs]

    def call_with(value):
        a = list(args_ + outputs)
        a[names.index(first_scalar)] = value
        return entry.run(*a)

    ok, msg = raises(lambda: call_with("fast"), "scalar input \"%s\"" % first_scalar, "number")
    expect("%s: a scalar input that is not a number is refused by name" % short, ok, msg)
    ok, msg = raises(lambda: call_with(torch.ones(2)), "scalar input \"%s\"" % first_scalar, "2 elements")
    expect("%s: a tensor of two elements for a scalar input is refused" % short, ok, msg)
    ok, msg = raises(lambda: entry._RUNNER.run(args_[:-1]), "expected %d inputs" % len(args_), first_scalar)
    expect("%s: a call without its scalar input is refused, naming the inputs" % short, ok, msg)

# ---------------------------------------------------------------------------
# GEMM steps: the runtime runs them with PyTorch's matmul (here on the CPU tensors) in plan order with the
# kernels the fake driver records, skips steps whose "when" is zero, takes a typed scratch buffer as an
# operand, writes the caller's output in destination-passing style, and refuses a step that reaches past
# a buffer, naming it.
import copy  # noqa: E402

gemm_dir = os.path.join(src, "tests/export/fixtures/gemm_bias_gelu")
gemm_bundle = json.load(open(export("bundle", gemm_dir, os.path.join(gemm_dir, "solution.json"),
                                    os.path.join(work, "gemm_bundle.json"))))
rtm = import_file(os.path.join(src, "lib/export/runtime/ksearch_runtime.py"), "ks_runtime_for_gemm")
runner = rtm.Runner(gemm_bundle, driver=cpu_driver(rtm.CudaDriver))
launches()


def gemm_inputs(m):
    torch.manual_seed(m)
    return [torch.randn(m, 8).to(torch.float16), torch.randn(6, 8).to(torch.float16), torch.randn(6)]


for m, scale in ((4, 1.0), (5, 0.75), (6, 1.0), (9, 0.75)):
    x, w, bias = gemm_inputs(m)
    want = torch.nn.functional.gelu(scale * (x.float() @ w.float().t()) + bias, approximate="tanh")
    out = runner.run([x, w, bias])[0]
    rec = launches()
    expect("GEMM steps, M = %d: out = gelu(%s x @ w^T + bias) (%s path)" % (m, scale, "one step" if m % 2 == 0 else
                                                                            "scratch, then C"),
           tuple(out.shape) == (m, 6) and out.dtype == torch.float32 and torch.allclose(out, want, rtol=1e-5,
                                                                                       atol=1e-5),
           str((out - want).abs().max()))
    expect("GEMM steps, M = %d: the one kernel launched with out, M and N" % m,
           [l["kernel"] for l in rec] == ["mark"] and arg_value(rec[0]["args"][0], 8) == out.data_ptr() and
           [arg_value(a, 4) for a in rec[0]["args"][1:]] == [m, 6], str(rec))
x, w, bias = gemm_inputs(5)
expect("GEMM steps: the resolved plan in words",
       runner.describe([x, w, bias]).endswith(
           "cuBLASLt GEMM 5x6x8 x @ w^T -> tmp algo 0; mark grid 1x1x1 block 32x1x1 smem 0; "
           "cuBLASLt GEMM 5x6x8 x @ w^T -> out + 0.5 * tmp epilogue gelu_bias algo 0"), runner.describe([x, w, bias]))
mine = torch.full((5, 6), 3.0)
back = runner.run([x, w, bias], outputs=[mine])
launches()
expect("GEMM steps: a caller's output is written in place",
       back[0] is mine and torch.allclose(mine, torch.nn.functional.gelu(0.75 * (x.float() @ w.float().t()) + bias,
                                                                          approximate="tanh"), rtol=1e-5, atol=1e-5))

# run_gemm itself against a straightforward reference: every element of D computed in float64 by a loop over the
# flat buffers with the step's leading dimensions and batch strides (no as_strided, no matmul), then alpha,
# beta * C, bias and the activation (GELU as its tanh formula). Each step is resolved from plan JSON by the
# runtime's own resolver, so the defaults are the ones the runtime computes. Checked: f32, f16 and bf16
# operands, f32 and half outputs, transposes, padded rows, batch strides with gaps and a shared (stride 0)
# operand, a separate C and D itself as C, a C full of NaN that beta 0 must not read, relu and gelu with and
# without bias, alpha, compute "tf32" (and PyTorch's matmul flags as they were after), and no element of D's
# buffer outside the step's view written.
TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
SENTINEL = -7.5  # exact in every dtype here


def resolve(gemm, dtypes, dims):
    """The one GEMM step of a plan, as the runtime resolves it."""
    plan = rtm.LaunchPlan({"kernels": [{"gemm": gemm}]})
    r = rtm.resolve_plan(plan, dims, list(dtypes), lambda name: None, [], rtm.DeviceLimits(), {}, dtypes)
    return r.launches[0].gemm


def gelu_tanh(v):
    return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))


def f32(v):
    return float(torch.tensor(v, dtype=torch.float32))


def reference(g, a, b, c, d0, bias):
    """D's whole buffer after the step (a list of floats), and which of its elements the step writes."""
    out = list(d0)
    written = set()
    alpha, beta = f32(g.alpha), f32(g.beta)
    for i in range(g.batch):
        for r in range(g.m):
            for j in range(g.n):
                s = 0.0
                for kk in range(g.k):
                    av = a[i * g.stride_a + (kk * g.lda + r if g.trans_a else r * g.lda + kk)]
                    bv = b[i * g.stride_b + (j * g.ldb + kk if g.trans_b else kk * g.ldb + j)]
                    s += av * bv
                v = alpha * s
                if beta != 0:
                    v += beta * c[i * g.stride_c + r * g.ldc + j]
                if g.epilogue in ("bias", "relu_bias", "gelu_bias"):
                    v += bias[j]
                if g.epilogue in ("relu", "relu_bias"):
                    v = max(v, 0.0)
                elif g.epilogue in ("gelu", "gelu_bias"):
                    v = gelu_tanh(v)
                at = i * g.stride_d + r * g.ldd + j
                out[at] = v
                written.add(at)
    return out, written


rng = random.Random(20261127)


def buffer(n, dtype, fill=None):
    if fill is not None:
        return torch.full((n,), fill, dtype=TORCH[dtype])
    return torch.tensor([rng.uniform(-2, 2) for _ in range(n)], dtype=torch.float64).to(TORCH[dtype])


def case(label, gemm, dtypes, dims, c_fill=None, tol=None):
    g = resolve(gemm, dtypes, dims)
    size = lambda nbytes, name: nbytes // rtm._DTYPES[dtypes[name]][0] + 5  # a little past what the step reaches
    a = buffer(size(g.bytes_a(), g.a), dtypes[g.a])
    b = a if g.b == g.a else buffer(size(g.bytes_b(), g.b), dtypes[g.b])
    d = buffer(size(g.bytes_d(), g.d), dtypes[g.d], SENTINEL if g.c != g.d else None)
    c = d if g.c == g.d else buffer(size(g.bytes_c(), g.c), dtypes[g.c], c_fill)
    bias = buffer(g.n + 3, dtypes[g.bias]) if g.bias else None
    vals = lambda t: None if t is None else t.double().tolist()
    want, written = reference(g, vals(a), vals(b), vals(c), vals(d), vals(bias))
    inputs = [t.clone() for t in (a, b) + ((c,) if c is not d else ())]
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)
    rtm.run_gemm(g, a, b, c, d, bias)
    got = d.double().tolist()
    out_dtype = dtypes[g.d]
    rtol, atol = tol or ((1e-5, 1e-5) if out_dtype == "f32" else (1e-2, 1e-2))
    bad = [(at, got[at], want[at]) for at in range(len(got))
           if (abs(got[at] - want[at]) > atol + rtol * abs(want[at]) if at in written else got[at] != want[at])]
    expect("%s: %s, %d of D's %d elements written, the rest untouched" % (label, g.describe(), len(written), len(got)),
           not bad and all(math.isfinite(v) for v in got), str(bad[:5]))
    expect("%s: the inputs are unchanged" % label,
           all(torch.equal(x.view(torch.uint8), y.view(torch.uint8))  # bit for bit: NaN is NaN
               for x, y in zip(inputs, [t for t in (a, b) + ((c,) if c is not d else ())])))
    expect("%s: PyTorch's matmul flags are as they were" % label,
           flags == (torch.backends.cuda.matmul.allow_tf32,
                     torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction))
    return g


F32 = {"x": "f32", "w": "f32", "cin": "f32", "out": "f32", "bias": "f32"}
case("f32, dense defaults", {"a": "x", "b": "w", "d": "out", "m": "M", "n": "N", "k": "K"}, F32,
     {"M": 5, "N": 6, "K": 7})
case("f32, both transposed, padded rows, batch strides with gaps, alpha, beta * C, bias, relu",
     {"a": "x", "b": "w", "c": "cin", "d": "out", "m": "M", "n": "N", "k": "K", "trans_a": True, "trans_b": True,
      "lda": "M + 3", "ldb": "K + 1", "ldc": "N + 2", "ldd": "N + 4", "batch": 3, "stride_a": "K * (M + 3) + 5",
      "stride_b": "N * (K + 1) + 1", "stride_c": "M * (N + 2) + 7", "stride_d": "M * (N + 4) + 3", "alpha": 0.5,
      "beta": 2, "bias": "bias", "epilogue": "relu_bias"}, F32, {"M": 4, "N": 5, "K": 6})
g = case("f32, compute tf32 (no effect on the CPU), gelu",
         {"a": "x", "b": "w", "d": "out", "m": 3, "n": 4, "k": 9, "compute": "tf32", "epilogue": "gelu",
          "alpha": "-1.0 / 3"}, F32, {})
expect("the tf32 case resolved as such", g.compute == "tf32" and g.alpha == -1.0 / 3)
case("f16 operands, f32 D: a shared B (stride 0) over a batch, bias and GELU",
     {"a": "x", "b": "w", "d": "out", "m": "M", "n": "N", "k": "K", "batch": "B", "stride_b": 0, "bias": "bias",
      "epilogue": "gelu_bias", "trans_b": True}, {"x": "f16", "w": "f16", "out": "f32", "bias": "f32"},
     {"M": 6, "N": 3, "K": 16, "B": 4})
case("bf16 operands, bf16 D read as C in place (beta 1), relu, padded D",
     {"a": "x", "b": "w", "d": "out", "m": "M", "n": "N", "k": "K", "beta": 1.0, "ldd": "N + 3", "epilogue": "relu"},
     {"x": "bf16", "w": "bf16", "out": "bf16"}, {"M": 5, "N": 6, "K": 8}, tol=(2e-2, 2e-2))
case("f16 operands and D, batched and transposed A, alpha -1, bias in f16",
     {"a": "x", "b": "w", "d": "out", "m": "M", "n": "N", "k": "K", "batch": 2, "trans_a": True, "alpha": -1,
      "bias": "bias", "epilogue": "bias"}, {"x": "f16", "w": "f16", "out": "f16", "bias": "f16"},
     {"M": 7, "N": 5, "K": 4})
case("beta 0: a C full of NaN is not read", {"a": "x", "b": "w", "c": "cin", "d": "out", "m": 4, "n": 4, "k": 4},
     F32, {}, c_fill=float("nan"))
case("one buffer as both A and B (x @ x^T)",
     {"a": "x", "b": "x", "d": "out", "m": 6, "n": 6, "k": 5, "trans_b": True}, F32, {})

# The step's arithmetic happens in f32: f16 operands whose product overflows f16 still give the f32 value.
g = resolve({"a": "x", "b": "w", "d": "out", "m": 1, "n": 1, "k": 2}, {"x": "f16", "w": "f16", "out": "f32"}, {})
x = torch.tensor([300.0, 300.0], dtype=torch.float16)
w = torch.tensor([300.0, 300.0], dtype=torch.float16)
out = torch.zeros(1, dtype=torch.float32)
rtm.run_gemm(g, x, w, out, out)
expect("f16 operands accumulate in f32 (300 * 300 * 2 = 180000, past f16's range)", out.item() == 180000.0,
       str(out.item()))

too_far = copy.deepcopy(gemm_bundle)
too_far["plan"]["kernels"][0]["gemm"]["k"] = "K + 1"
x, w, bias = gemm_inputs(4)
ok, msg = raises(lambda: rtm.Runner(too_far, driver=runner.driver).run([x, w, bias]),
                 "PlanError: launch plan: kernels[0] (GEMM step): cuBLASLt GEMM 4x6x9 x @ w^T -> out epilogue "
                 "gelu_bias algo 0 reaches 72 bytes into `x`, which has 64; check m, n, k, the leading dimensions, "
                 "batch and strides")
expect("GEMM steps: a step that reaches past a tensor is refused, naming it", ok, msg)
small_tmp = copy.deepcopy(gemm_bundle)
small_tmp["plan"]["scratch"][0]["shape"] = ["M", "N - 1"]
x, w, bias = gemm_inputs(5)
ok, msg = raises(lambda: rtm.Runner(small_tmp, driver=runner.driver).run([x, w, bias]),
                 "kernels[1] (GEMM step)", "reaches 120 bytes into `tmp`, which has 100")
expect("GEMM steps: a step that reaches past a scratch buffer is refused, naming it", ok, msg)
launches()

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("fake driver: all checks passed")
