#!/usr/bin/env python3
"""Writes a small dataset in FlashInfer-Trace layout for checking libksearch's
exported Solutions with FlashInfer-Bench's own evaluator (harness_check.py).
Written for libksearch from the definitions' published facts
(benchmark-suites.md section 3); it holds no data of the real dataset.

  DIR/definitions/<op_type>/<name>.json     axes, inputs and outputs in order, a PyTorch `reference`
                                            written here (FlashInfer-Bench runs it for the expected outputs)
  DIR/workloads/<op_type>/<name>.jsonl      workloads: random tensors, page tables and offsets from
                                            .safetensors files, scalars as values
  DIR/blob/workloads/<op_type>/<name>/<name>_<uuid>.safetensors

The same folder is a libksearch task (`ksearch eval --task DIR/definitions/...`), so both harnesses
evaluate the same workloads: the same offsets, page tables and scalars (random tensors are drawn by each
harness's own generator).

    harness_fixture.py DIR [gqa] [mla_decode] [mla_prefill] [moe]
"""
import json
import random
import struct
import sys
from pathlib import Path

GQA = "gqa_paged_decode_h32_kv4_d128_ps1"
MLA_DECODE = "mla_paged_decode_h16_ckv512_kpe64_ps1"
MLA_PREFILL = "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1"
MOE = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"

# --- references: plain PyTorch from the definitions (fp32 math, base-2 lse, bf16 outputs) ---------------------

GQA_REFERENCE = '''import math

import torch


def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch, heads, dim = q.shape
    kv_heads = k_cache.shape[2]
    group = heads // kv_heads
    k = k_cache[:, 0].float()
    v = v_cache[:, 0].float()
    output = torch.zeros(batch, heads, dim, dtype=torch.float32, device=q.device)
    lse = torch.full((batch, heads), -math.inf, dtype=torch.float32, device=q.device)
    bounds = kv_indptr.tolist()
    for b in range(batch):
        rows = kv_indices[bounds[b]:bounds[b + 1]].long()
        if rows.numel() == 0:
            continue
        qb = q[b].float().view(kv_heads, group, dim)
        logits = torch.einsum("kgd,lkd->kgl", qb, k[rows]) * float(sm_scale)
        lse[b] = (torch.logsumexp(logits, dim=-1) / math.log(2.0)).reshape(heads)
        output[b] = torch.einsum("kgl,lkd->kgd", torch.softmax(logits, dim=-1), v[rows]).reshape(heads, dim)
    return output.to(torch.bfloat16), lse
'''

MLA_COMMON = '''import math

import torch


def attend(q_nope, q_pe, ckv, kpe, rows, sm_scale, causal):
    """q_nope [Q, H, 512], q_pe [Q, H, 64] of one request; rows: its KV rows in order."""
    logits = (torch.einsum("qhd,ld->qhl", q_nope.float(), ckv[rows]) +
              torch.einsum("qhd,ld->qhl", q_pe.float(), kpe[rows])) * float(sm_scale)
    if causal:  # query i of q_len sees positions j <= kv_len - q_len + i
        q_len, kv_len = q_nope.shape[0], rows.numel()
        i = torch.arange(q_len, device=logits.device)[:, None]
        j = torch.arange(kv_len, device=logits.device)[None, :]
        logits = logits.masked_fill((j > kv_len - q_len + i)[:, None, :], -math.inf)
    lse = torch.logsumexp(logits, dim=-1) / math.log(2.0)
    return torch.einsum("qhl,ld->qhd", torch.softmax(logits, dim=-1), ckv[rows]), lse
'''

MLA_DECODE_REFERENCE = MLA_COMMON + '''

def run(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, sm_scale):
    ckv, kpe = ckv_cache[:, 0].float(), kpe_cache[:, 0].float()
    output = torch.zeros(q_nope.shape, dtype=torch.float32, device=q_nope.device)
    lse = torch.full(q_nope.shape[:2], -math.inf, dtype=torch.float32, device=q_nope.device)
    bounds = kv_indptr.tolist()
    for b in range(q_nope.shape[0]):
        rows = kv_indices[bounds[b]:bounds[b + 1]].long()
        if rows.numel() == 0:
            continue
        o, l = attend(q_nope[b:b + 1], q_pe[b:b + 1], ckv, kpe, rows, sm_scale, False)
        output[b], lse[b] = o[0], l[0]
    return output.to(torch.bfloat16), lse
'''

