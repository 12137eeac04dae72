"""Tests of `ksearch run --wandb`: the run logs itself to Weights & Biases under
K-Search's names. Real searches with the CLI on the host (C++ kernels), W&B in
offline mode, its records read back from the .wandb file W&B writes; a run
whose W&B is missing or unreachable must still succeed.

Needs $KSEARCH_CLI and $KSEARCH_TEST_SERVER (set by ctest) and the wandb
package in this Python, which the runs use as $KSEARCH_PYTHON (skipped, saying
so, without it)."""
import json
import os
import signal
import socket
import subprocess
import sys
import shutil
import time
import unittest
from pathlib import Path

from test_tracking import (ANSWERS, HAVE_WANDB, KSEARCH, SOURCE, TASK, TRANSCRIPT, Server, artifacts,
                           cli_work_folder, config_of, greedy_cmd, history, jsonl, md5_b64, wandb_records)

from ksearch import tracking  # noqa: E402  (test_tracking put the package on sys.path)

CODE_KINDS = ("generate", "improve", "debug")


def wm_cmd(run_dir, rounds=10):
    return [KSEARCH, "run", "--task", str(TASK), "--language", "cpp", "--llm", f"replay:{TRANSCRIPT}",
            "--max-rounds", str(rounds), "--wm-stagnation-window", "2", "--timing-cap", "0.2", "--quiet",
            "--run-dir", str(run_dir)]


def run_record(records):
    return next(r.run for r in records if r.WhichOneof("record_type") == "run")


