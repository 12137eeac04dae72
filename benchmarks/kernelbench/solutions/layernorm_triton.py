# KernelBench level 1 problem 40 (LayerNorm over (features, dim1, dim2)) as a Triton ModelNew, written for
# libksearch's check of Triton KernelBench candidates with parameters: it keeps nn.LayerNorm's weight and
# bias (so KernelBench's seeded construction, or a native task's copy, gives them their values) and
# normalises each row in two Triton passes (statistics per chunk, then the affine map).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _partial_sums(x, sums, row_len, CHUNKS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    per = tl.cdiv(row_len, CHUNKS)
    lo = chunk * per
    hi = tl.minimum(lo + per, row_len)
    s = tl.zeros([BLOCK], tl.float32)
    q = tl.zeros([BLOCK], tl.float32)
    base = x + row.to(tl.int64) * row_len
    for i in range(lo, hi, BLOCK):
        at = i + tl.arange(0, BLOCK)
        v = tl.load(base + at, mask=at < hi, other=0.0)
        s += v
        q += v * v
    tl.store(sums + (row * CHUNKS + chunk) * 2, tl.sum(s, 0))
    tl.store(sums + (row * CHUNKS + chunk) * 2 + 1, tl.sum(q, 0))


@triton.jit
def _apply(x, w, b, y, sums, row_len, eps, CHUNKS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    part = tl.program_id(1)
    c = tl.arange(0, CHUNKS)
    total = tl.sum(tl.load(sums + (row * CHUNKS + c) * 2), 0)
    total_sq = tl.sum(tl.load(sums + (row * CHUNKS + c) * 2 + 1), 0)
    mean = total / row_len
    rstd = 1.0 / tl.sqrt(tl.maximum(total_sq / row_len - mean * mean, 0.0) + eps)
    at = part.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = at < row_len
    base = row.to(tl.int64) * row_len
    v = tl.load(x + base + at, mask=inside)
    out = (v - mean) * rstd * tl.load(w + at, mask=inside) + tl.load(b + at, mask=inside)
    tl.store(y + base + at, out, mask=inside)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        x = x.contiguous()
        row_len = self.ln.weight.numel()
        rows = x.numel() // row_len
        chunks = 64
        sums = torch.empty(rows * chunks * 2, device=x.device, dtype=torch.float32)
        y = torch.empty_like(x)
        _partial_sums[(rows, chunks)](x, sums, row_len, CHUNKS=chunks, BLOCK=1024, num_warps=4)
        _apply[(rows, triton.cdiv(row_len, 4096))](x, self.ln.weight, self.ln.bias, y, sums, row_len, self.ln.eps,
                                                   CHUNKS=chunks, BLOCK=4096, num_warps=8)
        return y