MLA_PREFILL_REFERENCE = MLA_COMMON + '''

def run(q_nope, q_pe, ckv_cache, kpe_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    ckv, kpe = ckv_cache[:, 0].float(), kpe_cache[:, 0].float()
    output = torch.zeros(q_nope.shape, dtype=torch.float32, device=q_nope.device)
    lse = torch.full(q_nope.shape[:2], -math.inf, dtype=torch.float32, device=q_nope.device)
    qo, kv = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        rows = kv_indices[kv[b]:kv[b + 1]].long()
        if qo[b + 1] == qo[b] or rows.numel() == 0:
            continue
        o, l = attend(q_nope[qo[b]:qo[b + 1]], q_pe[qo[b]:qo[b + 1]], ckv, kpe, rows, sm_scale, True)
        output[qo[b]:qo[b + 1]], lse[qo[b]:qo[b + 1]] = o, l
    return output.to(torch.bfloat16), lse
'''

MOE_REFERENCE = '''import torch


def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights, gemm1_weights_scale,
        gemm2_weights, gemm2_weights_scale, local_expert_offset, routed_scaling_factor):
    tokens = routing_logits.shape[0]
    block = 128
    local = gemm1_weights.shape[0]
    inter = gemm2_weights.shape[2]
    # Block-scaled fp8 activations: scale [hidden / 128, tokens].
    a = hidden_states.float() * hidden_states_scale.float().t().repeat_interleave(block, dim=1)
    # DeepSeek-V3 no-aux routing: 8 groups of 32, the top 4 groups by the sum of their top 2, the top 8 experts.
    s = torch.sigmoid(routing_logits.float())
    biased = s + routing_bias.float()
    group_score = biased.view(tokens, 8, 32).topk(2, dim=-1).values.sum(dim=-1)
    keep = torch.zeros(tokens, 8, dtype=torch.bool, device=s.device)
    keep.scatter_(1, group_score.topk(4, dim=-1).indices, True)
    experts = biased.masked_fill(~keep.repeat_interleave(32, dim=1), float("-inf")).topk(8, dim=-1).indices
    weight = s.gather(1, experts)
    weight = weight / (weight.sum(dim=-1, keepdim=True) + 1e-20) * float(routed_scaling_factor)
    out = torch.zeros(tokens, gemm2_weights.shape[1], dtype=torch.float32, device=s.device)
    for le in range(local):
        tok, slot = (experts == int(local_expert_offset) + le).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        w13 = gemm1_weights[le].float() * gemm1_weights_scale[le].float().repeat_interleave(block, 0) \\
            .repeat_interleave(block, 1)
        w2 = gemm2_weights[le].float() * gemm2_weights_scale[le].float().repeat_interleave(block, 0) \\
            .repeat_interleave(block, 1)
        g1 = a[tok] @ w13.t()
        c = torch.nn.functional.silu(g1[:, inter:]) * g1[:, :inter]
        out.index_add_(0, tok, (c @ w2.t()) * weight[tok, slot][:, None])
    return out.to(torch.bfloat16)
'''


def const(v):
    return {"type": "const", "value": v}


VAR = {"type": "var"}

