#!/usr/bin/env python3
"""KernelBench's own evaluation of one candidate, in a fresh process as
KernelBench (and K-Search) run it: eval_kernel_against_ref on a ModelNew
source, 5 correctness trials, 100 timed trials. Prints one JSON line with the
verdict and the wall time.

  [KB_BACKEND=triton] kb_own_eval.py KERNELBENCH_DIR PROBLEM_FILE MODELNEW_FILE [BUILD_DIR]
"""
import json
import os
import sys
import time

t0 = time.time()
kb, problem, candidate = sys.argv[1:4]
sys.path.insert(0, os.path.join(kb, "src"))

# kernelbench/__init__.py imports its LLM helpers (openai, litellm, dotenv,
# tqdm), which the evaluation never calls; where a GPU machine lacks them,
# empty stand-ins let eval.py import. The evaluation code itself is
# KernelBench's, unchanged.
import types  # noqa: E402

for name, attrs in (("dotenv", {"load_dotenv": lambda *a, **k: None}), ("openai", {"OpenAI": object}),
                    ("litellm", {"completion": None}), ("tqdm", {"tqdm": lambda x=None, *a, **k: x})):
    try:
        __import__(name)
    except ImportError:
        sys.modules[name] = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(sys.modules[name], k, v)

from kernelbench.eval import eval_kernel_against_ref  # noqa: E402

# KB_BACKEND picks KernelBench's backend (triton loads the module from a file);
# KB_TRIALS and KB_PERF=0 shorten a verdict-only check (the benchmark keeps
# KernelBench's defaults: 5 correctness trials, 100 timed trials).
r = eval_kernel_against_ref(open(problem).read(), open(candidate).read(), seed_num=42,
                            num_correct_trials=int(os.environ.get("KB_TRIALS", "5")), num_perf_trials=100,
                            measure_performance=os.environ.get("KB_PERF", "1") != "0", verbose=False,
                            backend=os.environ.get("KB_BACKEND", "cuda"),
                            build_dir=sys.argv[4] if len(sys.argv) > 4 else None)
print(json.dumps({"compiled": bool(r and r.compiled), "correct": bool(r and r.correctness),
                  "runtime_ms": getattr(r, "runtime", -1) if r else -1, "wall_s": time.time() - t0}))
