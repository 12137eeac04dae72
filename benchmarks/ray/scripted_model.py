"""A scripted model: a `--llm command:` program that answers every code
prompt with a correct kernel, different each time (so every round is
evaluated), after an optional delay that stands for an LLM's latency.

    --llm "command:python3 benchmarks/ray/scripted_model.py STATE [DELAY_S] [KERNEL PLAN]"

STATE is a file that counts the answers given (locked: several may run at
once). Without KERNEL, the answer is a kernel for tests/fixtures/tasks/scale3
(host C++) whose n-th version repeats its loop 1 + n % 4 times, so the search
sees different latencies. With KERNEL (a .cu file) and PLAN (its launch plan,
JSON), the answer is that CUDA kernel with a line naming the answer's number
added: a new source each time, so each is compiled and measured anew, as an
LLM's candidates are (e.g. gpumode/trimul's starting kernel,
lib/tasks/gpumode/kernels/trimul_reference.cu with trimul_reference_plan.json).
"""
import fcntl
import os
import sys
import time


def kernel(n: int) -> str:
    reps = 1 + n % 4
    return (f"Variant {n}.\n\n```cpp kernel.cpp\n#include <cstdint>\n// variant {n}\n"
            f"void scale3(const float* x, float* y, std::int64_t n) {{\n"
            f"  for (int r = 0; r < {reps}; ++r) {{\n"
            f"    for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];\n"
            f"    asm volatile(\"\" ::: \"memory\");\n  }}\n}}\n```\n"
            '```json launch_plan\n{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n')


def cuda_kernel(n: int, kernel_file: str, plan_file: str) -> str:
    with open(kernel_file, encoding="utf-8") as f:
        source = f.read()
    with open(plan_file, encoding="utf-8") as f:
        plan = f.read()
    return f"Variant {n}.\n\n```cuda kernel.cu\n// variant {n}\n{source}\n```\n```json launch_plan\n{plan}\n```\n"


def main() -> int:
    state = sys.argv[1]
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    given = sys.argv[3:5] if len(sys.argv) > 4 else None
    sys.stdin.read()
    with open(state, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = len(f.read().split())
        f.write(f"{os.environ.get('KSEARCH_PROMPT_KIND', '?')}\n")
    if delay > 0:
        time.sleep(delay)
    sys.stdout.write(cuda_kernel(n, *given) if given else kernel(n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
