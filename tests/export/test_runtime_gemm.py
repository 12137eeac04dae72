#!/usr/bin/env python3
"""The exported runtime's GEMM steps (run_gemm of lib/export/runtime/ksearch_runtime.py) on CPU tensors,
against a straightforward reference: every element of D computed in float64 by a loop over the flat
buffers with the step's leading dimensions and batch strides (no as_strided, no matmul), then alpha,
beta * C, bias and the activation (GELU as its tanh formula). Each step is resolved from plan JSON by
the runtime's own resolver, so the defaults (dense leading dimensions and strides) are the ones the
runtime computes. Checked: f32, f16 and bf16 operands, f32 and half outputs, transposes, padded rows,
batch strides with gaps and a shared (stride 0) operand, a separate C and D itself as C, a C full of
NaN that beta 0 must not read, relu and gelu with and without bias, alpha, compute "tf32" (and that
PyTorch's matmul flags come back as they were), and that no element of D's buffer outside the step's
view is written.

  test_runtime_gemm.py --python PY --source-dir SRC
"""
import argparse
import importlib.util
import math
import os
import random
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--python", required=True)
ap.add_argument("--source-dir", required=True)
ap.add_argument("--inner", action="store_true")
args = ap.parse_args()

if not args.inner:
    if args.python == "NONE":
        print("skipped: no Python with PyTorch (Debian: apt-get install python3-torch)")
        sys.exit(77)
    sys.exit(subprocess.call([args.python] + sys.argv + ["--inner"]))

import torch  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "ksearch_runtime", os.path.join(args.source_dir, "lib/export/runtime/ksearch_runtime.py"))
rt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rt)

failures = []


def expect(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL:", what, detail)
    else:
        print("ok:", what)


TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
SENTINEL = -7.5  # exact in every dtype here


def resolve(gemm, dtypes, dims):
    """The one GEMM step of a plan, as the runtime resolves it."""
    plan = rt.LaunchPlan({"kernels": [{"gemm": gemm}]})
    r = rt.resolve_plan(plan, dims, list(dtypes), lambda name: None, [], rt.DeviceLimits(), {}, dtypes)
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
    size = lambda nbytes, name: nbytes // rt._DTYPES[dtypes[name]][0] + 5  # a little past what the step reaches
    a = buffer(size(g.bytes_a(), g.a), dtypes[g.a])
    b = a if g.b == g.a else buffer(size(g.bytes_b(), g.b), dtypes[g.b])
    d = buffer(size(g.bytes_d(), g.d), dtypes[g.d], SENTINEL if g.c != g.d else None)
    c = d if g.c == g.d else buffer(size(g.bytes_c(), g.c), dtypes[g.c], c_fill)
    bias = buffer(g.n + 3, dtypes[g.bias]) if g.bias else None
    vals = lambda t: None if t is None else t.double().tolist()
    want, written = reference(g, vals(a), vals(b), vals(c), vals(d), vals(bias))
    inputs = [t.clone() for t in (a, b) + ((c,) if c is not d else ())]
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)
    rt.run_gemm(g, a, b, c, d, bias)
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
rt.run_gemm(g, x, w, out, out)
expect("f16 operands accumulate in f32 (300 * 300 * 2 = 180000, past f16's range)", out.item() == 180000.0,
       str(out.item()))

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("runtime GEMM steps: all checks passed")
