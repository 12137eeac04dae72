"""Candidates per hour of one search on one GPU and on every GPU of this
machine, through ksearch.ray: a Ray head plus one node process per GPU
(CUDA_VISIBLE_DEVICES=i, --num-gpus 1), all on loopback, stopped at the end.

    python3 benchmarks/ray/two_gpus.py [--task examples/softmax] [--parallel 8] [--rounds 24]

The search is the same both times: the offline tune strategy (no LLM, L = 0)
with --parallel candidates per step, so each step's batch is spread over the
GPUs. Each run has a cache folder of its own (nothing compiled by the first
run helps the second) and starts its actors cold; the time counted is the
search's, from run_search's call to its return. It prints candidates per hour
for 1 GPU and for N, and their ratio (the issue's bar: >= 1.8 with 2 GPUs);
docs/ray.md says what to expect (T_step = ceil(P/G) * E + P * d).

Needs only Ray and the ksearch package with its library built with CUDA
(bindings/python on PYTHONPATH with $KSEARCH_LIBRARY, or pip-installed).
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]


def search(ksearch, address, work, name, slots, a):
    with ksearch.ray.RayEvaluator(address, backend=a.backend, max_slots=slots, cache_dir=str(work / f"cache-{name}"),
                                  straggler_factor=0) as pool:
        n = len(pool.slots())
        start = time.monotonic()
        res = ksearch.ray.run_search(a.task, pool=pool, llm=ksearch.LlmOptions.offline(), strategy="tune",
                                     parallel=a.parallel, budget={"max_rounds": a.rounds}, run_dir=work / name,
                                     weak_check=False)
        wall = time.monotonic() - start
        with res:
            rounds, best, stop = res.rounds, res.best_latency_ms, res.stop_reason
    nodes = {}
    for d in (work / name / "attempts").iterdir():
        m = json.loads((d / "eval.json").read_text()).get("metrics", {})
        key = f"{m.get('ray_node')}/{m.get('ray_slot')}"
        nodes[key] = nodes.get(key, 0) + 1
    # Past the first step (the actors' cold start: their workers, the task's reference outputs and
    # latencies): the rate a long search runs at, from the journal's times of the later results.
    times = sorted(datetime.fromisoformat(json.loads(line)["time"].replace("Z", "+00:00")).timestamp()
                   for line in (work / name / "attempts.jsonl").read_text().splitlines() if line.strip())
    later = times[a.parallel - 1:] if len(times) > a.parallel else []
    steady = 3600 * (len(later) - 1) / (later[-1] - later[0]) if len(later) > 1 and later[-1] > later[0] else None
    return {"gpus": n, "rounds": rounds, "wall_s": wall, "cand_per_h": 3600 * rounds / wall, "best_ms": best,
            "stop_reason": stop, "per_gpu": nodes, "steady_cand_per_h": steady}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="examples/softmax")
    ap.add_argument("--parallel", type=int, default=8, help="Candidates per step (the tune batch).")
    ap.add_argument("--rounds", type=int, default=24)
    ap.add_argument("--gpus", type=int, help="GPUs to use (default: every one this machine has).")
    ap.add_argument("--out", help="Write the numbers as JSON here.")
    ap.add_argument("--host-nodes", type=int, help="A dry run without GPUs: this many CPU-only nodes, host "
                                                    "evaluation (use with --task examples/matmul).")
    a = ap.parse_args()
    a.backend = "host" if a.host_nodes else "cuda"
    # A timeout's SIGTERM unwinds like Ctrl-C, so the cluster below is stopped, not left running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import ksearch
    import ksearch.ray
    from ksearch.ray._actor import _cuda_devices
    gpus, why = _cuda_devices()
    if a.host_nodes:
        gpus = [{"name": "host"}] * a.host_nodes
    count = a.gpus or len(gpus)
    if count < 1 or count > len(gpus):
        print(f"two_gpus: {count} GPU(s) asked, {len(gpus)} found{': ' + why if why else ''}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="ksearch-two-gpus-"))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SOURCE / "bindings" / "python") + os.pathsep + env.get("PYTHONPATH", "")
    cores = max(1, (os.cpu_count() or 2) // (count + 1))
    with ksearch.ray.LocalCluster(work / "cluster", env=env, num_cpus=cores) as cluster:
        for i in range(count):
            if a.host_nodes:
                cluster.add_node(f"cpu{i}", num_cpus=cores)
            else:
                cluster.add_node(f"gpu{i}", num_gpus=1, num_cpus=cores, env={"CUDA_VISIBLE_DEVICES": str(i)})
        ksearch.ray.connect(cluster.address, log_to_driver=False)
        try:
            one = search(ksearch, cluster.address, work, "one", 1, a)
            unit = "slot(s)" if a.host_nodes else "GPU(s)"
            print(f"1 {unit}: {one['rounds']} candidates in {one['wall_s']:.1f} s = {one['cand_per_h']:.0f}/h "
                  f"({one['per_gpu']})", flush=True)
            every = search(ksearch, cluster.address, work, "all", None, a)
            print(f"{every['gpus']} {unit}: {every['rounds']} candidates in {every['wall_s']:.1f} s = "
                  f"{every['cand_per_h']:.0f}/h ({every['per_gpu']})", flush=True)
        finally:
            import ray
            ray.shutdown()
    ratio = every["cand_per_h"] / one["cand_per_h"]
    print(f"ratio {every['gpus']} / 1: {ratio:.2f}x  ({gpus[0]['name']}, task {a.task}, "
          f"parallel {a.parallel}, run folders in {work})")
    if one["steady_cand_per_h"] and every["steady_cand_per_h"]:
        print(f"after the first step (cold actors): {one['steady_cand_per_h']:.0f}/h vs "
              f"{every['steady_cand_per_h']:.0f}/h, ratio {every['steady_cand_per_h'] / one['steady_cand_per_h']:.2f}x")
    if a.out:
        Path(a.out).write_text(json.dumps({"one": one, "all": every, "ratio": ratio, "gpus": gpus[:count],
                                           "task": a.task, "parallel": a.parallel}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
