# KernelBench level 1 problem 19 (ReLU) as a Triton ModelNew, written for libksearch's check of Triton
# KernelBench candidates: one program per block of elements.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x, y, n, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    v = tl.load(x + at, mask=inside)
    tl.store(y + at, tl.maximum(v, 0.0), mask=inside)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096, num_warps=8)
        return y
