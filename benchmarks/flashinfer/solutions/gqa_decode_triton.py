# GQA paged decode (gqa_paged_decode_h32_kv4_d128_ps1) in Triton, written for libksearch's
# harness check of Triton FlashInfer-Bench solutions: one program per (request, KV head), the 8 q heads
# of the group padded to 16 rows for tl.dot, an online base-2 softmax over the request's pages in blocks.
# No split of long requests: a correct, plain kernel, not a fast one.
import torch
import triton
import triton.language as tl


@triton.jit
def _gqa_decode(q, k_cache, v_cache, kv_indptr, kv_indices, output, lse, scale_log2,
                H: tl.constexpr, KVH: tl.constexpr, D: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr,
                BLOCK: tl.constexpr):
    b = tl.program_id(0)
    g = tl.program_id(1)
    begin = tl.load(kv_indptr + b)
    end = tl.load(kv_indptr + b + 1)
    rows = tl.arange(0, ROWS)
    dims = tl.arange(0, D)
    head = g * GROUP + rows
    live = rows < GROUP
    qv = tl.load(q + (b * H + head)[:, None] * D + dims[None, :], mask=live[:, None], other=0.0)
    m = tl.full([ROWS], float("-inf"), tl.float32)
    l = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, D], tl.float32)
    for start in range(begin, end, BLOCK):
        n = start + tl.arange(0, BLOCK)
        inside = n < end
        page = tl.load(kv_indices + n, mask=inside, other=0)
        at = (page.to(tl.int64) * KVH + g)[:, None] * D + dims[None, :]
        kb = tl.load(k_cache + at, mask=inside[:, None], other=0.0)
        vb = tl.load(v_cache + at, mask=inside[:, None], other=0.0)
        s = tl.dot(qv, tl.trans(kb)) * scale_log2  # bf16 products are exact in fp32
        s = tl.where(inside[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, vb.to(tl.float32), input_precision="ieee")
        m = m_new
    out = acc / l[:, None]
    tl.store(output + (b * H + head)[:, None] * D + dims[None, :], out.to(output.dtype.element_ty), mask=live[:, None])
    tl.store(lse + b * H + head, m + tl.log2(l), mask=live)


def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale, output, lse):
    batch, heads, dim = q.shape
    kv_heads = k_cache.shape[2]
    _gqa_decode[(batch, kv_heads)](q, k_cache, v_cache, kv_indptr, kv_indices, output, lse,
                                    float(sm_scale) * 1.4426950408889634, H=heads, KVH=kv_heads, D=dim,
                                    GROUP=heads // kv_heads, ROWS=16, BLOCK=32, num_warps=4)
