"""Tests of ksearch.tracking: the CSV of attempts and the Weights & Biases bridge
(in W&B's offline mode, read back from the .wandb file W&B itself writes), on
real runs made with the ksearch CLI: a world-model run replayed from the
checked-in transcript, and greedy runs against the local OpenAI-compatible
test server (whose answers carry token usage), one of them followed live.

Needs $KSEARCH_CLI and $KSEARCH_TEST_SERVER (set by ctest). The W&B tests skip,
saying so, where the wandb package is not installed (tests/run_tests.sh
installs it with pip when it can)."""
import base64
import contextlib
import csv
import glob
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE / "bindings" / "python"))
from ksearch import tracking  # noqa: E402

KSEARCH = os.environ.get("KSEARCH_CLI", "")
SERVER = os.environ.get("KSEARCH_TEST_SERVER", "")
TASK = SOURCE / "tests" / "fixtures" / "tasks" / "scale3"
TRANSCRIPT = SOURCE / "tests" / "fixtures" / "wm_e2e" / "transcript.jsonl"
try:
    import wandb  # noqa: F401
    from wandb.proto import wandb_internal_pb2
    HAVE_WANDB = True
except ImportError:
    HAVE_WANDB = False
    print("test_tracking: wandb is not installed (pip install wandb): the W&B bridge tests are skipped",
          file=sys.stderr)


def jsonl(path):
    return [json.loads(l) for l in Path(path).read_text().split("\n")[:-1] if l]


def kernel(reps, factor="3.0f", broken=False):
    sig = "std::int64_t n" + ("" if broken else ")")
    return (f"Here is the kernel.\n\n```cpp kernel.cpp\n#include <cstdint>\n"
            f"void scale3(const float* x, float* y, {sig} {{\n"
            f"  for (int r = 0; r < {reps}; ++r) {{\n    for (std::int64_t i = 0; i < n; ++i) y[i] = {factor} * x[i];\n"
            f"    asm volatile(\"\" ::: \"memory\");\n  }}\n}}\n```\n```json launch_plan\n"
            '{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n')


ANSWERS = [kernel(6), kernel(2), kernel(1, "2.0f"), kernel(1, broken=True), kernel(1)]


class Server:
    """With gate, answer i is held until the file gate/answer-i exists: the test sets the run's pace."""

    def __init__(self, work, gate=None):
        script = [{"kind": "answer", "text": t, "usage": {"input": 500 * (i + 1), "output": 40 + i}}
                  for i, t in enumerate(ANSWERS)]
        if gate:
            for i, b in enumerate(script):
                b["wait_file"] = str(gate / f"answer-{i}")
        (work / "script.json").write_text(json.dumps(script))
        self.p = subprocess.Popen([SERVER, "--script", str(work / "script.json")], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        line = self.p.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"test server did not start: {line!r}")
        self.url = line.split("listening on", 1)[1].strip()

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=10)
        self.p.stdout.close()


def greedy_cmd(url, run_dir):
    return [KSEARCH, "run", "--task", str(TASK), "--language", "cpp", "--strategy", "greedy", "--model", "gpt-5.2",
            "--base-url", url, "--max-rounds", str(len(ANSWERS)), "--timing-cap", "0.2", "--quiet",
            "--run-dir", str(run_dir)]


def wandb_records(wandb_dir, timeout=300):
    """The records of the one offline run under wandb_dir, read from W&B's own log file. W&B's service
    writes it in the background, after finish() returns: wait for its exit record (the timeout is a
    safety net; a busy machine may take long)."""
    deadline = time.monotonic() + timeout
    while True:
        files = glob.glob(str(Path(wandb_dir) / "wandb" / "offline-run-*" / "run-*.wandb"))
        assert len(files) <= 1, files
        try:
            records = read_wandb_log(files[0]) if files else []
        except Exception:  # a record half written
            records = []
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def read_wandb_log(path):
    """A LevelDB-style log of protobuf Records: a 7-byte file header, 32 KiB blocks, 7-byte chunk headers."""
    data = Path(path).read_bytes()
    ident, _magic, _version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B", ident
    pos, block, buf, out = 7, 32768, b"", []
    while pos < len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            pos += left
            continue
        buf += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            r = wandb_internal_pb2.Record()
            r.ParseFromString(bytes(buf))
            out.append(r)
            buf = b""
    return out


