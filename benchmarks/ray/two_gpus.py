"""Candidates per hour of one search on one GPU and on every GPU of this
machine, through ksearch.ray: a Ray head plus one node process per GPU
(CUDA_VISIBLE_DEVICES=i, --num-gpus 1), all on loopback, stopped at the end.

    python3 benchmarks/ray/two_gpus.py [--model scripted|tune] [--task gpumode/trimul]
                                       [--parallel 8] [--rounds 48] [--warm-rounds 8]

--model scripted (the default): a greedy search whose model is
benchmarks/ray/scripted_model.py answering with gpumode/trimul's starting
kernel, a new source each answer (so each candidate is compiled and measured
anew, as an LLM's are) and no delay (L = 0). --model tune: the offline tune
strategy (no LLM), whose steps end where the tuner does. Either way
--parallel candidates make a step, spread over the GPUs.

Each GPU is measured alone, and all of them together, each configuration in a
cluster and pool of its own (its actors and cache folder: nothing compiled for
one helps another); the ratio is against the mean of the GPUs alone, and is
also printed against the fastest of them. With --warm-rounds W > 0 the pool first
runs a search of W candidates, untimed: the actors' workers start and the
task's reference outputs and latencies are computed, as in a cluster that
serves many searches; the timed search's candidates are new to it (the
scripted model's answers keep counting). The time counted is the timed
search's, from run_search's call to its return. It prints candidates per
hour for each GPU alone and for all N, the warm-ups' times, and the ratio (the issue's
bar: >= 1.8 with 2 GPUs); docs/ray.md says what to expect
(T_step = L + ceil(P/G) * E + P * d).

--only gpu0,all (names: gpuI, all) measures just those configurations and
adds them to the --out file, so a benchmark longer than one sitting (a
device call's time limit) runs in parts on the same machine; the ratio is
printed once the file holds every configuration.

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


MODEL = SOURCE / "benchmarks" / "ray" / "scripted_model.py"
TRIMUL = SOURCE / "lib" / "tasks" / "gpumode" / "kernels"


def one_search(ksearch, pool, work, name, rounds, a):
    """A search on `pool`, its wall time, and its run folder."""
    if a.model == "tune":
        llm, strategy = ksearch.LlmOptions.offline(), "tune"
    else:
        argv = [sys.executable, str(MODEL), str(work / f"answers-{name.split('-')[0]}"), "0"]
        if a.task == "gpumode/trimul":
            argv += [str(TRIMUL / "trimul_reference.cu"), str(TRIMUL / "trimul_reference_plan.json")]
        llm, strategy = ksearch.LlmOptions.command(argv), "greedy"
    start = time.monotonic()
    res = ksearch.ray.run_search(a.task, pool=pool, llm=llm, strategy=strategy, parallel=a.parallel,
                                 budget={"max_rounds": rounds}, run_dir=work / name, weak_check=False)
    wall = time.monotonic() - start
    with res:
        return wall, res.rounds, res.best_latency_ms, res.stop_reason


def search(ksearch, address, work, name, slots, a):
    with ksearch.ray.RayEvaluator(address, backend=a.backend, max_slots=slots, cache_dir=str(work / f"cache-{name}"),
                                  straggler_factor=0) as pool:
        n = len(pool.slots())
        warm_s = one_search(ksearch, pool, work, f"{name}-warm", a.warm_rounds, a)[0] if a.warm_rounds else 0.0
        wall, rounds, best, stop = one_search(ksearch, pool, work, name, a.rounds, a)
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
    return {"gpus": n, "rounds": rounds, "wall_s": wall, "warm_s": warm_s, "cand_per_h": 3600 * rounds / wall, "best_ms": best,
            "stop_reason": stop, "per_gpu": nodes, "steady_cand_per_h": steady}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["scripted", "tune"], default="scripted")
    ap.add_argument("--task", default="gpumode/trimul",
                    help="With --model scripted: gpumode/trimul, or with --host-nodes tests/fixtures/tasks/scale3.")
    ap.add_argument("--parallel", type=int, default=8, help="Candidates per step.")
    ap.add_argument("--rounds", type=int, default=48, help="Candidates of the timed search.")
    ap.add_argument("--warm-rounds", type=int, help="Candidates of the untimed warm-up search (0: none; default: "
                                                     "--parallel with the scripted model, 0 with tune, whose warm-up "
                                                     "would compile the timed search's first configurations).")
    ap.add_argument("--gpus", type=int, help="GPUs to use (default: every one this machine has).")
    ap.add_argument("--out", help="Write the numbers as JSON here (with --only: added to what the file holds).")
    ap.add_argument("--only", help="Measure only these configurations, comma-separated: gpuI (GPU I alone), all.")
    ap.add_argument("--host-nodes", type=int, help="A dry run without GPUs: this many CPU-only nodes, host "
                                                    "evaluation (with --task tests/fixtures/tasks/scale3, or examples/matmul and --model tune).")
    a = ap.parse_args()
    a.backend = "host" if a.host_nodes else "cuda"
    if a.warm_rounds is None:
        a.warm_rounds = a.parallel if a.model == "scripted" else 0
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
    work = Path(tempfile.mkdtemp(prefix="ks2g-"))  # short: Ray's socket paths under it must fit 107 bytes
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SOURCE / "bindings" / "python") + os.pathsep + env.get("PYTHONPATH", "")
    cores = max(1, (os.cpu_count() or 2) // (count + 1))
    unit = "slot(s)" if a.host_nodes else "GPU(s)"
    import ray

    def measure(name, indices):
        """One configuration in a cluster of its own: a head plus a node per GPU in `indices`."""
        with ksearch.ray.LocalCluster(work / f"cluster-{name}", env=env, num_cpus=cores) as cluster:
            for i in indices:
                if a.host_nodes:
                    cluster.add_node(f"cpu{i}", num_cpus=cores)
                else:
                    cluster.add_node(f"gpu{i}", num_gpus=1, num_cpus=cores, env={"CUDA_VISIBLE_DEVICES": str(i)})
            ksearch.ray.connect(cluster.address, log_to_driver=False)
            try:
                r = search(ksearch, cluster.address, work, name, 1 if len(indices) == 1 else None, a)
            finally:
                ray.shutdown()
        print(f"{r['gpus']} {unit} ({name}): {r['rounds']} candidates in {r['wall_s']:.1f} s = "
              f"{r['cand_per_h']:.0f}/h ({r['per_gpu']}; warm-up {r['warm_s']:.1f} s)", flush=True)
        return r

    # Each GPU alone, each in a cluster of its own (cards of one model still differ, and a ratio
    # against one of them alone would carry that card's difference), the run on every GPU between
    # them, so a drift over the benchmark's time weighs on both sides.
    order = ["gpu0", "all"] + [f"gpu{i}" for i in range(1, count)]
    wanted = order if not a.only else [n.strip() for n in a.only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in order]
    if unknown:
        print(f"two_gpus: --only {','.join(unknown)}: not one of {','.join(order)}", file=sys.stderr)
        return 2
    done = {}
    if a.only and a.out and Path(a.out).exists():
        done = json.loads(Path(a.out).read_text()).get("configs", {})
    for name in [n for n in order if n in wanted]:
        done[name] = measure(name, list(range(count)) if name == "all" else [int(name[3:])])
    result = {"configs": done, "gpus": gpus[:count], "task": a.task, "model": a.model, "parallel": a.parallel,
              "warm_rounds": a.warm_rounds}
    missing = [n for n in order if n not in done]
    if missing:
        print(f"two_gpus: no ratio yet; still to measure: {','.join(missing)}")
    else:
        singles = {n: done[n] for n in order if n != "all"}
        every = done["all"]
        single_rates = [r["cand_per_h"] for r in singles.values()]
        mean_single = sum(single_rates) / len(single_rates)
        result["ratio"] = ratio = every["cand_per_h"] / mean_single
        result["ratio_vs_fastest"] = every["cand_per_h"] / max(single_rates)
        print(f"ratio {every['gpus']} / 1: {ratio:.2f}x against the mean of each GPU alone ({mean_single:.0f}/h), "
              f"{result['ratio_vs_fastest']:.2f}x against the fastest alone ({max(single_rates):.0f}/h)  "
              f"({gpus[0]['name']}, {a.model} model, task {a.task}, parallel {a.parallel}, warm-up {a.warm_rounds} "
              f"candidates, run folders in {work})")
        if every["steady_cand_per_h"] and all(r["steady_cand_per_h"] for r in singles.values()):
            steady_single = sum(r["steady_cand_per_h"] for r in singles.values()) / len(singles)
            result["steady_ratio"] = every["steady_cand_per_h"] / steady_single
            print(f"after the first step: {steady_single:.0f}/h alone (mean) vs {every['steady_cand_per_h']:.0f}/h, "
                  f"ratio {result['steady_ratio']:.2f}x")
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
