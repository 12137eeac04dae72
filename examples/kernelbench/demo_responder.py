#!/usr/bin/env python3
"""A scripted stand-in for a model on kernelbench/level1/19_ReLU: every answer
below was written by hand by a libksearch developer; it hands them out in
order, one per prompt. Run once on a GPU through `ksearch run --strategy greedy
--llm command:...` (benchmarks/kernelbench/gpu_check.sh demo); that run's
transcript.jsonl is the demonstration transcript, which `--llm replay:...`
replays with no model at all.

Usage: demo_responder.py STATE_FILE   (prompt on stdin, kind in $KSEARCH_PROMPT_KIND)
"""
import json
import sys
from pathlib import Path

STATE = Path(sys.argv[1])
sys.stdin.read()
state = json.loads(STATE.read_text()) if STATE.exists() else {"n": 0}

PLAN = '{"kernels": [{"name": "relu4", "grid": ["min(cdiv(batch_size*dim, 1024), 262144)"], "block": [256], ' \
       '"args": ["x", "output", "batch_size*dim"]}]}'

VEC = r'''
// Four elements per thread per step with 16-byte loads and stores, a grid-stride
// loop over the float4 body, and a scalar tail.
extern "C" __global__ void relu4(const float* __restrict__ x, float* __restrict__ out, long long n) {
  const long long n4 = n / 4, stride = (long long)gridDim.x * blockDim.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* o4 = reinterpret_cast<float4*>(out);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = x4[i];
    v.x = fmaxf(v.x, 0.0f); v.y = fmaxf(v.y, 0.0f); v.z = fmaxf(v.z, 0.0f); v.w = fmaxf(v.w, 0.0f);
    o4[i] = v;
  }
  for (long long i = 4 * n4 + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = fmaxf(x[i], 0.0f);
}
'''

ANSWERS = [
    ("Vectorised: float4 loads and stores in a grid-stride loop, so each thread moves 16 bytes per access.", VEC),
    ("The same with the tail loop folded in.", VEC.replace("out[i] = fmaxf(x[i], 0.0f);", "out[i] = fmaxf(x[i], 0.0f)")),
    ("Streaming stores: the output is never read again, so bypass L1 with __stcs.",
     VEC.replace("    o4[i] = v;", "    __stcs(&o4[i], v);")),
    ("Skip the tail: n is a multiple of four in the benchmark (a mistake: the small workloads are not).",
     VEC.split("  for (long long i = 4 * n4")[0] + "}\n"),
]

text, code = ANSWERS[min(state["n"], len(ANSWERS) - 1)]
state["n"] += 1
STATE.write_text(json.dumps(state))
print(f"{text}\n\n```cuda kernel.cu\n{code.strip()}\n```\n\n```json launch_plan\n{PLAN}\n```")