def history(records):
    rows = []
    for r in records:
        if r.WhichOneof("record_type") == "history":
            rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item})
    return rows


def artifacts(records):
    return [r.artifact for r in records if r.WhichOneof("record_type") == "artifact"]


def config_of(records):
    """The W&B run's config, as its run and config records set it."""
    config = {}
    for r in records:
        if r.WhichOneof("record_type") == "run":
            config.update({i.key: json.loads(i.value_json) for i in r.run.config.update})
        if r.WhichOneof("record_type") == "config":
            config.update({i.key: json.loads(i.value_json) for i in r.config.update})
    return config


def csv_rows(path):
    """The complete rows of a CSV being written (a row may span lines: count parsed rows)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return 0
    text = text[:text.rfind("\n") + 1]
    try:
        return len(list(csv.DictReader(io.StringIO(text))))
    except csv.Error:  # a quoted field cut by the write in progress
        return 0


def md5_b64(text):
    return base64.b64encode(hashlib.md5(text.encode()).digest()).decode()


def cli_work_folder(prefix):
    """A fresh folder for a test class that drives the CLI; skips the class without the built programs."""
    if not KSEARCH or not SERVER:
        raise unittest.SkipTest("KSEARCH_CLI and KSEARCH_TEST_SERVER must name the built programs")
    return Path(tempfile.mkdtemp(prefix=prefix))


class TrackingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = cli_work_folder("ksearch-tracking-")
        cls.env = dict(os.environ, KSEARCH_CACHE_DIR=str(cls.work / "cache"), OPENAI_API_KEY="sk-test-tracking")
        # A world-model run from the checked-in transcript (tree snapshots, passing and failing rounds).
        cls.wm = cls.work / "wm"
        subprocess.run([KSEARCH, "run", "--task", str(TASK), "--language", "cpp", "--llm", f"replay:{TRANSCRIPT}",
                        "--max-rounds", "10", "--wm-stagnation-window", "2", "--timing-cap", "0.2", "--quiet",
                        "--run-dir", str(cls.wm)], env=cls.env, check=True, capture_output=True, timeout=600)
        # A greedy run over HTTP with token usage and a priced model.
        server = Server(cls.work)
        try:
            cls.http = cls.work / "http"
            subprocess.run(greedy_cmd(server.url, cls.http), env=cls.env, check=True, capture_output=True, timeout=600)
        finally:
            server.stop()

    @classmethod
    def tearDownClass(cls):
        if HAVE_WANDB:
            wandb.teardown()  # end W&B's service now, not in an exit hook
        shutil.rmtree(cls.work, ignore_errors=True)

    def check_csv(self, path, run):
        rows = list(csv.DictReader(io.StringIO(Path(path).read_text())))
        index = jsonl(run / "attempts.jsonl")
        self.assertEqual([(int(r["seq"]), int(r["round"]), r["status"], r["solution_id"]) for r in rows],
                         [(a["seq"], a["round"], a["status"], a["solution_id"]) for a in index])
        best = 0.0
        for r, a in zip(rows, index):
            metrics = json.loads((run / r["attempt_dir"] / "eval.json").read_text()).get("metrics", {})
            adopted = "recorded_from" in metrics  # an evaluation adopted from another run counts for the best
            if a["status"] == "passed":
                self.assertAlmostEqual(float(r["latency_ms"]), a["latency_ms"], places=12)
                self.assertAlmostEqual(float(r["score"]), 1 / a["latency_ms"], places=9)
                if (a["round"] > 0 or adopted) and (best == 0 or a["latency_ms"] < best):
                    best = a["latency_ms"]
            else:
                self.assertTrue(r["reason"].startswith(a["status"]), r["reason"])
                self.assertEqual(r["score"], "")
            self.assertAlmostEqual(float(r["best_latency_ms"] or 0), best, places=12)
            self.assertTrue((run / r["attempt_dir"] / "eval.json").is_file())
        # Tokens and cost per round add up to the events' llm_call usage.
        # Calls after the last evaluated round (world-model edits at the end) belong to no row.
        calls, pending = [], []
        for e in jsonl(run / "events.jsonl"):
            if e["type"] == "evaluated":
                calls += pending
                pending = []
            elif e["type"] == "llm_call":
                pending.append(e)
        self.assertEqual(sum(int(r["input_tokens"] or 0) for r in rows), sum(e["usage"]["input_tokens"] for e in calls))
        self.assertEqual(sum(int(r["llm_calls"] or 0) for r in rows), len(calls))
        return rows

    def test_csv_without_wandb(self):
        # The CSV needs no wandb: run it in a Python where importing wandb fails.
        out = self.work / "http.csv"
        code = ("import sys; sys.modules['wandb'] = None; sys.path.insert(0, %r); from ksearch import tracking; "
                "sys.exit(tracking.main(sys.argv[1:]))" % str(SOURCE / "bindings" / "python"))
        r = subprocess.run([sys.executable, "-c", code, str(self.http), "--csv", str(out)], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = self.check_csv(out, self.http)
        self.assertEqual([r["status"] for r in rows], ["passed", "passed", "incorrect", "compile_error", "passed"])
        self.assertEqual([int(r["input_tokens"]) for r in rows], [500, 1000, 1500, 2000, 2500])
        self.assertGreater(float(rows[-1]["cum_cost_usd"]), 0)
        m = json.loads((self.http / "manifest.json").read_text())
        self.assertAlmostEqual(float(rows[-1]["cum_cost_usd"]), m["totals"]["llm_usage"]["cost_usd"], places=9)
        # --wandb there: a clear message, exit 1, no traceback.
        r = subprocess.run([sys.executable, "-c", code, str(self.http), "--wandb"], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 1)
        self.assertIn("pip install wandb", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_csv_world_model_run_and_bad_folder(self):
        rows = self.check_csv(self._csv(self.wm), self.wm)
        self.assertEqual(len(rows), 10)
        r = subprocess.run([sys.executable, "-m", "ksearch.tracking", str(self.work / "nothing"), "--csv",
                            str(self.work / "x.csv")], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=str(SOURCE / "bindings" / "python")))
        self.assertEqual(r.returncode, 1)
        self.assertIn("holds no run", r.stderr)

    def test_csv_counts_an_adopted_evaluation_in_the_best(self):
        # A run continued from the world-model run: its recorded evaluation is adopted (round 0, not
        # counted) and is the best so far, as the run itself keeps it.
        run = self.work / "continued"
        subprocess.run([KSEARCH, "run", "--task", str(TASK), "--language", "cpp", "--llm", f"replay:{TRANSCRIPT}",
                        "--on-divergence", "skip", "--max-rounds", "2", "--wm-stagnation-window", "2",
                        "--timing-cap", "0.2", "--quiet", "--continue-from-solution", str(self.wm),
                        "--run-dir", str(run)], env=self.env, check=True, capture_output=True, timeout=600)
        rows = self.check_csv(self._csv(run), run)
        self.assertEqual((rows[0]["round"], rows[0]["counted"]), ("0", "0"))
        seed_ms = json.loads((self.wm / "best.json").read_text())["eval"]["latency_ms"]
        self.assertAlmostEqual(float(rows[0]["best_latency_ms"]), seed_ms, places=12)
        self.assertAlmostEqual(float(rows[-1]["best_latency_ms"]), seed_ms, places=12)  # 100 and 10 ms after it

    def test_links_in_a_run_folder_are_not_followed(self):
        # A run folder may come from someone else: a link in it must not upload a private file.
        run = self.work / "linked"
        shutil.copytree(self.http, run, symlinks=True)
        secret = self.work / "id_ed25519"
        secret.write_text("FAKE-PRIVATE-KEY")
        folder = tracking.RunFolder(run)
        a = folder.attempts()[0]
        d = folder.attempt_dir(a)
        self.assertEqual([p for p, _ in folder.sources(a)], ["kernel.cpp"])
        (d / "kernel.cpp").unlink()
        (d / "kernel.cpp").symlink_to(secret)
        sol = json.loads((d / "solution.json").read_text())
        sol["sources"].append({"path": "up.cpp", "file": "../../../id_ed25519"})
        (d / "solution.json").write_text(json.dumps(sol))
        shutil.move(run / "events.jsonl", self.work / "events-elsewhere.jsonl")
        (run / "events.jsonl").symlink_to(self.work / "events-elsewhere.jsonl")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(folder.sources(a), [])
            self.assertEqual(folder.events(), [])
        self.assertIn(f"{d / 'kernel.cpp'} is a symbolic link", err.getvalue())
        self.assertIn("events.jsonl is a symbolic link", err.getvalue())
        self.assertIn("is not a path inside", err.getvalue())

    def _csv(self, run):
        out = self.work / f"{run.name}-{time.time_ns()}.csv"
        tracking.replay(run, csv_path=out, quiet=True)
        return out

    def _wandb(self, run, **kw):
        d = self.work / f"wandb-{run.name}-{time.time_ns()}"
        d.mkdir()
        env = {"WANDB_MODE": "offline", "WANDB_DIR": str(d), "WANDB_SILENT": "true",
               "WANDB_DATA_DIR": str(d / "data"), "WANDB_CACHE_DIR": str(d / "cache"), "WANDB_CONFIG_DIR": str(d / "cfg")}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            # W&B's service reads WANDB_DIR once per process: name the folder per run.
            counts = tracking.replay(run, use_wandb=True, project="ksearch-test", quiet=True, wandb_dir=str(d), **kw)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return counts, wandb_records(d)

    def check_wandb(self, run, records):
        index = jsonl(run / "attempts.jsonl")
        task = json.loads((run / "manifest.json").read_text())["task"]["name"]
        counted = [a for a in index if a["round"] > 0]
        rows = history(records)
        # One history row per round, at step = round, with K-Search's names.
        self.assertEqual([r["_step"] for r in rows], [a["round"] for a in counted])
        best = None
        for r, a in zip(rows, counted):
            score = r[f"{task}/generate/inv_latency_ms"]
            if a["status"] == "passed":
                self.assertAlmostEqual(score, 1 / a["latency_ms"], places=9)
                best = max(best or 0, 1 / a["latency_ms"])
            else:
                self.assertIsNone(score)
            self.assertAlmostEqual(r[f"{task}/generate/best_inv_latency_ms"] or 0, best or 0, places=9)
            self.assertEqual(r[f"{task}/generate/passed"], int(a["status"] == "passed"))
        # One artifact per passing round, with the files K-Search puts there.
        arts = artifacts(records)
        passing = [a for a in counted if a["status"] == "passed"]
        self.assertEqual([a.name for a in arts],
                         [f"{tracking._safe_name(task)[:32]}_r{a['round']}_{a['solution_id']}_code" for a in passing])
        transcript = [e for e in jsonl(run / "transcript.jsonl") if e["kind"] in ("generate", "improve", "debug")]
        for art, a in zip(arts, passing):
            self.assertEqual(art.type, "generated-code")
            entries = {e.path: e for e in art.manifest.contents}
            self.assertTrue({"kernel.cpp", "launch_plan.json", "raw_code.txt", "eval/round_summary.txt",
                             "eval/eval.json"} <= set(entries), sorted(entries))
            code = (run / "attempts" / f"{a['seq']:04d}-{a['solution_id']}" / "kernel.cpp").read_text()
            self.assertEqual(entries["kernel.cpp"].digest, md5_b64(code))
            # raw_code.txt is the model's answer that holds this code, word for word.
            answers = [e["response"]["text"] for e in transcript if code.strip() in e["response"]["text"]]
            self.assertTrue(answers)
            self.assertIn(entries["raw_code.txt"].digest, [md5_b64(t) for t in answers])
        return rows, arts

    @unittest.skipUnless(HAVE_WANDB, "wandb is not installed (pip install wandb)")
    def test_wandb_world_model_run(self):
        counts, records = self._wandb(self.wm)
        rows, arts = self.check_wandb(self.wm, records)
        self.assertEqual(counts["steps"], 10)
        self.assertEqual(counts["artifacts"], len(arts))
        self.assertGreaterEqual(len(arts), 3)
        for art in arts:  # the tree the round's action came from
            self.assertIn("wm/world_model.json", {e.path for e in art.manifest.contents})
        config = config_of(records)
        self.assertEqual(config["task"], "tests/scale3")
        self.assertEqual(config["max_opt_rounds"], 10)
        self.assertEqual(config["enable_world_model"], True)
        self.assertEqual(config["wm_stagnation_window"], 2)
        self.assertEqual(config["generator"]["language"], "cpp")

    @unittest.skipUnless(HAVE_WANDB, "wandb is not installed (pip install wandb)")
    def test_wandb_http_run_tokens(self):
        counts, records = self._wandb(self.http)
        rows, arts = self.check_wandb(self.http, records)
        self.assertEqual([r["tests/scale3/llm/input_tokens"] for r in rows], [500, 1000, 1500, 2000, 2500])
        self.assertEqual(len(arts), 3)

    def test_follow_a_live_run(self):
        """--follow tails a run in progress and ends by itself once the run ends. The test lets the
        model answer one round at a time: round i+1's answer is held until the follower has written
        round i's row, so every row but the last appears while the run waits, whatever the speed."""
        gate = self.work / "live-gate"
        gate.mkdir()
        server = Server(self.work, gate=gate)
        live = self.work / "live"
        out = self.work / "live.csv"
        wdir = self.work / "wandb-live"
        wdir.mkdir()
        env = dict(self.env, PYTHONPATH=str(SOURCE / "bindings" / "python"), WANDB_MODE="offline",
                   WANDB_DIR=str(wdir), WANDB_SILENT="true", WANDB_DATA_DIR=str(wdir / "data"),
                   WANDB_CACHE_DIR=str(wdir / "cache"), WANDB_CONFIG_DIR=str(wdir / "cfg"))
        run = follow = None

        def wait_until(what, cond, limit=300):
            # A safety net against a hang, not a measurement: a correct run never comes near it.
            deadline = time.monotonic() + limit
            while not cond():
                if time.monotonic() > deadline:
                    self.fail(f"{what}: not after {limit} s")
                time.sleep(0.05)

        try:
            run = subprocess.Popen(greedy_cmd(server.url, live), env=self.env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
            wait_until("the run folder", lambda: (live / "manifest.json").exists() or run.poll() is not None)
            self.assertIsNone(run.poll(), "the run ended before its first answer")
            follow = subprocess.Popen([sys.executable, "-m", "ksearch.tracking", str(live), "--csv", str(out), "--follow",
                                       "--poll", "0.2"] + (["--wandb", "--project", "ksearch-test"] if HAVE_WANDB else []),
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(len(ANSWERS)):
                (gate / f"answer-{i}").touch()
                if i + 1 < len(ANSWERS):
                    # The run now waits for answer i+1, so this row can only come from following it live.
                    wait_until(f"round {i + 1}'s CSV row while the run waits for the next answer",
                               lambda: csv_rows(out) > i or follow.poll() is not None or run.poll() is not None)
                    if run.poll() is not None:
                        self.fail(f"the run ended after round {i + 1} of {len(ANSWERS)}: {run.communicate()[1]}")
                    if follow.poll() is not None:
                        self.fail(f"--follow ended while the run was going: {follow.communicate()[1]}")
                    self.assertEqual(csv_rows(out), i + 1)
            _, run_err = run.communicate(timeout=300)
            self.assertEqual(run.returncode, 0, run_err)
            _, err = follow.communicate(timeout=300)  # it ends by itself; a hang fails here
            self.assertEqual(follow.returncode, 0, err)
        finally:
            for p in (run, follow):
                if p and p.poll() is None:
                    p.kill()
                    p.wait()
            server.stop()
        self.assertIn("round 1: passed", err)
        rows = self.check_csv(out, live)
        self.assertEqual(len(rows), len(ANSWERS))
        if HAVE_WANDB:
            self.check_wandb(live, wandb_records(wdir))

    def test_torn_last_line_is_left_out(self):
        torn = self.work / "torn"
        shutil.copytree(self.wm, torn)
        with open(torn / "attempts.jsonl", "a") as f:
            f.write('{"seq": 10, "round": 11, "act')
        rows = list(csv.DictReader(io.StringIO(self._csv(torn).read_text())))
        self.assertEqual(len(rows), 10)


if __name__ == "__main__":
    unittest.main(verbosity=2)
