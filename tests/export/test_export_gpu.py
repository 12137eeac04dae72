#!/usr/bin/env python3
"""Exported modules on a GPU (ctest label `gpu`; skips, exit 77, without one).

- Every shipped TriMul candidate, exported as a GPUMode submission, computes
  what the task's trusted CUDA reference (exported the same way) computes,
  within the task's tolerance (|out - ref| <= 2e-2 + 2e-2 |ref|), on inputs
  made as reference.py makes them (normal and Cauchy x, int64 and float32
  masks), on the current stream and on another stream; the exported
  reference itself agrees with a PyTorch FP32 implementation of the math.
- The NVRTC fallback (forced with KSEARCH_EXPORT_NVRTC=1) says so on stderr
  and gives the same output.
- A KernelBench ModelNew (19_ReLU; 40_LayerNorm with module parameters) and
  the FlashInfer-shaped fixture's entry point agree with PyTorch.
- The four FlashInfer-Bench tasks' starting kernels, exported as Solutions and
  called with scalar inputs as Python numbers (two values each), agree with
  PyTorch references written from the definitions (harness_fixture.py).

  test_export_gpu.py --python PY --ksearch KSEARCH --source-dir SRC --work DIR
"""
import argparse
import importlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--python", required=True)
ap.add_argument("--ksearch", required=True)
ap.add_argument("--source-dir", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--inner", action="store_true")
ap.add_argument("--nvrtc-child", default="")
args = ap.parse_args()

if not args.inner:
    if args.python == "NONE":
        print("skipped: no Python with PyTorch")
        sys.exit(77)
    probe = subprocess.run([args.python, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True)
    if probe.stdout.strip() != "True":
        print("skipped: PyTorch sees no CUDA device (%s)" % (probe.stdout.strip() or probe.stderr.strip()[-200:]))
        sys.exit(77)
    sys.exit(subprocess.call([args.python] + sys.argv + ["--inner"]))

import torch  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
failures = []


def expect(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL:", what, detail)
    else:
        print("ok:", what, detail)


def import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def trimul_inputs(bs, seqlen, dim, hidden, seed, nomask, distribution):
    """Inputs as reference.py's generate_input makes them (its distributions and conventions)."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    if distribution == "cauchy":
        x = torch.distributions.Cauchy(0, 2).sample((bs, seqlen, seqlen, dim)).to(device="cuda", dtype=torch.float32)
    else:
        x = torch.randn((bs, seqlen, seqlen, dim), device="cuda", dtype=torch.float32, generator=gen)
    mask = torch.ones(bs, seqlen, seqlen, device="cuda") if nomask else \
        torch.randint(0, 2, (bs, seqlen, seqlen), device="cuda", generator=gen)
    w = {"norm.weight": torch.randn(dim, device="cuda"), "norm.bias": torch.randn(dim, device="cuda")}
    for k in ("left_proj", "right_proj", "left_gate", "right_gate", "out_gate"):
        w[k + ".weight"] = torch.randn(hidden, dim, device="cuda") / math.sqrt(hidden)
    w["to_out_norm.weight"] = torch.randn(hidden, device="cuda")
    w["to_out.weight"] = torch.randn(dim, hidden, device="cuda") / math.sqrt(dim)
    w["to_out_norm.bias"] = torch.randn(hidden, device="cuda")
    return x, mask, w, {"hidden_dim": hidden, "dim": dim}


def trimul_torch(data):
    """The task's math in PyTorch, FP32 (docs/tasks/trimul.md), written for this test."""
    x, mask, w, config = data
    ln = torch.nn.functional.layer_norm
    xn = ln(x, (x.shape[-1],), w["norm.weight"], w["norm.bias"], 1e-5)
    m = mask.to(torch.float32).unsqueeze(-1)
    left = (xn @ w["left_proj.weight"].t()) * m * torch.sigmoid(xn @ w["left_gate.weight"].t())
    right = (xn @ w["right_proj.weight"].t()) * m * torch.sigmoid(xn @ w["right_gate.weight"].t())
    og = torch.sigmoid(xn @ w["out_gate.weight"].t())
    tri = torch.einsum("bikd,bjkd->bijd", left, right)
    h = ln(tri, (tri.shape[-1],), w["to_out_norm.weight"], w["to_out_norm.bias"], 1e-5) * og
    return h @ w["to_out.weight"].t()


def within(out, ref, atol, rtol):
    bad = (out - ref).abs() > atol + rtol * ref.abs()
    bad |= torch.isnan(out) != torch.isnan(ref)
    return int(bad.sum().item()), float((out - ref).abs().max().item())


work = args.work
src = args.source_dir

if args.nvrtc_child:
    # A fresh process with the fallback forced: prints the output's checksum for the parent.
    m = import_file(args.nvrtc_child, "ks_child")
    torch.manual_seed(7)
    data = trimul_inputs(1, 64, 128, 128, 5, True, "normal")
    out = m.custom_kernel(data)
    torch.cuda.synchronize()
    ref = torch.load(os.path.join(work, "fallback_ref.pt"))
    print("CHILD", json.dumps({"max_diff": float((out.cpu() - ref).abs().max().item())}))
    sys.exit(0)

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
cache = os.path.join(work, "cache")


def export(fmt, task, solution, out, *extra):
    p = subprocess.run([args.ksearch, "export", "--format", fmt, "--task", task, "--solution", solution,
                        "--cache-dir", cache, "-o", out] + list(extra), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("export failed: " + p.stderr)
    return out


# ---- TriMul
spec = json.loads(subprocess.run([args.ksearch, "tasks", "--spec", "gpumode/trimul"], check=True, capture_output=True,
                                 text=True).stdout)
ref_sol = os.path.join(work, "trimul_reference.json")
json.dump(spec["references"]["cuda"], open(ref_sol, "w"))
reference = import_file(export("gpumode", "gpumode/trimul", ref_sol, os.path.join(work, "reference_sub.py")), "ks_ref")
candidates = sorted(f for f in os.listdir(os.path.join(src, "examples/trimul/candidates")) if f.startswith("v"))
subs = {c: import_file(export("gpumode", "gpumode/trimul", os.path.join(src, "examples/trimul/candidates", c),
                              os.path.join(work, c + ".py")), "ks_" + c.split("_")[0]) for c in candidates}
cases = [(1, 32, 128, 128, 9371, True, "normal"), (1, 32, 128, 128, 1092, False, "normal"),
         (2, 64, 256, 128, 210284, False, "normal"), (1, 128, 768, 128, 81934, True, "normal"),
         (1, 256, 128, 128, 932, True, "cauchy"), (2, 96, 384, 128, 31, False, "cauchy")]
other = torch.cuda.Stream()
for case in cases:
    torch.manual_seed(case[4])
    data = trimul_inputs(*case)
    ref = reference.custom_kernel(data)
    torch.cuda.synchronize()
    bad, diff = within(ref, trimul_torch(data), 1e-3, 1e-3)
    expect("exported reference vs PyTorch FP32, %s" % (case,), bad == 0, "max diff %.3g" % diff)
    for c, m in subs.items():
        with torch.cuda.stream(other) if c.startswith("v4") else torch.cuda.stream(torch.cuda.current_stream()):
            out = m.custom_kernel(data)
        torch.cuda.synchronize()
        bad, diff = within(out, ref, 2e-2, 2e-2)
        expect("%s vs the task's reference, %s%s" % (c, case, " (another stream)" if c.startswith("v4") else ""),
               bad == 0 and out.dtype == torch.float32 and out.shape == ref.shape, "bad %d, max diff %.3g" % (bad, diff))

# The NVRTC fallback, forced, in a fresh process.
v4 = [c for c in candidates if c.startswith("v4")][0]
torch.manual_seed(7)
ref64 = subs[v4].custom_kernel(trimul_inputs(1, 64, 128, 128, 5, True, "normal"))
torch.cuda.synchronize()
torch.save(ref64.cpu(), os.path.join(work, "fallback_ref.pt"))
p = subprocess.run([sys.executable] + sys.argv + ["--nvrtc-child", os.path.join(work, v4 + ".py")],
                   env=dict(os.environ, KSEARCH_EXPORT_NVRTC="1"), capture_output=True, text=True)
child = [json.loads(l[6:]) for l in p.stdout.splitlines() if l.startswith("CHILD ")]
expect("KSEARCH_EXPORT_NVRTC=1: an NVRTC rebuild, announced on stderr, same output",
       p.returncode == 0 and "compiling the solution with NVRTC" in p.stderr and child and child[0]["max_diff"] == 0.0,
       (p.stderr[-600:] + str(child)))

# ---- KernelBench ModelNew
kb_spec = json.loads(subprocess.run([args.ksearch, "tasks", "--spec", "kernelbench/level1/19_ReLU"], check=True,
                                    capture_output=True, text=True).stdout)
relu_sol = os.path.join(work, "relu.json")
json.dump(kb_spec["starting_points"][0], open(relu_sol, "w"))
ctx = {}
exec(compile(open(export("kernelbench", "kernelbench/level1/19_ReLU", relu_sol, os.path.join(work, "relu.py"))).read(),
             "<string>", "exec"), ctx)
x = torch.rand(1024, 4097, device="cuda") - 0.5
y = ctx["ModelNew"]().cuda()(x)
torch.cuda.synchronize()
expect("KernelBench ReLU ModelNew = torch.relu", torch.equal(y, torch.relu(x)))
ln_spec = json.loads(subprocess.run([args.ksearch, "tasks", "--spec", "kernelbench/level1/40_LayerNorm"], check=True,
                                    capture_output=True, text=True).stdout)
ln_sol = os.path.join(work, "ln.json")
json.dump(ln_spec["starting_points"][0], open(ln_sol, "w"))
problem = os.path.join(src, "tests/export/fixtures/kb_layernorm_problem.py")
ctx = {}
exec(compile(open(problem).read(), "<string>", "exec"), ctx)
exec(compile(open(export("kernelbench", "kernelbench/level1/40_LayerNorm", ln_sol, os.path.join(work, "ln.py"),
                         "--problem-file", problem)).read(), "<string>", "exec"), ctx)
torch.manual_seed(42)
ref_model = ctx["Model"]((3, 5, 7)).cuda()
torch.manual_seed(42)
new_model = ctx["ModelNew"]((3, 5, 7)).cuda()
with torch.no_grad():
    expect("ModelNew builds the same parameters as the reference Model (set_seed before each)",
           all(torch.equal(a, b) for a, b in zip(ref_model.state_dict().values(),
                                                  new_model.problem.state_dict().values())))
    for a, b in zip(ref_model.parameters(), new_model.problem.parameters()):  # distinct weight and bias values
        r = torch.randn_like(a)
        a.copy_(r)
        b.copy_(r)
    x = torch.rand(2, 3, 5, 7, device="cuda")
    bad, diff = within(new_model(x), ref_model(x), 1e-4, 1e-4)
expect("KernelBench LayerNorm ModelNew (parameters from the problem's Model) = the Model", bad == 0,
       "max diff %.3g" % diff)

# ---- FlashInfer fixture: run() in destination-passing style
fi = os.path.join(src, "tests/export/fixtures/flashinfer_rmsnorm")
for sol_file in ("solution.json", "solution_clusters.json"):
    sol = json.load(open(export("flashinfer", fi, os.path.join(fi, sol_file), os.path.join(work, "fi_" + sol_file))))
    pkg = os.path.join(work, "fi_pkg_" + sol_file.split(".")[0], "fib_python_ks")
    for s in sol["sources"]:
        os.makedirs(os.path.dirname(os.path.join(pkg, s["path"])), exist_ok=True)
        open(os.path.join(pkg, s["path"]), "w").write(s["content"])
    open(os.path.join(pkg, "__init__.py"), "w").close()
    sys.path.insert(0, os.path.dirname(pkg))
    entry = importlib.import_module("fib_python_ks.main")
    sys.path.pop(0)
    del sys.modules["fib_python_ks.main"], sys.modules["fib_python_ks"]
    for batch in (1, 7, 64, 4096, 333):
        hs = torch.randn(batch, 128, device="cuda").to(torch.bfloat16)
        w = (1 + 0.1 * torch.randn(128, device="cuda")).to(torch.bfloat16)
        out = torch.empty(batch, 128, device="cuda", dtype=torch.bfloat16)
        entry.run(hs, w, out)
        torch.cuda.synchronize()
        f = hs.float()
        ref = (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)
        err = (out.float() - ref.float()).abs()
        bad = int(((err > 1e-2) & (err / (ref.float().abs() + 1e-8) > 1e-2)).sum().item())
        expect("FlashInfer fixture %s, batch %d, vs PyTorch" % (sol_file, batch), bad == 0,
               "max diff %.3g" % err.max().item())

# ---- The four FlashInfer-Bench tasks: each starting kernel's Solution, called as FlashInfer-Bench calls it
# (scalar inputs as Python numbers), against the PyTorch references of benchmarks/flashinfer/harness_fixture.py
# (written from the definitions), with two values of each scalar (a stale or misread scalar fails).
fixture_spec = importlib.util.spec_from_file_location("harness_fixture",
                                                      os.path.join(src, "benchmarks/flashinfer/harness_fixture.py"))
fixture = importlib.util.module_from_spec(fixture_spec)
fixture_spec.loader.exec_module(fixture)
gen = torch.Generator(device="cuda").manual_seed(11)


def pages_for(lengths, pool):
    indptr = torch.tensor([0] + lengths, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    indices = torch.randperm(pool, device="cuda", generator=gen)[:int(indptr[-1])].to(torch.int32)
    return indptr, indices


def bf16(*shape):
    return torch.randn(*shape, device="cuda", generator=gen).to(torch.bfloat16)


def fp8(*shape):
    return torch.randn(*shape, device="cuda", generator=gen).clamp_(-2, 2).to(torch.float8_e4m3fn)


def fi_inputs(key):
    if key == "gqa":
        indptr, indices = pages_for([1, 300, 77, 1024, 5], 4096)
        return [bf16(5, 32, 128), bf16(4096, 1, 4, 128), bf16(4096, 1, 4, 128), indptr, indices], \
            [("sm_scale", [0.08838834764831845, 0.3])]
    if key == "mla_decode":
        indptr, indices = pages_for([3, 513, 64], 2048)
        return [bf16(3, 16, 512), bf16(3, 16, 64), bf16(2048, 1, 512), bf16(2048, 1, 64), indptr, indices], \
            [("sm_scale", [0.07216878364870323, 0.2])]
    if key == "mla_prefill":
        requests = [(1, 0), (5, 7), (16, 30), (40, 0)]
        qo = torch.tensor([0] + [q for q, _ in requests], dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
        kv, indices = pages_for([q + p for q, p in requests], 2048)
        total_q = int(qo[-1])
        return [bf16(total_q, 16, 512), bf16(total_q, 16, 64), bf16(2048, 1, 512), bf16(2048, 1, 64), qo, kv,
                indices], [("sm_scale", [0.07216878364870323, 0.2])]
    t = 6
    return [torch.randn(t, 256, device="cuda", generator=gen), bf16(256), fp8(t, 7168),
            torch.rand(56, t, device="cuda", generator=gen) + 0.5, fp8(32, 4096, 7168),
            torch.rand(32, 32, 56, device="cuda", generator=gen) * 0.02 + 0.01, fp8(32, 7168, 2048),
            torch.rand(32, 56, 16, device="cuda", generator=gen) * 0.02 + 0.01], \
        [("local_expert_offset", [0, 64]), ("routed_scaling_factor", [2.5, 1.0])]


for key, d in fixture.DEFINITIONS.items():
    definition = d["name"]
    tspec = json.loads(subprocess.run([args.ksearch, "tasks", "--spec", "flashinfer/" + definition], check=True,
                                      capture_output=True, text=True).stdout)
    start = os.path.join(work, definition + "_start.json")
    json.dump(tspec["starting_points"][0], open(start, "w"))
    sol = json.load(open(export("flashinfer", "flashinfer/" + definition, start,
                                os.path.join(work, definition + ".json"))))
    pkg = os.path.join(work, "fi_pkg_" + key, "fib_python_ks_" + key)
    for s_ in sol["sources"]:
        os.makedirs(os.path.dirname(os.path.join(pkg, s_["path"])), exist_ok=True)
        open(os.path.join(pkg, s_["path"]), "w").write(s_["content"])
    open(os.path.join(pkg, "__init__.py"), "w").close()
    sys.path.insert(0, os.path.dirname(pkg))
    entry = importlib.import_module("fib_python_ks_%s.main" % key)
    sys.path.pop(0)
    ref_ns = {}
    exec(compile(d["reference"], "<%s reference>" % key, "exec"), ref_ns)
    tensors, scalars = fi_inputs(key)
    matched = 0.95 if key == "moe" else 1.0
    for n in range(2):
        values = [v[n] for _, v in scalars]
        args_ = tensors + values
        want = ref_ns["run"](*args_)
        want = list(want) if isinstance(want, tuple) else [want]
        outs = [torch.empty_like(w) for w in want]
        entry.run(*args_, *outs)
        torch.cuda.synchronize()
        for name, got, ref in zip([o for o in d["outputs"]], outs, want):
            err = (got.float() - ref.float()).abs()
            bad = (err > 1e-2) & (err / (ref.float().abs() + 1e-8) > 1e-2) | ~torch.isfinite(got.float())
            ratio = 1 - bad.sum().item() / max(bad.numel(), 1)
            expect("FlashInfer %s (%s), output %s vs PyTorch" % (
                key, ", ".join("%s=%s" % (k, v) for (k, _), v in zip(scalars, values)), name), ratio >= matched,
                "matched %.4f, max diff %.3g" % (ratio, err.nan_to_num(nan=1e30, posinf=1e30).max().item()))
    del tensors

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("export on the GPU: all checks passed")