def loggers_of(run_dir):
    """Processes still running the logger of run_dir (none may outlive the run)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--in-run" in cmd and str(run_dir).encode() in cmd:
                out.append(int(d.name))
    return out


def closed_port():
    """A local port nothing listens on: connecting is refused at once."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class WandbRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = cli_work_folder("ksearch-wandb-run-")
        # The LLM key is in the run's environment: the logger must never get it.
        cls.env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k != "RUN_NAME"}
        cls.env.update(KSEARCH_CACHE_DIR=str(cls.work / "cache"), OPENAI_API_KEY="sk-test-wandb-run-secret",
                       KSEARCH_PYTHON=sys.executable)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def wandb_env(self, name, **more):
        d = self.work / f"wandb-{name}"
        d.mkdir()
        env = dict(self.env, WANDB_MODE="offline", WANDB_DIR=str(d), WANDB_DATA_DIR=str(d / "data"),
                   WANDB_CACHE_DIR=str(d / "cache"), WANDB_CONFIG_DIR=str(d / "cfg"))
        env.update(more)
        return d, env

    def run_cli(self, cmd, env, timeout=600):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        self.assertEqual(loggers_of(cmd[cmd.index("--run-dir") + 1]), [], "the logger outlived the run")
        return r

    def check_rounds(self, run, records, score_key="inv_latency_ms"):
        """K-Search's two scalars at step = round, nothing else: the round's score (None when it
        failed) and the best so far (best_score = None before the first pass)."""
        task = tracking.ksearch_task_name(json.loads((run / "manifest.json").read_text())["task"]["name"])
        counted = [a for a in jsonl(run / "attempts.jsonl") if a["round"] > 0]
        rows = history(records)
        self.assertEqual([r["_step"] for r in rows], [a["round"] for a in counted])
        best = None
        for r, a in zip(rows, counted):
            keys = {k for k in r if not k.startswith("_")}
            score = r[f"{task}/generate/{score_key}"]
            if a["status"] == "passed":
                self.assertAlmostEqual(score, 1 / a["latency_ms"], places=9)
                best = max(best or 0, score)
            else:
                self.assertIsNone(score)
            best_key = f"{task}/generate/best_{score_key}" if best else f"{task}/generate/best_score"
            self.assertEqual(keys, {f"{task}/generate/{score_key}", best_key})
            self.assertAlmostEqual(r[best_key] or 0, best or 0, places=9)
        return task, counted

    def check_artifact_files(self, run, art, a, world_model):
        entries = {e.path: e for e in art.manifest.contents}
        expected = {"clean/kernel.cpp", "clean/launch_plan.json", "raw/raw_code.txt", "eval/round_summary.txt"}
        if world_model:
            expected.add("wm/world_model.json")
        self.assertEqual(set(entries), expected)
        d = run / "attempts" / f"{a['seq']:04d}-{a['solution_id']}"
        code = (d / "kernel.cpp").read_text()
        self.assertEqual(entries["clean/kernel.cpp"].digest, md5_b64(code))
        self.assertEqual(entries["clean/launch_plan.json"].digest, md5_b64((d / "launch_plan.json").read_text()))
        # raw/raw_code.txt: the model's answer that holds this code, word for word.
        answers = [e["response"]["text"] for e in jsonl(run / "transcript.jsonl")
                   if e["kind"] in CODE_KINDS and code.strip() in e["response"]["text"]]
        self.assertIn(entries["raw/raw_code.txt"].digest, [md5_b64(t) for t in answers])
        return entries

    @unittest.skipUnless(HAVE_WANDB, "wandb is not installed (pip install wandb)")
    def test_world_model_run(self):
        run = self.work / "wm"
        wdir, env = self.wandb_env("wm", RUN_NAME="ks-run-from-env")
        r = self.run_cli(wm_cmd(run) + ["--wandb", "--json"], env)
        self.assertEqual(r.returncode, 0, r.stderr)
        json.loads(r.stdout)  # W&B's output never reaches stdout
        self.assertIn("ksearch: W&B: 10 rounds, ", r.stderr)
        self.assertIn("wandb sync ", r.stderr)
        self.assertNotIn("--wandb:", r.stderr)  # no warning
        records = wandb_records(wdir)
        meta = run_record(records)
        self.assertEqual((meta.project, meta.display_name), ("flashinfer-bench", "ks-run-from-env"))
        task, counted = self.check_rounds(run, records)
        self.assertEqual(task, "tests_scale3")
        passing = [a for a in counted if a["status"] == "passed"]
        self.assertGreaterEqual(len(passing), 3)
        self.assertLess(len(passing), len(counted))  # failed rounds too
        arts = artifacts(records)
        self.assertEqual([a.name for a in arts], [f"r{a['round']}_code" for a in passing])
        # The snapshot current when each round was evaluated is the tree its action came from.
        snapshot_at, last = {}, None
        for e in jsonl(run / "events.jsonl"):
            if e["type"] == "world_model_snapshot":
                last = e["version"]
            elif e["type"] == "evaluated" and e.get("round", 0) > 0:
                snapshot_at.setdefault(e["round"], last)
        for art, a in zip(arts, passing):
            self.assertEqual(art.type, "generated-code")
            self.assertEqual(json.loads(art.metadata), {"definition": task, "round": a["round"],
                                                        "solution": a["solution_id"], "language": "cpp",
                                                        "target_gpu": json.loads(
                                                            (run / "manifest.json").read_text())["device"]["name"],
                                                        "wm_enabled": True})
            entries = self.check_artifact_files(run, art, a, world_model=True)
            v = snapshot_at[a["round"]]
            wm = (run / "world_model" / f"v{v:06d}.json").read_text() if v else ""
            self.assertEqual(entries["wm/world_model.json"].digest, md5_b64(wm))
            summary = (f"status=passed\nscore_name=inv_latency_ms\nscore_value={1 / a['latency_ms']}\n"
                       f"mean_vs_baseline_factor=None\nspeedup_factor={a['speedup']}\nlatency_ms={a['latency_ms']}\n")
            self.assertEqual(entries["eval/round_summary.txt"].digest, md5_b64(summary))
        config = config_of(records)
        self.assertEqual(config["task"], {"task_type": "ksearch", "task_name": "tests_scale3"})
        self.assertEqual(config["generator"]["language"], "cpp")
        self.assertEqual((config["max_opt_rounds"], config["enable_world_model"], config["wm_stagnation_window"],
                          config["wm_max_difficulty"]), (10, True, 2, 4))
        for key in ("continue_from_solution", "continue_from_world_model", "save_results", "save_solutions",
                    "num_eval_workload"):
            self.assertIn(key, config)
        self.assertEqual(config["artifacts_dir"], str(run.resolve()))

        # The same names from the bridge afterwards (a run made without --wandb).
        later, later_env = self.wandb_env("wm-later")
        b = subprocess.run([sys.executable, "-m", "ksearch.tracking", str(run), "--wandb", "--ksearch-names",
                            "--project", "p2", "--name", "later"], env=dict(
                                later_env, PYTHONPATH=str(SOURCE / "bindings" / "python")),
                           capture_output=True, text=True, timeout=600, cwd=str(later))
        self.assertEqual(b.returncode, 0, b.stderr)
        again = wandb_records(later)
        self.assertEqual((run_record(again).project, run_record(again).display_name), ("p2", "later"))
        strip = lambda rows: [{k: v for k, v in row.items() if k not in ("_runtime", "_timestamp")} for row in rows]
        self.assertEqual(strip(history(again)), strip(history(records)))
        self.assertEqual([a.name for a in artifacts(again)], [a.name for a in arts])

    @unittest.skipUnless(HAVE_WANDB, "wandb is not installed (pip install wandb)")
    def test_greedy_run_and_ctrl_c(self):
        """A strategy without a world model: the base generator's artifact name and round summary, no
        wm/ file. Ctrl-C after round 2: the run stops after the current round, and the logger logs
        every round the run made and then ends."""
        gate = self.work / "gate"
        gate.mkdir()
        server = Server(self.work, gate=gate)
        run = self.work / "greedy"
        wdir, env = self.wandb_env("greedy", WANDB_PROJECT="ks-project")
        p = None
        try:
            p = subprocess.Popen(greedy_cmd(server.url, run) + ["--wandb"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            (gate / "answer-0").touch()
            (gate / "answer-1").touch()
            deadline = time.monotonic() + 300  # a safety net against a hang, not a measurement
            while not (run / "attempts.jsonl").exists() or len(jsonl(run / "attempts.jsonl")) < 2:
                self.assertLess(time.monotonic(), deadline, "round 2 never came")
                time.sleep(0.05)
            p.send_signal(signal.SIGINT)  # as the terminal's Ctrl-C reaches the CLI
            (gate / "answer-2").touch()   # round 3's answer, in flight when Ctrl-C came
            _, err = p.communicate(timeout=300)
        finally:
            if p and p.poll() is None:
                p.kill()
                p.wait()
            server.stop()
        self.assertEqual(p.returncode, 130, err)
        self.assertEqual(loggers_of(run), [])
        counted = [a for a in jsonl(run / "attempts.jsonl") if a["round"] > 0]
        self.assertGreaterEqual(len(counted), 2)
        self.assertLess(len(counted), len(ANSWERS))
        records = wandb_records(wdir)
        self.assertEqual(run_record(records).project, "ks-project")
        self.assertEqual([r.WhichOneof("record_type") for r in records][-1], "exit")
        task, _ = self.check_rounds(run, records)
        passing = [a for a in counted if a["status"] == "passed"]
        arts = artifacts(records)
        self.assertEqual([a.name for a in arts], [f"tests_scale3_r{a['round']}_{a['solution_id']}_code"
                                                  for a in passing])
        for art, a in zip(arts, passing):
            entries = self.check_artifact_files(run, art, a, world_model=False)
            self.assertNotIn("wm_enabled", json.loads(art.metadata))
            summary = (f"- round_mean_latency_ms: {a['latency_ms']:.4f}\n"
                       f"- round_speedup_vs_ref: {a['speedup']:.3f}x\n- round_score: {1 / a['latency_ms']:.4f}\n")
            self.assertEqual(entries["eval/round_summary.txt"].digest, md5_b64(summary))

    def test_wandb_missing(self):
        """No wandb in the logger's Python (a package on PYTHONPATH that fails to import, as a missing
        one does; it also records the environment the logger got): one warning line, and the search
        succeeds."""
        shadow = self.work / "shadow" / "wandb"
        shadow.mkdir(parents=True)
        seen = self.work / "shadow" / "environ.json"
        (shadow / "__init__.py").write_text(
            "import json, os\n"
            f"open({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
            "raise ImportError(\"No module named 'wandb'\")\n")
        run = self.work / "missing"
        env = dict(self.env, PYTHONPATH=str(shadow.parent), WANDB_MODE="offline", WANDB_ENTITY="someone",
                   MY_API_KEY="sk-test-named-key", KSEARCH_API_KEY="sk-test-ksearch-key")
        r = self.run_cli(wm_cmd(run, rounds=3) + ["--wandb", "--api-key-env", "MY_API_KEY"], env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue((run / "best.json").is_file())
        warnings = [l for l in r.stderr.splitlines() if "--wandb" in l]
        self.assertEqual(len(warnings), 1, r.stderr)
        self.assertIn("the wandb package is not installed", warnings[0])
        self.assertIn(f"python3 -m ksearch.tracking {run.resolve()} --wandb --ksearch-names", warnings[0])
        self.assertNotIn("Traceback", r.stderr)
        got = json.loads(seen.read_text())
        for secret in ("OPENAI_API_KEY", "MY_API_KEY", "KSEARCH_API_KEY", "KSEARCH_CACHE_DIR"):
            self.assertNotIn(secret, got)
        self.assertNotIn("sk-test", json.dumps(got))
        self.assertEqual((got["WANDB_MODE"], got["WANDB_ENTITY"], got["WANDB_SILENT"]), ("offline", "someone", "true"))

    @unittest.skipUnless(HAVE_WANDB, "wandb is not installed (pip install wandb)")
    def test_wandb_unreachable(self):
        """Online mode with a W&B server that refuses connections: W&B gives up after its init timeout
        (5 s here); the search is unaffected and says so in one line."""
        run = self.work / "unreachable"
        wdir, env = self.wandb_env("unreachable", WANDB_MODE="online",
                                   WANDB_BASE_URL=f"http://127.0.0.1:{closed_port()}",
                                   WANDB_API_KEY="k" * 40, WANDB_INIT_TIMEOUT="5")
        r = self.run_cli(wm_cmd(run, rounds=3) + ["--wandb"], env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue((run / "best.json").is_file())
        warnings = [l for l in r.stderr.splitlines() if "--wandb" in l]
        self.assertEqual(len(warnings), 1, r.stderr)
        self.assertIn("W&B failed", warnings[0])
        self.assertIn("the search goes on without W&B", warnings[0])

    def test_flags_need_wandb(self):
        r = subprocess.run(wm_cmd(self.work / "flags") + ["--run-name", "x"], env=self.env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("add --wandb", r.stderr)


class KsearchNamesTest(unittest.TestCase):
    """The name mapping, suite by suite (no run needed)."""

    def test_task_names(self):
        self.assertEqual(tracking.ksearch_task_name("flashinfer/gqa_paged_decode_h32_kv4_d128_ps1"),
                         "gqa_paged_decode_h32_kv4_d128_ps1")
        self.assertEqual(tracking.ksearch_task_name("gpumode/trimul"), "gpumode_trimul")
        self.assertEqual(tracking.ksearch_task_name("gpumode/trimul-upstream"), "gpumode_trimul")
        self.assertEqual(tracking.ksearch_task_name("kernelbench/level1/19_ReLU"), "kernelbench_l1_p19")
        self.assertEqual(tracking.ksearch_task_name("examples/matmul"), "examples_matmul")

    def test_scores(self):
        ok = {"status": "passed", "latency_ms": 2.0, "speedup": 1.5}
        bad = {"status": "incorrect", "latency_ms": 0, "speedup": 0}
        fi = {"score_mode": "vs_baseline", "vs_baseline": 0.76,
              "workloads": [{"benchmark": True, "timing": {"mean_ms": 1.0}, "reference_ms": 3.0},
                            {"benchmark": True, "timing": {"mean_ms": 2.0}, "reference_ms": 2.0},
                            {"benchmark": False}]}
        self.assertEqual(tracking.ksearch_score("flashinfer/x", fi, ok), ("mean_vs_baseline", 0.76))
        self.assertEqual(tracking.ksearch_score("flashinfer/x", fi, bad), ("mean_vs_baseline", None))
        # No baseline latency: K-Search's arithmetic mean of the speedups over the reference.
        no_base = dict(fi, vs_baseline=0)
        self.assertEqual(tracking.ksearch_score("flashinfer/x", no_base, ok), ("mean_speedup_vs_ref", 2.0))
        self.assertEqual(tracking.ksearch_score("kernelbench/level1/19_ReLU", {}, ok), ("speedup_over_eager", 1.5))
        self.assertEqual(tracking.ksearch_score("gpumode/trimul", {}, ok), ("inv_latency_ms", 0.5))
        self.assertEqual(tracking.ksearch_score("gpumode/trimul", {}, bad), ("inv_latency_ms", None))


if __name__ == "__main__":
    unittest.main(verbosity=2)
