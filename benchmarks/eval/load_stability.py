#!/usr/bin/env python3
"""How far the machine's load moves a kernel's reported latency and speedup.

Runs `ksearch eval --json` of one examples/matmul kernel N times on a quiet
machine and N times while busy loops (one per core by default) compete for
the CPUs, then prints, per condition, the spread (max / min) of

  latency   the evaluation's latency_ms: the geometric mean of each
            workload's latency statistic (the 10th percentile on the host)
  mean      the geometric mean of the workloads' *means* (the fitness signal
            before issue 43), from the same evaluations
  speedup   latency_ms's speedup, a ratio to the reference timed beside the
            candidate in the same evaluation
  stale     the speedup as it was computed before: the reference's mean
            latency from another moment (the first quiet evaluation) over the
            candidate's mean under this load

Both old and new figures come from the same evaluations, side by side. The
issue's targets: latency max/min <= 1.15 under load, speedup within 10 %.

  python3 benchmarks/eval/load_stability.py --ksearch build/examples/cli/ksearch [--runs 5] [--busy 2]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

# An i-k-j loop over row-major f32 matrices: a plain, honest kernel a few
# times faster than the reference's double-accumulating loop.
KERNEL = """```cpp kernel.cpp
#include <cstdint>
void matmul_ikj(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N, std::int64_t K) {
  for (std::int64_t i = 0; i < M; ++i) {
    float* c = C + i * N;
    for (std::int64_t j = 0; j < N; ++j) c[j] = 0.0f;
    for (std::int64_t k = 0; k < K; ++k) {
      const float a = A[i * K + k];
      const float* b = B + k * N;
      for (std::int64_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}
```

```json call_plan
{"calls": [{"fn": "matmul_ikj", "args": ["A", "B", "C", "M", "N", "K"]}]}
```
"""


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def evaluate(ksearch, solution, cache, extra):
    env = dict(os.environ, KSEARCH_CACHE_DIR=cache)
    cmd = [ksearch, "eval", "--task", "examples/matmul", "--solution", solution, "--json"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        sys.exit(f"load_stability: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return json.loads(p.stdout)


def figures(result):
    bench = [w for w in result["workloads"] if w.get("benchmark") and w.get("timing")]
    return {
        "latency": result["latency_ms"],
        "lo": result.get("latency_lo_ms", 0.0),
        "hi": result.get("latency_hi_ms", 0.0),
        "speedup": result["speedup"],
        "mean": geomean([w["timing"]["mean_ms"] for w in bench]),
        "ref_mean": geomean([(w.get("reference_timing") or {}).get("mean_ms") or w["reference_ms"] for w in bench]),
        "n": sum(w["timing"]["count"] for w in bench),
        "paired": all(w.get("paired") for w in bench),
    }


def spread(xs):
    return max(xs) / min(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ksearch", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--busy", type=int, default=os.cpu_count() or 2, help="busy loops under load (default: one per core)")
    ap.add_argument("--max-time", default=None, help="ksearch eval --max-time (default: the CLI's)")
    args = ap.parse_args()
    extra = ["--max-time", args.max_time] if args.max_time else []
    work = tempfile.mkdtemp(prefix="ks-load-")
    solution = os.path.join(work, "kernel.md")
    with open(solution, "w") as f:
        f.write(KERNEL)
    cache = os.path.join(work, "cache")
    evaluate(args.ksearch, solution, cache, extra)  # compiles and caches; not counted
    print(f"load_stability: {args.runs} evaluations quiet, {args.runs} under {args.busy} busy loops "
          f"({os.cpu_count()} CPUs); ksearch {args.ksearch}")
    rows = {}
    stale_ref = None
    for cond in ("quiet", "busy"):
        loops = []
        if cond == "busy":
            loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
            time.sleep(0.5)
        try:
            runs = []
            for i in range(args.runs):
                t0 = time.monotonic()
                fig = figures(evaluate(args.ksearch, solution, cache, extra))
                fig["wall"] = time.monotonic() - t0
                runs.append(fig)
                if stale_ref is None:
                    stale_ref = fig["ref_mean"]
                print(f"  {cond} {i + 1}: latency {fig['latency']:.4f} ms [{fig['lo']:.4f}, {fig['hi']:.4f}], "
                      f"mean {fig['mean']:.4f} ms, speedup {fig['speedup']:.3f}x, stale {stale_ref / fig['mean']:.3f}x, "
                      f"{fig['n']} timed calls, paired {fig['paired']}, {fig['wall']:.1f} s", flush=True)
        finally:
            for p in loops:
                p.kill()
                p.wait()
        rows[cond] = runs
    print()
    print(f"{'':8} {'latency max/min':>16} {'mean max/min':>13} {'speedup max/min':>16} {'stale max/min':>14} "
          f"{'wall s':>7}")
    for cond, runs in rows.items():
        print(f"{cond:8} {spread([r['latency'] for r in runs]):16.3f} {spread([r['mean'] for r in runs]):13.3f} "
              f"{spread([r['speedup'] for r in runs]):16.3f} {spread([stale_ref / r['mean'] for r in runs]):14.3f} "
              f"{sum(r['wall'] for r in runs) / len(runs):7.2f}")
    both = rows["quiet"] + rows["busy"]
    print(f"{'all':8} {spread([r['latency'] for r in both]):16.3f} {spread([r['mean'] for r in both]):13.3f} "
          f"{spread([r['speedup'] for r in both]):16.3f} {spread([stale_ref / r['mean'] for r in both]):14.3f}")


if __name__ == "__main__":
    main()
