#!/usr/bin/env python3
"""traces_check.sh's work (its header says what and why). One definition after another; results in
OUT/<key>.builtin.json, OUT/<key>.dataset.json and OUT/traces_check.json."""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness_fixture as hf  # noqa: E402  (the definitions' JSON, the .safetensors writer)

SOLUTION = "ksearch_baseline_measured"
KEYS = ["gqa", "mla_decode", "mla_prefill", "moe"]


def ksearch(args, out_file, timeout):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    Path(out_file).write_text(p.stdout)
    Path(str(out_file) + ".log").write_text(p.stderr)
    try:
        return json.loads(p.stdout)
    except ValueError:
        sys.exit("FAIL: %s (exit %d): %s" % (" ".join(args[:4]), p.returncode, p.stderr[-800:]))


def scalar_value(dist):
    """A workload's constant override as a number, or None (an expression the native generator keeps)."""
    if dist.get("kind") != "constant":
        return None
    try:
        return json.loads(dist["value"])
    except (ValueError, KeyError):
        return None


def write_dataset(root, key, spec, builtin, hardware):
    """The definition, one workload per timed built-in workload, and a PASSED trace of each with the
    baseline latency the built-in evaluation measured."""
    d = hf.DEFINITIONS[key]
    hf.write_json(root / "definitions" / d["op_type"] / (d["name"] + ".json"), d)
    baseline = {w["name"]: w.get("baseline_ms", 0) for w in builtin["workloads"]}
    var = [a for a, v in d["axes"].items() if v["type"] == "var"]
    workloads, traces = [], []
    for w in spec["workloads"]:
        if not w.get("benchmark") or not baseline.get(w["name"]):
            continue
        uuid = "ksearch-" + w["name"]
        inputs = {}
        if w.get("data"):
            inputs.update(hf.blob(root, d["op_type"], d["name"], uuid,
                                  {k: v["values"] for k, v in w["data"].items()}))
        for name, dist in w.get("dist", {}).items():
            v = scalar_value(dist)
            if v is not None:
                inputs[name] = {"type": "scalar", "value": v}
        workload = {"uuid": uuid, "axes": {a: w["dims"][a] for a in var}, "inputs": inputs}
        workloads.append(json.dumps({"definition": d["name"], "solution": None, "evaluation": None,
                                     "workload": workload}))
        traces.append(json.dumps({"definition": d["name"], "workload": workload, "solution": SOLUTION,
                                  "evaluation": {"status": "PASSED", "environment": {"hardware": hardware},
                                                 "performance": {"latency_ms": baseline[w["name"]]}}}))
    for folder, lines in (("workloads", workloads), ("traces", traces)):
        path = root / folder / d["op_type"] / (d["name"] + ".jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return len(workloads)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ksearch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("keys", nargs="*")
    a = ap.parse_args()
    out = Path(a.out)
    root = out / "dataset"
    cache = str(out / "cache")
    report, fails = {}, 0
    for key in a.keys or KEYS:
        if key not in hf.DEFINITIONS:
            sys.exit("traces_check: unknown definition %r (one of %s)" % (key, ", ".join(KEYS)))
        name = hf.DEFINITIONS[key]["name"]
        task = "flashinfer/" + name
        started = time.time()
        spec = json.loads(subprocess.run([a.ksearch, "tasks", "--spec", task], check=True, capture_output=True,
                                         text=True).stdout)
        start = out / (key + ".start.json")
        start.write_text(json.dumps(spec["starting_points"][0]))
        common = ["--solution", str(start), "--json", "--cache-dir", cache, "--max-time", "0.5"]
        builtin = ksearch([a.ksearch, "eval", "--task", task, "--workloads", "all"] + common,
                          out / (key + ".builtin.json"), 400)
        n = write_dataset(root, key, spec, builtin, builtin["device"])
        dataset = ksearch([a.ksearch, "eval", "--dataset", str(root), "--task", task, "--baseline-solution", SOLUTION]
                          + common, out / (key + ".dataset.json"), 400)
        mine = {w["name"]: w["timing"]["mean_ms"] for w in builtin["workloads"] if w.get("benchmark")}
        theirs = {w["name"][len("ksearch-"):]: w["timing"]["mean_ms"] for w in dataset["workloads"]}
        latency_ratio = {w: theirs[w] / mine[w] for w in theirs if mine.get(w)}
        s1, s2 = builtin.get("vs_baseline", 0), dataset.get("vs_baseline", 0)
        ok = builtin["status"] == "passed" and dataset["status"] == "passed" and s1 > 0 and s2 > 0
        fails += 0 if ok else 1
        report[key] = {"definition": name, "device": builtin["device"], "workloads": n,
                       "score_builtin_baseline": s1, "score_traces": s2, "ratio": s2 / s1 if s1 else None,
                       "candidate_latency_ratio_dataset_over_builtin": latency_ratio,
                       "dataset_baseline": dataset.get("baseline"), "seconds": time.time() - started}
        lr = sorted(latency_ratio.values())
        print("%s %s: vs_baseline %.4f (libksearch's baseline kernel) | %.4f (traces of %s, %d workloads) | "
              "ratio %.4f | candidate latency dataset/built-in %.3f..%.3f | %.0f s" % (
                  "PASS" if ok else "FAIL", name, s1, s2, SOLUTION, n, s2 / s1 if s1 else 0,
                  lr[0] if lr else 0, lr[-1] if lr else 0, time.time() - started))
        (out / "traces_check.json").write_text(json.dumps(report, indent=2) + "\n")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
