#!/usr/bin/env python3
"""Writes the demonstration transcript for flashinfer/gqa_paged_decode_h32_kv4_d128_ps1
(examples/flashinfer/demo-transcript.jsonl).

This is a scripted stand-in for a model, not a model: every answer it gives
was written by hand by a libksearch developer. The world-model answers below
and the kernels in candidates/ are its whole repertoire; it picks the answer
for each prompt by the prompt's kind and a counter. Run once on a GPU through
`ksearch run --llm command:...` (benchmarks/flashinfer/run_gpu.sh demo), the
run's transcript.jsonl becomes the demonstration transcript, which
`ksearch run --llm replay:...` replays.

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
    return ("Same kernel, with the loads of the next entry issued earlier.\n\n" +
            text.replace("m[g] = m_new;", "m[g] = m_new", 1).replace("m = m_new;", "m = m_new", 1))


CODE = [
    lambda: candidate("v1_warp_per_head.md"),
    lambda: with_typo(candidate("v1_warp_per_head.md")),
    lambda: candidate("v2_group_shared.md"),
    lambda: candidate("v3_split_kv_wide.md"),
    lambda: with_typo(candidate("v3_split_kv_wide.md")),
]


def impacts(mem, reg, comp, notes):
    return impacts_with(mem, reg, comp, notes, "H100: 3.35 TB/s HBM3; decode is bandwidth-bound")


def init_tree():
    root_notes = (
        "1. Problem class: batched GQA decode over a paged KV cache; per request, 32 q heads attend the request's "
        "entries through a page table; 8 q heads share each KV head. "
        "2. Math: logits = q . k * sm_scale (fp32), softmax, output = p @ v (bf16), lse in base 2. "
        "3. Layout: K/V rows are 256 bytes per KV head, pages in random order. "
        "4. Regimes: batch 1 with 16k entries (one request: parallelism must come from splitting it), batch 256 "
        "with 128 entries (many short requests), and everything between. "
        "5. Knobs: K/V sharing across the group, split-KV, load width, shuffle count. "
        "6. Skeleton: per (request, KV head) online softmax for 8 heads, optional split + combine. "
        "7. Families: warp per q head; block per (request, KV head); split-KV flash decoding.")
    tree = {
        "kernel_summary": ("GQA decode is memory-bound: every entry's K and V rows (2 x 4 x 128 x 2 bytes) are "
                           "read once at best; the work is 4 x 32 x 128 FLOPs per entry."),
        "open_questions": ["How much do the 8x redundant K/V reads of a per-head kernel cost with L2 in between?",
                           "Is batch 1 with 16k entries limited by parallelism rather than bandwidth?",
                           "Do the warp shuffles of the dot products dominate once traffic is right?"],
        "decision_tree": {"root_id": "root", "active_leaf_id": "root", "nodes": [
            {"node_id": "root", "parent_id": None, "node_type": "root", "decision": None, "choice": None,
             "notes": root_notes},
            action_node("warp", "root", "work unit", "warp per (request, q head)",
                        "One warp per (request, q head), correctness first",
                        "Online softmax over the request's entries, fp32, K/V read per q head.", 2, 0.8, 0.3,
                        "A correct kernel on every workload before any sharing or splitting.",
                        "SELF_CHECK: the simplest mapping; excludes sharing across the group.",
                        impacts(4, 8, 3, ["8x redundant K/V reads", "low", "latency-bound loops"])),
            action_node("group", "root", "work unit", "block per (request, KV head)",
                        "Share K/V rows across the 8 q heads of a group",
                        "One block per (request, KV head), warps interleave entries, 8 heads per warp.", 3, 0.6, 1.0,
                        "Cuts K/V traffic 8x.",
                        "SELF_CHECK: changes the work unit; excludes per-head warps.",
                        impacts(7, 6, 5, ["one read per row", "8 heads of state", "shuffle-heavy"])),
            action_node("split", "root", "work unit", "split-KV flash decoding",
                        "Split long requests across blocks with a combine kernel",
                        "Partial softmax per split, then merge.", 4, 0.5, 1.2,
                        "Fills the GPU at small batch sizes.",
                        "SELF_CHECK: adds a second kernel; composes with sharing.",
                        impacts(8, 6, 6, ["partials round-trip", "moderate", "more blocks"])),
        ]},
    }
    return tree


def refine(nid):
    if nid == "warp":
        notes = ("CURRENT: one warp per q head; every K/V row is read by 8 warps.\n"
                 "FOLLOW_THROUGH: aligned_with_intent=yes\n"
                 "UPDATE_BELIEF: correctness is settled; the redundant K/V traffic is the ceiling.\n"
                 "PERF_GAP: as expected for a per-head kernel.")
        child = action_node("warp_group", "warp", "sharing", "block per (request, KV head)",
                            "Share each K/V row across the 8 q heads of its group",
                            "One block of 4 warps per (request, KV head); each warp updates 8 heads per entry.", 3,
                            0.9, 1.0, "Removes the 8x redundant reads.",
                            "SELF_CHECK: refines the per-head kernel.",
                            impacts(7, 6, 5, ["one read per row", "8 heads of state", "shuffles"]))
    else:
        notes = ("CURRENT: split-KV with 16-byte loads and reduce-scatter shuffles.\n"
                 "FOLLOW_THROUGH: aligned_with_intent=yes\n"
                 "UPDATE_BELIEF: small batches are now parallel; the combine kernel is the next cost.\n"
                 "PERF_GAP: close to the prediction.")
        child = action_node(f"{nid}_fuse", nid, "fusion", "fuse the combine",
                            "Fuse the combine into the last block of each request",
                            "The last split to finish merges the partials (a counter per request).", 3, 0.6, 1.1,
                            "Saves a launch and a pass over the partials.",
                            "SELF_CHECK: refines the split-KV kernel.",
                            impacts(8, 6, 6, ["one pass fewer", "same", "one launch"]))
    return notes, child


def propose(nid, parent):
    return action_node(nid, parent, "next step", "wider tiles",
                       "Process two entries per half-warp per iteration", "More loads in flight per lane.",
                       2, 0.6, 1.1, "Latency hiding.", "SELF_CHECK: a refinement.",
                       impacts(7, 5, 6, ["-", "-", "-"]))


serve(init_tree, refine, propose, CODE)