DEFINITIONS = {
    "gqa": {
        "name": GQA, "op_type": "gqa_paged",
        "description": "Batched GQA decode over a paged KV cache (page_size 1); a fixture written for libksearch.",
        "tags": ["stage:decode"],
        "axes": {"batch_size": VAR, "num_qo_heads": const(32), "num_kv_heads": const(4), "head_dim": const(128),
                 "num_pages": VAR, "page_size": const(1), "len_indptr": VAR, "num_kv_indices": VAR},
        "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
        "inputs": {"q": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
                   "k_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
                   "v_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
                   "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
                   "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
                   "sm_scale": {"shape": None, "dtype": "float32"}},
        "outputs": {"output": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
                    "lse": {"shape": ["batch_size", "num_qo_heads"], "dtype": "float32"}},
        "reference": GQA_REFERENCE,
    },
    "mla_decode": {
        "name": MLA_DECODE, "op_type": "mla_paged",
        "description": "DeepSeek MLA decode over a paged latent cache (page_size 1); a fixture written for libksearch.",
        "tags": ["stage:decode"],
        "axes": {"batch_size": VAR, "num_qo_heads": const(16), "head_dim_ckv": const(512), "head_dim_kpe": const(64),
                 "page_size": const(1), "num_pages": VAR, "len_indptr": VAR, "num_kv_indices": VAR},
        "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
        "inputs": {"q_nope": {"shape": ["batch_size", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"},
                   "q_pe": {"shape": ["batch_size", "num_qo_heads", "head_dim_kpe"], "dtype": "bfloat16"},
                   "ckv_cache": {"shape": ["num_pages", "page_size", "head_dim_ckv"], "dtype": "bfloat16"},
                   "kpe_cache": {"shape": ["num_pages", "page_size", "head_dim_kpe"], "dtype": "bfloat16"},
                   "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
                   "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
                   "sm_scale": {"shape": None, "dtype": "float32"}},
        "outputs": {"output": {"shape": ["batch_size", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"},
                    "lse": {"shape": ["batch_size", "num_qo_heads"], "dtype": "float32"}},
        "reference": MLA_DECODE_REFERENCE,
    },
    "mla_prefill": {
        "name": MLA_PREFILL, "op_type": "mla_paged",
        "description": "DeepSeek MLA causal prefill over a paged latent cache; a fixture written for libksearch.",
        "tags": ["stage:prefill"],
        "axes": {"num_qo_heads": const(16), "head_dim_ckv": const(512), "head_dim_kpe": const(64),
                 "page_size": const(1), "total_q": VAR, "num_pages": VAR, "len_indptr": VAR, "num_kv_indices": VAR},
        "constraints": ["total_q == qo_indptr[-1].item()", "num_kv_indices == kv_indptr[-1].item()"],
        "inputs": {"q_nope": {"shape": ["total_q", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"},
                   "q_pe": {"shape": ["total_q", "num_qo_heads", "head_dim_kpe"], "dtype": "bfloat16"},
                   "ckv_cache": {"shape": ["num_pages", "page_size", "head_dim_ckv"], "dtype": "bfloat16"},
                   "kpe_cache": {"shape": ["num_pages", "page_size", "head_dim_kpe"], "dtype": "bfloat16"},
                   "qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
                   "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
                   "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
                   "sm_scale": {"shape": None, "dtype": "float32"}},
        "outputs": {"output": {"shape": ["total_q", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"},
                    "lse": {"shape": ["total_q", "num_qo_heads"], "dtype": "float32"}},
        "reference": MLA_PREFILL_REFERENCE,
    },
    "moe": {
        "name": MOE, "op_type": "moe",
        "description": "DeepSeek-V3 MoE, fp8 block scale, 32 local experts of 256; a fixture written for libksearch.",
        "tags": ["quantization:float8_e4m3fn", "ep:8"],
        "axes": {"seq_len": VAR, "num_experts": const(256), "num_local_experts": const(32), "hidden_size": const(7168),
                 "intermediate_size": const(2048), "gemm1_out_size": const(4096), "num_hidden_blocks": const(56),
                 "num_intermediate_blocks": const(16), "num_gemm1_out_blocks": const(32)},
        "inputs": {"routing_logits": {"shape": ["seq_len", "num_experts"], "dtype": "float32"},
                   "routing_bias": {"shape": ["num_experts"], "dtype": "bfloat16"},
                   "hidden_states": {"shape": ["seq_len", "hidden_size"], "dtype": "float8_e4m3fn"},
                   "hidden_states_scale": {"shape": ["num_hidden_blocks", "seq_len"], "dtype": "float32"},
                   "gemm1_weights": {"shape": ["num_local_experts", "gemm1_out_size", "hidden_size"],
                                     "dtype": "float8_e4m3fn"},
                   "gemm1_weights_scale": {"shape": ["num_local_experts", "num_gemm1_out_blocks", "num_hidden_blocks"],
                                           "dtype": "float32"},
                   "gemm2_weights": {"shape": ["num_local_experts", "hidden_size", "intermediate_size"],
                                     "dtype": "float8_e4m3fn"},
                   "gemm2_weights_scale": {"shape": ["num_local_experts", "num_hidden_blocks",
                                                     "num_intermediate_blocks"], "dtype": "float32"},
                   "local_expert_offset": {"shape": None, "dtype": "int32"},
                   "routed_scaling_factor": {"shape": None, "dtype": "float32"}},
        "outputs": {"output": {"shape": ["seq_len", "hidden_size"], "dtype": "bfloat16"}},
        "reference": MOE_REFERENCE,
    },
}


def write_json(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")


def write_safetensors(path, tensors):
    """tensors: {name: list of int32 values} (1-D): the 8-byte header length, the JSON header, the data."""
    header, blobs, offset = {}, [], 0
    for name, values in tensors.items():
        data = struct.pack("<%di" % len(values), *values)
        header[name] = {"dtype": "I32", "shape": [len(values)], "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def trace_line(definition, uuid, axes, inputs):
    return json.dumps({"definition": definition, "solution": None, "evaluation": None,
                       "workload": {"uuid": uuid, "axes": axes, "inputs": inputs}})


def offsets(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def blob(root, op_type, name, uuid, tensors):
    rel = "blob/workloads/%s/%s/%s_%s.safetensors" % (op_type, name, name, uuid)
    write_safetensors(root / rel, tensors)
    return {k: {"type": "safetensors", "path": rel, "tensor_key": k} for k in tensors}


def paged_workloads(root, d, cases, rng):
    """Decode workloads: (uuid, per-request lengths, sm_scale); a page pool twice the entries used (at least
    16384 pages), the page table a random sample of it."""
    lines = []
    for uuid, lengths, sm_scale in cases:
        indptr = offsets(lengths)
        pages = max(2 * indptr[-1], 16384)
        indices = rng.sample(range(pages), indptr[-1])
        inputs = blob(root, d["op_type"], d["name"], uuid, {"kv_indptr": indptr, "kv_indices": indices})
        inputs["sm_scale"] = {"type": "scalar", "value": sm_scale}
        lines.append(trace_line(d["name"], uuid, {"batch_size": len(lengths), "num_pages": pages,
                                                  "len_indptr": len(lengths) + 1, "num_kv_indices": indptr[-1]},
                                inputs))
    return lines


def ragged(rng, batch, mean):
    return [max(1, int(rng.uniform(0.5, 1.5) * mean)) for _ in range(batch)]


def workloads(key, root, rng):
    d = DEFINITIONS[key]
    if key == "gqa":
        return paged_workloads(root, d, [
            ("gqa-edge-bs3", [2, 1, 3], 0.08838834764831845),
            ("gqa-bs1-kv4096", [4096], 0.08838834764831845),
            ("gqa-bs8-kv2048", ragged(rng, 8, 2048), 0.08838834764831845),
            ("gqa-bs32-kv1024", ragged(rng, 32, 1024), 0.1),
            ("gqa-bs64-kv512", ragged(rng, 64, 512), 0.08838834764831845),
        ], rng)
    if key == "mla_decode":
        return paged_workloads(root, d, [
            ("mla-decode-edge-bs3", [1, 4, 2], 0.07216878364870323),
            ("mla-decode-bs1-kv2048", [2048], 0.07216878364870323),
            ("mla-decode-bs16-kv1024", ragged(rng, 16, 1024), 0.1),
        ], rng)
    if key == "mla_prefill":
        lines = []
        for uuid, requests, sm_scale in [("mla-prefill-edge", [(1, 0), (3, 4), (5, 0)], 0.07216878364870323),
                                         ("mla-prefill-bs1-q256", [(256, 0)], 0.07216878364870323),
                                         ("mla-prefill-bs2-prefix", [(64, 512), (32, 1000)], 0.1)]:
            qo = offsets([q for q, _ in requests])
            kv = offsets([q + p for q, p in requests])
            pages = max(2 * kv[-1], 16384)
            inputs = blob(root, d["op_type"], d["name"], uuid, {"qo_indptr": qo, "kv_indptr": kv,
                                                                "kv_indices": rng.sample(range(pages), kv[-1])})
            inputs["sm_scale"] = {"type": "scalar", "value": sm_scale}
            lines.append(trace_line(d["name"], uuid, {"total_q": qo[-1], "num_pages": pages,
                                                      "len_indptr": len(requests) + 1, "num_kv_indices": kv[-1]},
                                    inputs))
        return lines
    assert key == "moe"
    return [trace_line(d["name"], uuid, {"seq_len": seq_len},
                       {"local_expert_offset": {"type": "scalar", "value": offset},
                        "routed_scaling_factor": {"type": "scalar", "value": scale}})
            for uuid, seq_len, offset, scale in [("moe-seq1-e0", 1, 0, 2.5), ("moe-seq7-e96", 7, 96, 2.5),
                                                 ("moe-seq32-e224", 32, 224, 1.0)]]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = Path(sys.argv[1])
    keys = sys.argv[2:] or list(DEFINITIONS)
    for key in keys:
        if key not in DEFINITIONS:
            sys.exit("harness_fixture: unknown definition %r (one of %s)" % (key, ", ".join(DEFINITIONS)))
        d = DEFINITIONS[key]
        rng = random.Random(20261126)
        write_json(root / "definitions" / d["op_type"] / (d["name"] + ".json"), d)
        lines = workloads(key, root, rng)
        path = root / "workloads" / d["op_type"] / (d["name"] + ".jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        print("%s: %d workloads in %s" % (d["name"], len(lines), path))


if __name__ == "__main__":
    main()
