"""Measures what the sizing rule of docs/ray.md rests on: how candidates per
hour of one search depend on the LLM's latency L, the evaluation time E, the
candidates per step P (--parallel) and the evaluation slots G.

    python3 benchmarks/ray/sizing.py [--address HOST:PORT] [--out FILE.json]

Without --address it starts a cluster of two nodes on this machine's loopback
(ksearch.ray.LocalCluster, one host slot each) and stops it at the end. The
search is greedy on tests/fixtures/tasks/scale3 (host C++) with the scripted
model of benchmarks/ray/scripted_model.py as a batch callback whose delay
stands for L; the P prompts of a step are answered at once, on P threads.
Each setting runs on a pool warmed by a first search, and prints the measured
L (the callback's time per prompt), E (the actors' ray_eval_s), the wall time
per step and candidates per hour, with the driver's own time per candidate

    d = (T_step - L - ceil(P / G) * E) / P

and what the model T_step = L + ceil(P / G) * E + P * d predicts with the
d of all settings pooled (docs/ray.md, "Sizing"). Needs ksearch importable (bindings/python
on PYTHONPATH with $KSEARCH_LIBRARY, or the installed package) and Ray.
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1]
TASK = str(SOURCE / "tests" / "fixtures" / "tasks" / "scale3")


def scripted_llm(ksearch, parallel, delay, calls):
    """The scripted model as a batch callback: the P prompts of a step are
    answered on P threads at once, each after `delay` seconds (the C ABI's
    command source runs one program at a time)."""
    sys.path.insert(0, str(HERE))
    from scripted_model import kernel
    count = iter(range(10 ** 9))

    def answer(_request):
        start = time.monotonic()
        n = next(count)
        time.sleep(delay)
        calls.append(time.monotonic() - start)
        return kernel(n)
    return ksearch.LlmOptions.from_batch_callback(ksearch.threaded_batch(answer, parallel))


def one_search(ksearch, pool, work, name, parallel, delay, rounds):
    run_dir = work / name
    calls = []
    llm = scripted_llm(ksearch, parallel, delay, calls)
    start = time.monotonic()
    res = ksearch.ray.run_search(TASK, pool=pool, language="cpp", strategy="greedy", parallel=parallel,
                                 budget={"max_rounds": rounds}, run_dir=run_dir, llm=llm, weak_check=False)
    wall = time.monotonic() - start
    with res:
        rounds_done = res.rounds
    eval_s = [json.loads((d / "eval.json").read_text())["metrics"]["ray_eval_s"]
              for d in sorted((run_dir / "attempts").iterdir())]
    return {"rounds": rounds_done, "wall_s": wall, "L_s": statistics.mean(calls), "E_s": statistics.mean(eval_s),
            "E_median_s": statistics.median(eval_s)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--address", help="An existing cluster (default: two nodes started here).")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--delays", default="0,3", help="Scripted LLM delays in seconds, comma-separated.")
    ap.add_argument("--parallel", default="2,4", help="Values of P, comma-separated.")
    ap.add_argument("--out", help="Write the measurements as JSON here.")
    a = ap.parse_args()
    import ksearch
    import ksearch.ray
    work = Path(tempfile.mkdtemp(prefix="ksearch-sizing-"))
    cluster = None
    try:
        address = a.address
        if not address:
            env = dict(os.environ)
            env["PYTHONPATH"] = str(SOURCE / "bindings" / "python") + os.pathsep + env.get("PYTHONPATH", "")
            env["KSEARCH_CACHE_DIR"] = str(work / "cache")
            cluster = ksearch.ray.LocalCluster(work / "cluster", env=env)
            cluster.add_node("node2")
            address = cluster.address
        ksearch.ray.connect(address, log_to_driver=False)
        rows = []
        for slots in (1, 2):
            with ksearch.ray.RayEvaluator(address, backend="host", max_slots=slots, straggler_factor=0,
                                          eval_options={"max_time_per_workload_s": 0.1}) as pool:
                one_search(ksearch, pool, work, f"warm-g{slots}", 2, 0, 4)  # workers, references, compilers
                for delay in [float(x) for x in a.delays.split(",")]:
                    for parallel in [int(x) for x in a.parallel.split(",")]:
                        m = one_search(ksearch, pool, work, f"g{slots}-p{parallel}-l{delay:g}", parallel, delay,
                                       a.rounds)
                        steps = math.ceil(m["rounds"] / parallel)
                        k = math.ceil(parallel / slots)
                        step_s = m["wall_s"] / steps
                        row = {"G": slots, "P": parallel, "delay_s": delay, **m, "steps": steps, "step_s": step_s,
                               "d_s": (step_s - m["L_s"] - k * m["E_s"]) / parallel,
                               "cand_per_h": 3600 * m["rounds"] / m["wall_s"],
                               "busy_fraction": k * m["E_s"] / step_s}
                        rows.append(row)
                        print(f"G={slots} P={parallel} L={row['L_s']:.2f}s E={row['E_s']:.2f}s "
                              f"step {step_s:.2f}s d={row['d_s']:.3f}s  {row['cand_per_h']:.0f}/h  "
                              f"slots busy {100 * row['busy_fraction']:.0f}%", flush=True)
        d = statistics.median(r["d_s"] for r in rows)
        print(f"\ndriver time per candidate d = {d:.3f} s (median); the model with it (run folders in {work}):")
        for r in rows:
            k = math.ceil(r["P"] / r["G"])
            r["predicted_cand_per_h"] = 3600 * r["P"] / (r["L_s"] + k * r["E_s"] + r["P"] * d)
            print(f"G={r['G']} P={r['P']} L={r['L_s']:.2f}s: measured {r['cand_per_h']:.0f}/h, "
                  f"model {r['predicted_cand_per_h']:.0f}/h ({100 * (r['cand_per_h'] / r['predicted_cand_per_h'] - 1):+.0f}%)")
        if a.out:
            Path(a.out).write_text(json.dumps({"machine": os.uname().nodename, "cpus": os.cpu_count(),
                                               "d_s": d, "rows": rows}, indent=1))
        return 0
    finally:
        try:
            import ray
            ray.shutdown()
        except ImportError:
            pass
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
