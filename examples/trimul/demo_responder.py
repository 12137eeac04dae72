#!/usr/bin/env python3
"""Writes the demonstration transcript for gpumode/trimul (examples/trimul/demo-transcript.jsonl).

This is a scripted stand-in for a model, not a model: every answer it gives
was written by hand by a libksearch developer. The world-model answers below
and the kernels in candidates/ are its whole repertoire; it picks the answer
for each prompt by the prompt's kind and a counter. It was run once on a GPU
through `ksearch run --llm command:...`, and the run's transcript.jsonl became
the demonstration transcript, which `ksearch run --llm replay:...` replays.

Usage: demo_responder.py STATE_FILE   (prompt on stdin, kind in $KSEARCH_PROMPT_KIND)
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from scripted_model import action_node, impacts as impacts_with, serve  # noqa: E402


def candidate(name):
    return (HERE / "candidates" / name).read_text()


def with_typo(text):
    # A slip a model makes: a statement without its semicolon.
    return ("Same kernel, with the loads of the next tile issued earlier.\n\n" +
            text.replace("__syncthreads();", "__syncthreads()", 1))


# v1 (the naive FP32 version) is left out: at about a second per call on the
# largest cases it would make the demonstration slow without showing more.
CODE = [
    lambda: candidate("v2_tiled_fp32.md"),
    lambda: with_typo(candidate("v2_tiled_fp32.md")),
    lambda: candidate("v3_tensor_cores_fp16.md"),
    lambda: candidate("v4_pipelined_fp16.md"),
    lambda: with_typo(candidate("v4_pipelined_fp16.md")),
]


def impacts(mem, reg, comp, notes):
    return impacts_with(mem, reg, comp, notes, "H100: 989 TFLOP/s dense fp16 tensor cores vs 67 TFLOP/s fp32 FMA")


def init_tree():
    root_notes = (
        "1. Problem class: five projection GEMMs over C, a batched N x N x N GEMM per (b, h), one output GEMM, "
        "with LayerNorms and sigmoid gates around them. "
        "2. Math: xn = LN_C(x); left/right = (xn W^T) * mask * sigmoid(xn Wg^T); tri[b,i,j,h] = sum_k left[b,i,k,h] "
        "right[b,j,k,h]; out = (LN_H(tri) * sigmoid(xn Wog^T)) Wout^T. "
        "3. Layout: x is [B,N,N,C] with C fastest; the triangle GEMM wants left/right as [B,H,N,N]. "
        "4. Regimes: N=256 is dominated by the projections; N=768-1024 by the N^3 triangle product; C=384 makes "
        "the projections and output GEMM heavier. "
        "5. Knobs: tile sizes, fp16 operands with fp32 accumulation, fusion of LN into GEMM loads, pipelining. "
        "6. Skeleton: LN stats pass, fused 5-way projection GEMM, triangle GEMM, LN_H + gate, output GEMM. "
        "7. Families: FP32 pipeline; tensor-core pipeline; one persistent fused kernel.")
    tree = {
        "kernel_summary": ("TriMul is GEMM-bound: 10BN^2CH + 2BN^3H + 2BN^2HC FLOPs, about 0.9 TFLOP at the largest "
                           "shape; tensor cores decide the outcome once the pipeline is correct."),
        "open_questions": ["Does fp16 with fp32 accumulation stay within 2e-2 on Cauchy inputs?",
                           "How much does fusing LayerNorm into the projection loads save?",
                           "Is the triangle GEMM or the projections the bottleneck at N=1024, C=384?"],
        "decision_tree": {"root_id": "root", "active_leaf_id": "root", "nodes": [
            {"node_id": "root", "parent_id": None, "node_type": "root", "decision": None, "choice": None,
             "notes": root_notes},
            action_node("fp32", "root", "kernel family", "FP32 GEMM pipeline",
                        "FP32 pipeline, correctness first",
                        "Three or four kernels in FP32 following the math; then tile the GEMMs.", 2, 0.8, 1.0,
                        "A correct baseline on all 25 cases before any precision trade-off.",
                        "SELF_CHECK: FP32 arithmetic only, excludes the tensor-core family.",
                        impacts(5, 6, 3, ["intermediates round-trip through HBM", "moderate", "no tensor cores"])),
            action_node("tc", "root", "kernel family", "tensor-core GEMM pipeline",
                        "Tensor-core pipeline (fp16 operands, fp32 accumulation)",
                        "The same stages with mma.sync m16n8k16 GEMMs.", 4, 0.7, 4.0,
                        "Tensor cores give an order of magnitude more throughput.",
                        "SELF_CHECK: changes the arithmetic unit, excludes the FP32 family.",
                        impacts(6, 5, 9, ["fp16 halves intermediate traffic", "fragments", "tensor cores"])),
            action_node("fused", "root", "kernel family", "one persistent fused kernel",
                        "Single persistent fused kernel",
                        "Everything in one persistent kernel with on-chip intermediates.", 5, 0.4, 6.0,
                        "Removes all intermediate traffic, but the triangle product needs all of left and right.",
                        "SELF_CHECK: a different decomposition, excludes the staged families.",
                        impacts(9, 3, 8, ["no intermediates", "very high", "tensor cores"])),
        ]},
    }
    return tree


def refine(nid):
    if nid == "fp32":
        notes = ("CURRENT: tiled FP32 SGEMMs; the triangle GEMM and the projections are FMA-bound.\n"
                 "FOLLOW_THROUGH: aligned_with_intent=yes\n"
                 "UPDATE_BELIEF: correctness is settled; FP32 FMA throughput is now the ceiling.\n"
                 "PERF_GAP: as expected for FP32.")
        child = action_node("fp32_tc", "fp32", "arithmetic", "mma.sync fp16",
                            "Move the GEMMs to mma.sync tensor cores (fp16, fp32 accumulate)",
                            "Keep the tiled structure; replace the FMA inner loops with m16n8k16 mma.sync.", 3,
                            0.9, 4.0, "The kernel is FMA-bound; tensor cores lift that ceiling.",
                            "SELF_CHECK: refines the tiled FP32 kernel.",
                            impacts(6, 5, 9, ["fp16 intermediates", "fragments", "tensor cores"]))
    else:
        notes = ("CURRENT: tensor-core GEMMs; the projections and memory traffic now dominate at small N.\n"
                 "FOLLOW_THROUGH: aligned_with_intent=yes\n"
                 "UPDATE_BELIEF: pipelining pays; fusion is the next bet.\n"
                 "PERF_GAP: close to the prediction.")
        child = action_node(f"{nid}_fuse", nid, "fusion", "fuse LN_H and the gate into the output GEMM",
                            "Fuse LayerNorm over H and the out gate into the output GEMM's loads",
                            "Normalise tri rows while loading them for the output GEMM.", 3, 0.75, 1.2,
                            "Saves one full pass over the [B,N,N,H] intermediate.",
                            "SELF_CHECK: refines the current kernel.",
                            impacts(7, 5, 8, ["one pass fewer", "higher", "tensor cores"]))
    return notes, child


def propose(nid, parent):
    return action_node(nid, parent, "next step", "retile",
                       "Retile the largest GEMM for the N=1024 cases", "Larger tiles for the triangle GEMM.",
                       2, 0.6, 1.2, "The N^3 term dominates at N=1024.", "SELF_CHECK: a refinement.",
                       impacts(6, 5, 8, ["-", "-", "-"]))


serve(init_tree, refine, propose, CODE)
