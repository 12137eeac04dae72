"""Tests of the Python bindings (ctypes over the C ABI) on a host task."""
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE / "bindings" / "python"))
import ksearch  # noqa: E402

TASK = str(SOURCE / "tests" / "fixtures" / "tasks" / "scale3")

GOOD = """```cpp kernel.cpp
#include <cstdint>
void scale3(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];
}
```
```json launch_plan
{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}
```
"""


class BindingsTest(unittest.TestCase):
    def setUp(self):
        self.work = Path(tempfile.mkdtemp(prefix="ksearch-py-"))

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_version(self):
        self.assertRegex(ksearch.version(), r"^\d+\.\d+\.\d+$")

    def test_task_and_evaluate(self):
        task = ksearch.load_task(TASK)
        self.assertEqual(task.name, "tests/scale3")
        self.assertEqual([w["name"] for w in task.spec["workloads"]], ["small", "large"])
        ev = ksearch.Evaluator("host")
        good = ev.evaluate(task, GOOD)
        self.assertEqual(good["status"], "passed")
        self.assertGreater(good["latency_ms"], 0)
        wrong = ev.evaluate(task, GOOD.replace("3.0f", "2.0f"))
        self.assertEqual(wrong["status"], "incorrect")
        with self.assertRaises(ksearch.KsearchError) as cm:
            ev.evaluate(task, "no code")
        self.assertIn("source", str(cm.exception))

    def test_bad_arguments_are_clear_errors(self):
        # ctypes would wrap an out-of-range int (2**32 + 1 rounds ran as 1),
        # cut a string at a NUL, and fail on a wrong type with an AttributeError.
        def run(**kw):
            args = dict(llm="offline", language="cpp", run_dir=self.work / "never")
            args.update(kw)
            return ksearch.run_search(args.pop("task", TASK), **args)
        for kw, exc, words in [({"max_rounds": 2**32 + 1}, ValueError, "max_rounds"),
                               ({"seed": -1}, ValueError, "seed"),
                               ({"parallel": 1.5}, TypeError, "parallel"),
                               ({"task": 5}, TypeError, "task"),
                               ({"task": TASK + "\0x"}, ValueError, "NUL"),
                               ({"llm": 5}, TypeError, "llm")]:
            with self.assertRaises(exc, msg=kw) as cm:
                run(**kw)
            self.assertIn(words, str(cm.exception))
        self.assertFalse((self.work / "never").exists())
        with self.assertRaises(ValueError):
            ksearch.resume_search(self.work, max_rounds=-2**40)
        with self.assertRaises(TypeError):
            ksearch.load_task(None)
        ev = ksearch.Evaluator("host")
        with self.assertRaisesRegex(TypeError, "ksearch.Task"):
            ev.evaluate(TASK, GOOD)
        ev.close()
        with self.assertRaisesRegex(ValueError, "closed"):
            ev.evaluate(ksearch.load_task(TASK), GOOD)

    def test_unknown_task_is_a_clear_error(self):
        with self.assertRaises(ksearch.KsearchError) as cm:
            ksearch.load_task("no/such/task")
        self.assertIn("no/such/task", str(cm.exception))

    def test_search_with_python_model_and_resume(self):
        prompts = []

        def model(kind, system, prompt):
            prompts.append(kind)
            if len(prompts) == 1:
                raise RuntimeError("model outage")  # a failed generation; the search goes on
            return GOOD

        rounds = []
        run_dir = self.work / "run"
        res = ksearch.run_search(TASK, llm=model, strategy="greedy", language="cpp", max_rounds=2,
                                 backend="host", timing_cap_s=0.2, run_dir=run_dir,
                                 progress=lambda r: rounds.append(r["status"]))
        self.assertEqual(res.rounds, 2)
        self.assertEqual(rounds, ["generation_failed", "passed"])
        self.assertEqual(prompts, ["generate", "generate"])
        self.assertIsNotNone(res.best_latency_ms)
        self.assertIn("3.0f * x[i]", res.best_solution["sources"][0]["content"])

        # Resume with a larger budget: the two recorded rounds are replayed.
        res2 = ksearch.resume_search(run_dir, max_rounds=3, llm=model)
        self.assertEqual(res2.rounds, 3)
        self.assertEqual(len(prompts), 3)  # only the new round asked the model

    def test_unencodable_answer_is_a_reported_failed_generation(self):
        # A str with a lone surrogate cannot be encoded: the error must reach
        # llm_errors, not escape the ctypes callback (printed and lost).
        res = ksearch.run_search(TASK, llm=lambda k, s, p: GOOD + "\udc80", strategy="greedy", language="cpp",
                                 max_rounds=1, backend="host", timing_cap_s=0.2, run_dir=self.work / "surrogate")
        self.assertEqual(res.rounds, 1)
        self.assertEqual(len(res.llm_errors), 1)
        self.assertIsInstance(res.llm_errors[0], UnicodeEncodeError)

    def test_keyboard_interrupt_in_llm_stops_the_run_and_is_raised(self):
        # Not an Exception: it used to escape into ctypes, be printed and
        # dropped, and the run went on to its full budget.
        calls = []

        def model(kind, system, prompt):
            calls.append(kind)
            if len(calls) == 2:
                raise KeyboardInterrupt()
            return GOOD
        run_dir = self.work / "interrupted"
        with self.assertRaises(KeyboardInterrupt):
            ksearch.run_search(TASK, llm=model, strategy="greedy", language="cpp", max_rounds=4,
                               backend="host", timing_cap_s=0.2, run_dir=run_dir)
        self.assertEqual(len(calls), 2)
        res = ksearch.resume_search(run_dir, llm=lambda k, s, p: GOOD)  # the run stays resumable
        self.assertEqual(res.rounds, 4)

    def test_keyboard_interrupt_in_progress_is_raised(self):
        def progress(r):
            raise KeyboardInterrupt()
        with self.assertRaises(KeyboardInterrupt):
            ksearch.run_search(TASK, llm=lambda k, s, p: GOOD, strategy="greedy", language="cpp", max_rounds=3,
                               backend="host", timing_cap_s=0.2, run_dir=self.work / "interrupted2",
                               progress=progress)

    def test_failing_progress_function_is_reported(self):
        def progress(r):
            raise ValueError("bug in my progress function")
        with self.assertRaises(ValueError):
            ksearch.run_search(TASK, llm=lambda k, s, p: GOOD, strategy="greedy", language="cpp",
                               max_rounds=3, backend="host", timing_cap_s=0.2, run_dir=self.work / "bad",
                               progress=progress)

    def test_progress_can_stop(self):
        res = ksearch.run_search(TASK, llm=lambda k, s, p: GOOD, strategy="greedy", language="cpp",
                                 max_rounds=5, backend="host", timing_cap_s=0.2, run_dir=self.work / "stop",
                                 progress=lambda r: False)
        self.assertEqual(res.stop_reason, "cancelled")
        self.assertEqual(res.rounds, 1)


if __name__ == "__main__":
    unittest.main()
