#!/usr/bin/env python3
"""KernelBench's own evaluation of one candidate, in a fresh process as
KernelBench (and K-Search) run it: eval_kernel_against_ref on a ModelNew
source, 5 correctness trials, 100 timed trials. Prints one JSON line with the
verdict and the wall time.

  kb_own_eval.py KERNELBENCH_DIR PROBLEM_FILE MODELNEW_FILE [BUILD_DIR]
"""
import json
import os
import sys
import time

t0 = time.time()
kb, problem, candidate = sys.argv[1:4]
sys.path.insert(0, os.path.join(kb, "src"))
from kernelbench.eval import eval_kernel_against_ref  # noqa: E402

r = eval_kernel_against_ref(open(problem).read(), open(candidate).read(), seed_num=42, num_correct_trials=5,
                            num_perf_trials=100, measure_performance=True, verbose=False,
                            build_dir=sys.argv[4] if len(sys.argv) > 4 else None)
print(json.dumps({"compiled": bool(r and r.compiled), "correct": bool(r and r.correctness),
                  "runtime_ms": getattr(r, "runtime", -1) if r else -1, "wall_s": time.time() - t0}))
