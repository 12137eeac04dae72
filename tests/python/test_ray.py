"""Tests of ksearch.ray: one search evaluated on a Ray cluster of two nodes
on this machine's loopback (a head and a node with a resource "node2" of its
own, each a `ray start --block` in a session of its own), with real actors,
real libksearch evaluators and real worker processes. A host task
(tests/fixtures/tasks/scale3) and a scripted `command:` model
(benchmarks/ray/scripted_model.py) stand for a GPU task and an LLM.

    python3 test_ray.py [unittest options]

Needs the build's library ($KSEARCH_LIBRARY, set by ctest) and Ray (pip
install ray; tests/run_tests.sh installs it); exits 77 (skipped) without Ray.
One cluster serves the whole module; every process it starts is ended in
tearDownModule, also when a test fails. No test asserts a wall time: the
timeouts only guard against hangs on a loaded machine.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
PACKAGE = SOURCE / "bindings" / "python"
sys.path.insert(0, str(PACKAGE))
TASK = str(SOURCE / "tests" / "fixtures" / "tasks" / "scale3")
MODEL = SOURCE / "benchmarks" / "ray" / "scripted_model.py"
HANG_GUARD_S = 900

try:
    import ray  # noqa: F401
    HAVE_RAY = True
except ImportError:
    HAVE_RAY = False

import ksearch  # noqa: E402
from ksearch.ray import _actor, _local  # noqa: E402
from ksearch.ray import __main__ as cli  # noqa: E402

CLUSTER = None
WORK = None
ENV = None


def node_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PACKAGE) + os.pathsep + env.get("PYTHONPATH", "")
    # A credential in the tests' environment: no node, actor or candidate may get it.
    env["OPENAI_API_KEY"] = "sk-test-never-on-a-node"
    # A lost node is noticed within seconds, not the default half minute.
    env.update({"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
                "RAY_health_check_failure_threshold": "3"})
    return env


def setUpModule():
    global CLUSTER, WORK, ENV
    if not HAVE_RAY:
        return
    WORK = Path(tempfile.mkdtemp(prefix="ksearch-ray-"))
    ENV = node_env()
    ENV["KSEARCH_CACHE_DIR"] = str(WORK / "cache")  # the actors' caches, not the user's
    CLUSTER = _local.LocalCluster(WORK / "cluster", env=ENV)
    try:
        CLUSTER.add_node("node2", resources={"node2": 1})
        ksearch.ray.connect(CLUSTER.address, log_to_driver=False)
    except BaseException:
        CLUSTER.stop()
        raise


def tearDownModule():
    if CLUSTER is not None:
        try:
            import ray
            ray.shutdown()
        finally:
            CLUSTER.stop()
    if WORK is not None:
        shutil.rmtree(WORK, ignore_errors=True)


def model_llm(state, delay=0.0):
    return f"command:{sys.executable} {MODEL} {state}" + (f" {delay}" if delay else "")


def cli_run(run_dir, *extra, rounds=4, parallel=2, delay=0.0, **popen):
    argv = [sys.executable, "-m", "ksearch.ray", "run", "--address", CLUSTER.address, "--task", TASK,
            "--language", "cpp", "--strategy", "greedy", "--backend", "host", "--timing-cap", "0.1",
            "--llm", model_llm(Path(run_dir).parent / (Path(run_dir).name + ".state"), delay),
            "--parallel", str(parallel), "--max-rounds", str(rounds), "--run-dir", str(run_dir), *extra]
    return argv


def evaluations(run_dir):
    """(solution id, eval.json) of every attempt of a run folder, in order."""
    out = []
    for d in sorted((Path(run_dir) / "attempts").iterdir()):
        out.append((d.name.split("-", 1)[1], json.loads((d / "eval.json").read_text())))
    return out


def events(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "events.jsonl").read_text().splitlines() if line]


def node_names():
    """Node id -> the name the test gave it."""
    import ray
    return {n["NodeID"]: n["NodeName"] for n in ray.nodes()}


@unittest.skipUnless(HAVE_RAY, "ray is not installed (pip install ray)")
class ClusterSearchTest(unittest.TestCase):
    def setUp(self):
        self.work = Path(tempfile.mkdtemp(prefix="t-", dir=WORK))

    def test_a_search_spreads_over_both_nodes(self):
        run_dir = self.work / "run"
        p = subprocess.run(cli_run(run_dir), env=ENV, cwd=self.work, capture_output=True, text=True,
                           timeout=HANG_GUARD_S)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        evals = evaluations(run_dir)
        self.assertEqual(len(evals), 4)
        self.assertTrue(all(e["status"] == "passed" for _, e in evals))
        nodes = {e["metrics"]["ray_node"] for _, e in evals}
        self.assertEqual(nodes, {"head", "node2"}, "results name the node that measured them")
        for _, e in evals:
            m = e["metrics"]
            self.assertEqual(m["ray_slot"], "host0")
            self.assertEqual(m["ray_attempts"], 1)
            self.assertTrue(m["ray_family"].startswith("host:"))
            self.assertEqual(node_names()[m["ray_node_id"]], m["ray_node"])
        record = json.loads((run_dir / "ray.json").read_text())
        self.assertEqual(sorted(s["node_name"] for s in record["slots"]), ["head", "node2"])
        self.assertEqual(record["excluded"], [])
        self.assertEqual(record["lost"], [])
        self.assertEqual(record["family"], evals[0][1]["metrics"]["ray_family"])
        # Each actor's cache is its own, on its node: the references were computed there.
        for s in record["slots"]:
            self.assertIn("/ray/", s["cache_dir"])
            self.assertTrue(any(Path(s["cache_dir"]).joinpath("host").iterdir()))
        self.assertNotIn("credentials_on_nodes", record)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        self.assertEqual(manifest["device"]["count"], 2)
        self.assertIn("ksearch.ray:", p.stderr)  # one line per dispatch: solution -> node/slot

    def test_actors_never_hold_the_drivers_credentials(self):
        import ray
        with ksearch.ray.RayEvaluator(CLUSTER.address, backend="host") as pool:
            pids = [s["pid"] for s in pool.slots()]
            self.assertEqual(len(pids), 2)
            for pid in pids:  # the initial environment, which a candidate could read
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                self.assertNotIn(b"sk-test-never-on-a-node", environ)
                self.assertNotIn(b"OPENAI_API_KEY", environ)
            self.assertNotIn("credentials_on_nodes", pool.record)
        del ray

    def request(self, tag):
        """An evaluator callback's request for a correct scale3 kernel, as the library makes one."""
        task = ksearch.load_task(TASK)
        solution = {"name": tag, "task": task.name, "language": "cpp",
                    "sources": [{"path": "kernel.cpp", "content":
                                 f"#include <cstdint>\n// {tag}\nvoid scale3(const float* x, float* y, "
                                 "std::int64_t n) {\n  for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];\n}\n"}],
                    "launch_plan": {"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}}
        return ksearch.EvalRequest(task.name, json.dumps(task.spec), json.dumps(solution), f"{tag}0001",
                                   ksearch.Language.CPP, json.dumps({"only_workloads": []}))

    def test_a_hung_evaluation_is_retried_then_a_crashed_result(self):
        # A timeout far below one evaluation: every actor "hangs" on it.
        with ksearch.ray.RayEvaluator(CLUSTER.address, backend="host", timeout_s=0.05, straggler_factor=0,
                                      max_attempts=2) as pool:
            out = pool.batch_callback([self.request("hung")])[0]
            self.assertEqual(len(pool.record["lost"]), 2)
        self.assertEqual(out["status"], "crashed")
        self.assertIn("lost 2 times", out["log"])
        lost = out["metrics"]["ray_lost"]
        self.assertEqual(len(lost), 2)
        self.assertNotEqual(lost[0]["node"], lost[1]["node"])  # the retry went elsewhere
        self.assertTrue(all("no result after" in e["why"] for e in lost))

    def test_compiled_artifacts_travel_to_another_node(self):
        req = self.request("shipped")
        with ksearch.ray.RayEvaluator(CLUSTER.address, backend="host", straggler_factor=0,
                                      eval_options={"max_time_per_workload_s": 0.05}) as pool:
            first = pool.batch_callback([req])[0]["metrics"]
            second = pool.batch_callback([req])[0]["metrics"]  # the next free actor: the other node
        self.assertNotEqual(first["ray_node"], second["ray_node"])
        self.assertGreaterEqual(first["builds"], 1)
        self.assertEqual(first["ray_artifacts_received"], 0)
        self.assertGreaterEqual(second["ray_artifacts_received"], 1)
        self.assertGreaterEqual(second["compile_cache_hits"], 1, second)  # not compiled a second time
        self.assertEqual(pool.record["artifacts_shipped"], second["ray_artifacts_received"])

    def test_one_architecture_family_per_run(self):
        with self.assertRaises(ksearch.ray.NoEvaluatorError) as cm:
            ksearch.ray.RayEvaluator(CLUSTER.address, backend="host", family="sm_90a", start_timeout_s=300)
        self.assertIn("is not the run's sm_90a", str(cm.exception))

    def test_a_node_killed_mid_run_costs_one_retry(self):
        import ray
        node3 = CLUSTER.add_node("node3", resources={"node3": 1})
        killed = threading.Event()

        def kill_when_busy():
            # Mid-evaluation: once node3's actor runs a libksearch worker for the candidate.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if any(b"ksearch-worker" in _cmdline(p) for p in node3.pids()):
                    break
                time.sleep(0.05)
            node3.kill()
            killed.set()

        lost_to_node3 = []

        def on_dispatch(solution_id, slot):
            if slot["node_name"] == "node3" and not lost_to_node3:
                lost_to_node3.append(solution_id)
                threading.Thread(target=kill_when_busy, daemon=True).start()

        run_dir = self.work / "killed"
        try:
            self.search_while_a_node_dies(run_dir, on_dispatch)
        finally:
            node3.stop()
        self.assertTrue(killed.wait(60))
        self.assertEqual(len(lost_to_node3), 1)
        sid = lost_to_node3[0]
        evals = dict(evaluations(run_dir))
        self.assertEqual(len(evals), 6)
        m = evals[sid]["metrics"]
        self.assertEqual(evals[sid]["status"], "passed")
        self.assertEqual(m["ray_attempts"], 2, m)  # lost once, then measured elsewhere
        self.assertEqual(m["ray_lost"][0]["node"], "node3")
        self.assertIn(m["ray_node"], ("head", "node2"))
        record = json.loads((run_dir / "ray.json").read_text())
        self.assertEqual([e["solution_id"] for e in record["lost"]], [sid])
        node3_slot = [s for s in record["slots"] if s["node_name"] == "node3"]
        self.assertEqual(len(node3_slot), 1)
        self.assertIn("ended", node3_slot[0])
        # The journal has each candidate once, the retried one with its second attempt's result.
        evaluated = [e["solution_id"] for e in events(run_dir) if e["type"] == "evaluated"]
        self.assertEqual(sorted(evaluated), sorted(evals))
        deadline = time.monotonic() + 120  # Ray's health checks notice the dead raylet
        while any(n["Alive"] for n in ray.nodes() if n["NodeName"] == "node3") and time.monotonic() < deadline:
            time.sleep(0.5)
        self.assertEqual({n["NodeName"]: n["Alive"] for n in ray.nodes() if n["NodeName"] == "node3"},
                         {"node3": False})

    def search_while_a_node_dies(self, run_dir, on_dispatch):
        res = ksearch.ray.run_search(TASK, address=CLUSTER.address, backend="host", on_dispatch=on_dispatch,
                                     eval_options={"max_time_per_workload_s": 0.1}, language="cpp",
                                     strategy="greedy", parallel=3, budget={"max_rounds": 6}, run_dir=run_dir,
                                     llm=ksearch.LlmOptions.command(model_llm(self.work / "killed.state")[8:].split()))
        with res:
            self.assertEqual(res.stop_reason, "max_rounds")
            self.assertEqual(res.rounds, 6)

    def test_resume_after_the_driver_is_killed(self):
        run_dir = self.work / "driver"
        argv = cli_run(run_dir, rounds=8, parallel=2, delay=1.0)
        driver = subprocess.Popen(argv, env=ENV, cwd=self.work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + HANG_GUARD_S
            while time.monotonic() < deadline and driver.poll() is None:
                if (run_dir / "events.jsonl").exists() and \
                        sum(e["type"] == "evaluated" for e in events(run_dir)) >= 2:
                    break
                time.sleep(0.1)
            self.assertIsNone(driver.poll(), "the run ended before the driver could be killed")
            os.killpg(driver.pid, signal.SIGKILL)  # the driver and its model processes
            driver.wait(timeout=60)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait()
            driver.stdout.close()
        # Ray ends the actors of a driver that is gone.
        old_actors = [s["pid"] for s in json.loads((run_dir / "ray.json").read_text())["slots"]]
        self.assertEqual(len(old_actors), 2)
        deadline = time.monotonic() + 120
        while any(_alive(p) for p in old_actors) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertFalse(any(_alive(p) for p in old_actors), "the dead driver's actors are gone")
        before = {e["solution_id"] for e in events(run_dir) if e["type"] == "evaluated"}
        self.assertGreaterEqual(len(before), 2)
        self.assertLess(len(before), 8)
        p = subprocess.run([sys.executable, "-m", "ksearch.ray", "resume", str(run_dir), "--address", CLUSTER.address],
                           env=ENV, cwd=self.work, capture_output=True, text=True, timeout=HANG_GUARD_S)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        dispatched = {line.split()[1] for line in p.stderr.splitlines() if " -> " in line and
                      line.startswith("ksearch.ray: ")}
        self.assertTrue(dispatched)
        self.assertEqual(dispatched & before, set(), "journalled candidates are not evaluated again")
        evaluated = [e["solution_id"] for e in events(run_dir) if e["type"] == "evaluated"]
        self.assertEqual(len(evaluated), 8)
        self.assertEqual(len(set(evaluated)), 8)
        self.assertIn("replayed from the run's journal", p.stdout)
        record = json.loads((run_dir / "ray.json").read_text())
        self.assertEqual(len(record["earlier"]), 1)  # the killed driver's record, kept
        self.assertEqual(record["config"]["backend"], "host")

    def test_gpus_lists_every_node(self):
        p = subprocess.run([sys.executable, "-m", "ksearch.ray", "gpus", "--address", CLUSTER.address, "--json"],
                           env=ENV, capture_output=True, text=True, timeout=HANG_GUARD_S)
        self.assertEqual(p.returncode, 0, p.stderr)
        nodes = {n["node_name"]: n for n in json.loads(p.stdout) if "error" not in n}
        self.assertLessEqual({"head", "node2"}, set(nodes))
        for n in nodes.values():
            self.assertEqual(n["ray_gpus"], 0)
            self.assertEqual(n["gpus"], [])  # this machine has no GPU
            self.assertTrue(n["cpu"])

    def test_bad_input_is_a_clear_error(self):
        def run(*args):
            return subprocess.run([sys.executable, "-m", "ksearch.ray", *args], env=ENV, cwd=self.work,
                                  capture_output=True, text=True, timeout=HANG_GUARD_S)
        p = run("run", "--task", TASK)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--address is required", p.stderr)
        p = run("run", "--task", TASK, "--address", CLUSTER.address, "--seeds", "1", "--llm", "offline")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--seeds must be 2 to 64", p.stderr)
        p = run("run", "--task", TASK, "--address", CLUSTER.address, "--memory-limit", "lots", "--llm", "offline")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--memory-limit needs a size", p.stderr)
        p = run("resume", str(self.work), "--address", CLUSTER.address)
        self.assertEqual(p.returncode, 1)
        self.assertIn("ray.json not found", p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        with self.assertRaises(ValueError):
            ksearch.ray.RayEvaluator(CLUSTER.address, backend="gpu")


class UnitTest(unittest.TestCase):
    """The pieces that need no cluster."""

    def test_sizes(self):
        self.assertEqual(cli._size("4M", "--x"), 4 << 20)
        self.assertEqual(cli._size("2GiB", "--x"), 2 << 30)
        self.assertEqual(cli._size("512", "--x"), 512)
        for bad in ("", "M", "-1", "0", "3Q"):
            with self.assertRaises(cli.UsageError):
                cli._size(bad, "--x")

    def test_evolve_flags_reach_the_search_options(self):
        a = cli._parser().parse_args(["run", "--task", "t", "--llm", "offline", "--evolve-islands", "2",
                                      "--evolve-migration-size", "0", "--evolve-exploit-ratio", "0.25"])
        evolve = cli._search_fields(a)["evolve"]
        self.assertEqual(evolve, {"islands": 2, "migration_size": 0, "exploit_ratio": 0.25})
        o = ksearch.SearchOptions(evolve=evolve)
        self.assertEqual((o.evolve.islands, o.evolve.migration_size, o.evolve.island_size), (2, 0, 8))
        with self.assertRaises(cli.UsageError):
            cli._parser().parse_args(["run", "--task", "t", "--evolve-islands", "0"])

    def test_scrub_environment(self):
        env = {"PATH": "/bin", "OPENAI_API_KEY": "k", "HF_TOKEN": "t", "RAY_ADDRESS": "a", "CUDA_VISIBLE_DEVICES": "0"}
        self.assertEqual(sorted(_actor.scrub_environment(env)), ["HF_TOKEN", "OPENAI_API_KEY"])
        self.assertEqual(sorted(env), ["CUDA_VISIBLE_DEVICES", "PATH", "RAY_ADDRESS"])

    def test_artifact_paths(self):
        self.assertTrue(_actor._safe_relpath("host/0123.so"))
        self.assertTrue(_actor._safe_relpath("cuda/sm_90a/ab/abcd.cubin"))
        for bad in ("/etc/passwd", "host/../../x", "refs/a", "cuda/pch/x", "x.so"):
            self.assertFalse(_actor._safe_relpath(bad), bad)

    def test_family(self):
        self.assertEqual(_actor.family_of({"backend": "cuda", "arch": "sm_90a"}), "sm_90a")
        self.assertEqual(_actor.family_of({"backend": "host", "machine": "x86_64", "cpu": "EPYC"}),
                         "host:x86_64:EPYC")

    def test_a_work_folder_too_long_for_rays_sockets(self):
        # Ray's Unix socket paths under the folder would pass 107 bytes: said at once, nothing started.
        deep = Path(tempfile.gettempdir()) / ("d" * 60)
        with self.assertRaisesRegex(ValueError, "too long for Ray's socket paths"):
            _local.LocalCluster(deep)
        self.assertFalse(deep.exists())

    def test_probe_without_a_gpu(self):
        p = _actor.probe_node()
        self.assertIsInstance(p["gpus"], list)
        self.assertTrue(p["cpu"])


def _alive(pid):
    return _local._alive(pid)


def _cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


if __name__ == "__main__":
    if not HAVE_RAY:
        print("test_ray: ray is not installed (pip install ray): skipped", file=sys.stderr)
        sys.exit(77)
    unittest.main()
