// Python candidates (language python) on the host backend, through the real
// run worker and the real Python candidate process: PyTorch on the CPU. Each
// way a Python candidate can fail gets its own status and words, and each
// hack the GPUMode and KernelBench communities list is refused
// (docs/python-candidates.md). Needs a Python with PyTorch in
// $KSEARCH_PYTHON (tests/CMakeLists.txt finds one); without it, only the
// missing-interpreter error is checked.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "eval/backend.hpp"
#include "eval/host/candidate_process.hpp"
#include "eval/host/zygote.hpp"
#include "eval/isolation/seccomp.hpp"
#include "eval/protocol.hpp"
#include "eval/python/embedded.hpp"
#include "eval/python/python_program.hpp"
#include "fixtures.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "phase_checks.hpp"
#include "support/test_util.hpp"

using namespace ks;
using ks::eval::RunError;
namespace host = ks::eval::host;

namespace {

bool have_torch() {
  const char* p = std::getenv("KSEARCH_PYTHON");
  return p && *p && std::string(p) != "NONE" && std::string(p) != "/nonexistent/python-for-ksearch";
}

TaskSpec python_vadd_task() {
  TaskSpec t = test::vadd_task("2*N", "test/vadd-python");
  t.languages.push_back(Language::python);
  t.validate();
  return t;
}

// A python solution of `task`: one main.py.
Solution python_solution(const std::string& task, const std::string& code, const std::string& name) {
  Solution s;
  s.name = name;
  s.task = task;
  s.language = Language::python;
  s.sources = {{"main.py", code}};
  return s.finalize();
}

Solution py(const std::string& code, const std::string& name) {
  return python_solution("test/vadd-python", code, name);
}

EvaluatorConfig config(const std::string& name) {
  EvaluatorConfig c = test::test_config(test::scratch_dir(name).string());
  // Importing PyTorch is part of the first workload's time; on a loaded
  // machine it takes seconds.
  c.options.run_timeout_s = 60;
  return c;
}

struct Case {
  const char* name;
  std::string code;
  EvalStatus status;
  const char* words;  // in the result's message (first failing workload, or the log)
};

std::string message_of(const EvalResult& r) {
  std::string m = r.log;
  for (const auto& w : r.workloads) m += "\n" + w.message;
  return m;
}

const char* kGood = "import torch\n\ndef run(X, Y):\n    return X + 2 * Y\n";

// The load request, then the import request (where the module runs): the
// import's answer, or the load's when that failed.
host::CandidateProcess::Answer import_module(host::CandidateProcess& process, const Json& load) {
  auto loaded = process.ask(host::CandidateProcess::Request::load, load.dump());
  if (loaded.error) return loaded;
  return process.ask(host::CandidateProcess::Request::import, "");
}

// Each case's verdict: its status, and its words in the message; and its
// phases, whatever the verdict (phase_checks.hpp).
void check_cases(Evaluator& ev, const Task& task, const std::vector<Case>& cases,
                 Solution (*make)(const std::string&, const std::string&) = py) {
  for (const auto& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    EvalResult r;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_NOTHROW(r = ev.evaluate(task, make(c.code, c.name)));
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(r.to_json().dump(2));
    CHECK(r.status == c.status);
    CHECK(message_of(r).find(c.words) != std::string::npos);
    const Json phases = test::checked_phases(r, wall);
    // The candidate's process starts and imports inside the load phase.
    CHECK(phases.get_number("load_s") >= r.metrics.get_number("process_start_s"));
    if (r.passed()) CHECK(phases.get_number("checks_s") > 0);
  }
}

}  // namespace

TEST_CASE("python candidates: right ones pass, and every failure has its own status and words") {
  if (!have_torch()) {
    MESSAGE("no Python with PyTorch here: only the missing-interpreter case is checked");
    return;
  }
  EvaluatorConfig cfg = config("python_statuses");
  cfg.memory_limit_bytes = std::uint64_t{3} << 30;  // the memory case asks for 8 GiB at once
  auto ev = make_evaluator(cfg);
  SpecTask task(python_vadd_task());
  std::vector<Case> cases = {
      {"returns", kGood, EvalStatus::passed, ""},
      // A view of an input is a fine thing to return; poisoning what a timed
      // call returned must not write into the input.
      {"returns-input-view", "def run(X, Y):\n    X.add_(Y, alpha=2)\n    return X.view(-1)\n", EvalStatus::incorrect,
       "modified input"},
      {"optional-argument", "import torch\n\ndef run(X, Y, scale=2.0):\n    return X + scale * Y\n",
       EvalStatus::passed, ""},
      {"writes-outputs", "import torch\n\ndef run(X, Y, Z):\n    torch.add(X, Y, alpha=2, out=Z)\n",
       EvalStatus::passed, ""},
      {"wrong", "def run(X, Y):\n    return X + Y\n", EvalStatus::incorrect, "Z"},
      {"syntax", "def run(X, Y)\n    return X + 2 * Y\n", EvalStatus::compile_error, "SyntaxError in main.py line 1"},
      {"import", "import ksearch_no_such_module\n\ndef run(X, Y):\n    return X\n", EvalStatus::compile_error,
       "ImportError while importing main.py: ModuleNotFoundError"},
      {"no-entry", "def main(X, Y):\n    return X + 2 * Y\n", EvalStatus::compile_error, "main.py defines no `run`"},
      {"raises", "def run(X, Y):\n    raise ValueError('no kernel today')\n", EvalStatus::runtime_error,
       "the candidate raised ValueError: no kernel today"},
      {"shape", "def run(X, Y):\n    return (X + 2 * Y)[:-1]\n", EvalStatus::incorrect, "has shape"},
      {"dtype", "import torch\n\ndef run(X, Y):\n    return (X + 2 * Y).double()\n", EvalStatus::incorrect,
       "has dtype float64, expected float32"},
      {"not-a-tensor", "def run(X, Y):\n    return [float(v) for v in X + 2 * Y]\n", EvalStatus::incorrect,
       "the entry point returned"},
      {"exits", "import sys\n\ndef run(X, Y):\n    sys.exit(3)\n", EvalStatus::runtime_error, "SystemExit"},
      // One request far past the limit fails at once: its words, not a
      // verdict (the worker saw no memory taken); growth to the limit is
      // memory_limit (tests/fixtures/hostile/python/memory_grows.py).
      {"memory", "import torch\n\ndef run(X, Y):\n    hog = torch.empty(1 << 31)\n    return X + 2 * Y + hog[0]\n",
       EvalStatus::runtime_error, "the limit is 3072 MiB"},
  };
  check_cases(*ev, task, cases);
}

TEST_CASE("python candidates: a hang is a timeout, and the next candidate gets its own verdict") {
  if (!have_torch()) return;
  EvaluatorConfig c = config("python_hang");
  c.options.run_timeout_s = 30;
  auto ev = make_evaluator(c);
  SpecTask task(python_vadd_task());
  EvalResult r = ev->evaluate(task, py("def run(X, Y):\n    while True:\n        pass\n", "hangs"));
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::timeout);
  EvalResult good = ev->evaluate(task, py(kGood, "after-hang"));
  CHECK(good.status == EvalStatus::passed);
}

// The hacks of docs/reference/peers.md, written as a Python candidate would.
TEST_CASE("python candidates: the known hacks are refused") {
  if (!have_torch()) return;
  auto ev = make_evaluator(config("python_hacks"));
  SpecTask task(python_vadd_task());
  std::vector<Case> cases = {
      // The first result, returned again for every later call: the re-check
      // on fresh inputs, and the poisoned kept result, see it.
      {"cached", "_cache = {}\n\ndef run(X, Y):\n    if 'out' not in _cache:\n        _cache['out'] = X + 2 * Y\n"
                 "    return _cache['out']\n",
       EvalStatus::incorrect, ""},
      // A lazy stand-in for the output: not a torch.Tensor.
      {"lazy", "import torch\n\nclass Lazy(torch.Tensor):\n    pass\n\ndef run(X, Y):\n"
               "    return (X + 2 * Y).as_subclass(Lazy)\n",
       EvalStatus::incorrect, "not a torch.Tensor"},
      // Work left to a thread, done after answering: the process is stopped
      // between requests, so the output is still poison when it is checked.
      {"deferred", "import threading\n_calls = []\n_go = threading.Event()\n\ndef _worker():\n    while True:\n"
                   "        _go.wait()\n        _go.clear()\n        X, Y, out = _calls[-1]\n        out.copy_(X + 2 * Y)\n\n"
                   "threading.Thread(target=_worker, daemon=True).start()\n\ndef run(X, Y):\n"
                   "    import torch\n    out = torch.empty_like(X)\n    if _calls:\n        _go.set()\n"
                   "    _calls.append((X, Y, out))\n    return out\n",
       EvalStatus::incorrect, ""},
      // The reference is nowhere in the candidate's process to call.
      {"reference", "def run(X, Y):\n    import reference\n    return reference.ref_kernel(X, Y)\n",
       EvalStatus::runtime_error, "ModuleNotFoundError"},
      // Output aliased to an input: the input changes, which the checks see.
      {"aliased", "def run(X, Y):\n    X.add_(Y, alpha=2)\n    return X\n", EvalStatus::incorrect, "input"},
      // The work left for a later request (poison, collect) that no longer
      // comes on the host: the timed call's own copy is what is checked.
      {"late", "import torch\n_n = [0]\n\ndef run(X, Y):\n    _n[0] += 1\n    if _n[0] > 4:\n"
               "        return torch.zeros_like(X)\n    return X + 2 * Y\n",
       EvalStatus::incorrect, "timed calls did not compute the result"},
      // A session and group of its own: kill(0) reaches no process but its
      // own (not its namespace's first, an idle init), which it ends.
      {"group-kill", "import os, signal\n\ndef run(X, Y):\n    os.kill(0, signal.SIGKILL)\n    return X + 2 * Y\n",
       EvalStatus::crashed, "SIGKILL"},
      // A new process to do the work elsewhere: refused by the filter.
      {"fork", "import os\n\ndef run(X, Y):\n    if os.fork() == 0:\n        os._exit(0)\n    return X + 2 * Y\n",
       EvalStatus::runtime_error, "PermissionError"},
  };
  check_cases(*ev, task, cases);
  EvalResult good = ev->evaluate(task, py(kGood, "honest-after"));
  CHECK(good.status == EvalStatus::passed);
}

TEST_CASE("python candidates: a patched clock does not change the worker's timing") {
  if (!have_torch()) return;
  auto ev = make_evaluator(config("python_clock"));
  SpecTask task(python_vadd_task());
  // Every clock the candidate's process has stands still, and each call
  // sleeps 20 ms: the latency is still at least 20 ms, because the worker
  // times the request from its own process.
  const char* code =
      "import time, torch\n_sleep = time.sleep\nfor _n in ('perf_counter', 'monotonic', 'time', 'process_time'):\n"
      "    setattr(time, _n, lambda: 0.0)\n"
      "torch.cuda.Event = None\ntorch.cuda.synchronize = lambda *a, **k: None\n\n"
      "def run(X, Y):\n    _sleep(0.02)\n    return X + 2 * Y\n";
  EvalResult r = ev->evaluate(task, py(code, "stops-clocks"));
  INFO(r.to_json().dump(2));
  REQUIRE(r.status == EvalStatus::passed);
  CHECK(r.workloads.back().timing.min_ms >= 20.0);
}

TEST_CASE("python candidates: forged answers on the candidate's channel are a protocol breach") {
  if (!have_torch()) return;
  auto ev = make_evaluator(config("python_forged"));
  SpecTask task(python_vadd_task());
  // Every answer with every token it can find: guessed ones, and the token
  // of the request in progress, read from the runner's frames.
  const char* code =
      "import socket, struct, sys\n\n"
      "def _tokens():\n    seen = {0, 1, 2, 3}\n    f = sys._getframe()\n    while f is not None:\n"
      "        for v in f.f_locals.values():\n            if isinstance(v, int) and v > 3:\n                seen.add(v)\n"
      "        f = f.f_back\n    return [t for t in seen if t < 1 << 64]\n\n"
      "def run(X, Y):\n    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, 3)\n"
      "    for token in _tokens():\n        for op in (17, 18, 19):\n"
      "            try:\n                s.send(struct.pack('<IIQI', 0x3143534B, op, token, 0))\n"
      "            except OSError:\n                pass\n    s.detach()\n    return X + 2 * Y\n";
  EvalResult r;
  CHECK_NOTHROW(r = ev->evaluate(task, py(code, "forges-answers")));
  INFO(r.to_json().dump(2));
  CHECK(r.status != EvalStatus::passed);
  CHECK(message_of(r).find("protocol") != std::string::npos);
  EvalResult good = ev->evaluate(task, py(kGood, "honest-after"));
  CHECK(good.status == EvalStatus::passed);
}

TEST_CASE("python candidates: forged worker frames on every descriptor change nothing") {
  if (!have_torch()) return;
  auto ev = make_evaluator(config("python_frames"));
  SpecTask task(python_vadd_task());
  EvalResult forged;
  forged.status = EvalStatus::passed;
  forged.solution_id = "forged";
  const std::string frame = eval::encode_frame(eval::msg::to_json(eval::msg::Reply{eval::msg::Finished{forged, false}}));
  std::string bytes;
  for (unsigned char ch : frame) bytes += std::to_string(static_cast<int>(ch)) + ",";
  // Writes a well-formed "finished: passed" frame to every descriptor it
  // holds and every one /proc shows it, then computes nothing.
  const std::string code = "import os\nFRAME = bytes([" + bytes +
                           "])\n\ndef run(X, Y):\n    for fd in range(0, 1024):\n        try:\n"
                           "            os.write(fd, FRAME)\n        except OSError:\n            pass\n"
                           "    for pid in os.listdir('/proc'):\n        if not pid.isdigit():\n            continue\n"
                           "        try:\n            fds = os.listdir(f'/proc/{pid}/fd')\n        except OSError:\n"
                           "            continue\n        for fd in fds:\n            try:\n"
                           "                w = os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK)\n"
                           "                os.write(w, FRAME)\n                os.close(w)\n"
                           "            except OSError:\n                pass\n    return X * 0\n";
  EvalResult r;
  CHECK_NOTHROW(r = ev->evaluate(task, py(code, "forges-frames")));
  INFO(r.to_json().dump(2));
  CHECK(r.status != EvalStatus::passed);
  CHECK(r.solution_id != "forged");
  EvalResult good = ev->evaluate(task, py(kGood, "honest-after"));
  CHECK(good.status == EvalStatus::passed);
}

TEST_CASE("python candidates: a missing interpreter is named, with the fix, before anything runs") {
  // Its own ctest entry sets $KSEARCH_PYTHON to a path that does not exist
  // (the interpreter is looked up once per process).
  const char* p = std::getenv("KSEARCH_PYTHON");
  if (!p || std::string(p) != "/nonexistent/python-for-ksearch") return;
  auto ev = make_evaluator(config("python_missing"));
  SpecTask task(python_vadd_task());
  try {
    ev->evaluate(task, py(kGood, "no-python"));
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("KSEARCH_PYTHON") != std::string::npos);
    CHECK(std::string(e.what()).find("/nonexistent/python-for-ksearch") != std::string::npos);
  }
}

namespace {

// vadd in KernelBench's convention: ModelNew(N) holds Y as its one
// parameter, forward(X) returns X + 2 Y.
TaskSpec modelnew_vadd_task(const char* parameters) {
  TaskSpec t = python_vadd_task();
  t.name = "test/vadd-modelnew";
  t.python = Json::obj({{"class", "ModelNew"},
                        {"module", "model_new.py"},
                        {"init_inputs", "[N]"},
                        {"inputs", 1},
                        {"seed", 42},
                        {"parameters", parameters}});
  t.validate();
  return t;
}

Solution modelnew(const std::string& code, const std::string& name) {
  Solution s = py(code, name);
  s.task = "test/vadd-modelnew";
  s.sources = {{"model_new.py", code}};
  return s.finalize();
}

const char* kModelNew =
    "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def __init__(self, n):\n"
    "        super().__init__()\n        assert torch.initial_seed() == 42, 'built after set_seed(42)'\n"
    "        self.y = nn.Parameter(torch.empty(n))\n\n    def forward(self, x):\n"
    "        assert not torch.is_grad_enabled(), 'called under no_grad'\n        return x + 2 * self.y\n";

}  // namespace

TEST_CASE("python candidates: KernelBench's ModelNew is built from the init inputs, its parameters loaded") {
  if (!have_torch()) return;
  auto ev = make_evaluator(config("python_modelnew"));
  SpecTask task(modelnew_vadd_task("loaded"));
  const std::string base = kModelNew;
  auto with = [&](const char* from, const char* to) {
    std::string c = base;
    c.replace(c.find(from), std::string(from).size(), to);
    return c;
  };
  const std::vector<Case> cases = {
      {"right", base, EvalStatus::passed, ""},
      {"wrong", with("x + 2 * self.y", "x + self.y"), EvalStatus::incorrect, "Z"},
      {"other-parameters", with("torch.empty(n))", "torch.empty(n + 1))"), EvalStatus::incorrect,
       "ModelNew's state_dict holds 1 tensor(s) (y [1001])"},
      {"no-class", with("class ModelNew", "class Model"), EvalStatus::compile_error, "defines no class `ModelNew`"},
      {"not-a-module", with("class ModelNew(nn.Module)", "class ModelNew(object)"), EvalStatus::compile_error,
       "not a torch.nn.Module"},
      {"constructor-raises", with("super().__init__()", "raise ValueError('no weights')"), EvalStatus::runtime_error,
       "ModelNew(*[1000]) raised ValueError: no weights"},
  };
  check_cases(*ev, task, cases, modelnew);
  // Seeded (KernelBench's oracle tasks): the module keeps the values its
  // construction gave it, so a Y it makes up itself is wrong.
  SpecTask seeded(modelnew_vadd_task("seeded"));
  EvalResult r = ev->evaluate(seeded, modelnew(base, "seeded"));
  CHECK(r.status == EvalStatus::incorrect);
}

TEST_CASE("python candidates: a solution's own entry point and destination-passing style are kept") {
  if (!have_torch()) return;
  auto ev = make_evaluator(config("python_entry"));
  SpecTask task(python_vadd_task());
  auto named = [](const std::string& code, bool dps) {
    Solution s = py(code, "named");
    s.sources = {{"kernel.py", code}, {"helpers.py", "SCALE = 2\n"}};
    s.entry_point = "kernel.py::go";
    s.destination_passing = dps;
    return s.finalize();
  };
  EvalResult r = ev->evaluate(
      task, named("import torch\nfrom helpers import SCALE\n\ndef go(X, Y, Z):\n    torch.add(X, Y, alpha=SCALE, out=Z)\n",
                  true));
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::passed);
  r = ev->evaluate(task, named("from helpers import SCALE\n\ndef go(X, Y):\n    return X + SCALE * Y\n", false));
  CHECK(r.status == EvalStatus::passed);
  // The style is the solution's word, checked as FlashInfer-Bench checks it.
  r = ev->evaluate(task, named("def go(X, Y):\n    return X + 2 * Y\n", true));
  CHECK(r.status == EvalStatus::compile_error);
  CHECK(message_of(r).find("in destination-passing style this task calls it with 3") != std::string::npos);
  // Its id is not that of the same code called by the task's convention.
  Solution plain = py("def go(X, Y):\n    return X + 2 * Y\n", "plain");
  CHECK(plain.id != named("def go(X, Y):\n    return X + 2 * Y\n", false).id);
}

TEST_CASE("python candidates: a FlashInfer-Bench Solution is read as FlashInfer-Bench reads it") {
  TaskSpec t = python_vadd_task();
  t.name = "flashinfer/vadd";
  auto solution = [](const std::string& spec_extra, const std::string& definition = "vadd") {
    return R"({"name": "s", "definition": ")" + definition + R"(", "author": "a", "spec": {"language": "python",
      "target_hardware": ["NVIDIA_H100"], "entry_point": "main.py::run", "dependencies": [])" + spec_extra + R"(},
      "sources": [{"path": "main.py", "content": "def run(X, Y, Z):\n    Z.copy_(X + 2 * Y)\n"}]})";
  };
  Solution s = parse_solution_text(solution(""), t);
  CHECK(s.language == Language::python);
  CHECK(s.entry_point == "main.py::run");
  REQUIRE(s.destination_passing.has_value());
  CHECK(*s.destination_passing);  // the schema's default
  CHECK(Solution::from_json(s.to_json()).id == s.id);
  CHECK_FALSE(*parse_solution_text(solution(R"(, "destination_passing_style": false)"), t).destination_passing);
  auto refused = [&](const std::string& text, const char* words) {
    CAPTURE(text);
    try {
      parse_solution_text(text, t);
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(words) != std::string::npos);
    }
  };
  refused(solution("", "other_definition"), "for definition \"other_definition\"");
  std::string cuda = solution("");
  cuda.replace(cuda.find("\"python\""), 8, "\"cuda\"");
  // A cpp or cuda Solution imports (docs/tasks/flashinfer.md, "Solutions from elsewhere") when its
  // entry file is a C or C++ source; a Python one under language cuda is named as what it is.
  refused(cuda, "the entry file of a cpp or cuda Solution is a .cu, .cpp, .cc, .cxx or .c file");
  std::string elsewhere = solution("");
  elsewhere.replace(elsewhere.find("main.py::run"), 12, "other.py::run");
  refused(elsewhere, "names other.py, which is not among the solution's sources");
  std::string two = solution("");
  two.replace(two.find("main.py::run"), 12, "main.py::a::b");
  refused(two, "exactly one \"::\"");
}

// The limit a GPU Python candidate gets (RLIMIT_AS cannot bound a process
// the CUDA driver maps): its resident memory, watched while it works. Here
// on the host, with the real runner and a candidate that fills 1 GiB.
TEST_CASE("python candidates: a resident-memory limit stops a process that holds more") {
  if (!have_torch()) return;
  host::CandidateProcessOptions o;
  o.command = {std::getenv("KSEARCH_PYTHON"), "-I", "-B", "-c", std::string(eval::python::embedded::candidate_runner_py)};
  o.resident_limit = std::uint64_t{400} << 20;
  host::CandidateProcess process(o);
  const Json load = Json::obj(
      {{"language", "python"},
       {"device", "cpu"},
       {"entry", Json::obj({{"function", "run"}})},
       {"sources", Json(Json::Array{Json::obj({{"path", "main.py"},
                                              {"content", "hog = bytearray(1 << 30)\n\ndef run(X):\n    return X\n"}})})}});
  try {
    REQUIRE_FALSE(process.ask(host::CandidateProcess::Request::load, load.dump()).error);
    process.ask(host::CandidateProcess::Request::import, "");
    FAIL("expected the process to be stopped");
  } catch (const RunError& e) {
    INFO(e.failure().message);
    CHECK(e.failure().status == EvalStatus::memory_limit);
    CHECK(e.failure().message.find("over the limit of 400 MiB") != std::string::npos);
  }
}

// A candidate process left in the worker's PID namespace (a GPU Python one:
// python_program.cpp says why) sees nothing of the other processes in /proc:
// the entry of every process and thread there was when it started is an
// empty one. Its own stays whole.
TEST_CASE("python candidates: without a PID namespace of its own, /proc shows nothing of other processes") {
  if (!have_torch()) return;
  std::string before;  // the processes and threads there are now, this one's among them
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    before += name + ",";
    std::error_code gone;
    for (const auto& t : std::filesystem::directory_iterator(e.path() / "task", gone))
      before += t.path().filename().string() + ",";
  }
  host::CandidateProcessOptions o;
  o.command = {std::getenv("KSEARCH_PYTHON"), "-I", "-B", "-c", std::string(eval::python::embedded::candidate_runner_py)};
  o.pid_namespace = false;
  // Started directly, and forked by the zygote (which sets up its own layers).
  for (const bool zygote : {false, true}) {
    o.zygote = zygote;
    host::CandidateProcess process(o);
    INFO("zygote " << zygote << ": " << process.isolation());
    if (process.isolation().find("+ownproc") == std::string::npos) {
      MESSAGE("no user namespaces here (" << process.isolation() << "): nothing to cover /proc with");
      return;
    }
    CHECK((process.isolation().find("+forked") != std::string::npos) == zygote);
    // The zygote, which holds capabilities in its user namespace, is one of them.
    const std::string others = zygote ? before + std::to_string(host::python_zygote_pid()) : before;
    const std::string code = fmt::format(
        "import os\n"
        "def readable(pid):\n"
        "    try:\n"
        "        open('/proc/%d/status' % pid).read(); return True\n"
        "    except OSError:\n"
        "        return False\n"
        "others = [p for p in ({}) if readable(p)]\n"
        "own = readable(os.getpid()) and os.getpid() == int(os.readlink('/proc/self'))\n"
        "def run(X):\n"
        "    return X\n"
        "raise RuntimeError('READABLE %s OWN %s' % (others, own))\n",
        others);
    const Json load =
        Json::obj({{"language", "python"},
                   {"device", "cpu"},
                   {"entry", Json::obj({{"function", "run"}})},
                   {"sources", Json(Json::Array{Json::obj({{"path", "main.py"}, {"content", code}})})}});
    const auto answer = import_module(process, load);
    REQUIRE(answer.error);
    INFO(answer.text);
    CHECK(answer.text.find("READABLE [] OWN True") != std::string::npos);
  }
}

// The worker's long-lived Python: every Python candidate's process is forked
// from one zygote (PyTorch imported once), gets the layers a started one gets,
// and is this process's child, stopped, continued and reaped as one.
TEST_CASE("python candidates: processes forked by one long-lived zygote, each with its own layers") {
  if (!have_torch()) return;
  host::CandidateProcessOptions o;
  o.command = {std::getenv("KSEARCH_PYTHON"), "-I", "-B", "-c", std::string(eval::python::embedded::candidate_runner_py)};
  o.zygote = true;
  // What the process is, seen from inside it once the runner has confined it.
  const char* probe =
      "import os, sys\n"
      "status = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
      "caps = [int(status[k].strip(), 16) for k in ('CapEff', 'CapPrm', 'CapInh', 'CapBnd', 'CapAmb')][:3]\n"
      "fds = []\n"
      "for fd in range(4096):\n"
      "    try:\n"
      "        os.fstat(fd); fds.append(fd)\n"
      "    except OSError:\n"
      "        pass\n"
      "def run(X):\n"
      "    return X\n"
      "raise RuntimeError('PID %d TORCH %s UID %d CAPS %s NNP %s SECCOMP %s FDS %s CWD %s' % (os.getpid(), "
      "'torch' in sys.modules, os.getuid(), caps, status['NoNewPrivs'].strip(), status['Seccomp'].strip(), fds, "
      "os.getcwd() == os.environ.get('TMPDIR')))\n";
  std::string filter;  // the seccomp filter the worker hands every Python candidate, in hex
  for (unsigned char c : eval::isolation::candidate_seccomp_program(false)) filter += fmt::format("{:02x}", c);
  const Json load =
      Json::obj({{"language", "python"},
                 {"device", "cpu"},
                 {"entry", Json::obj({{"function", "run"}})},
                 {"sources", Json(Json::Array{Json::obj({{"path", "main.py"}, {"content", probe}})})},
                 {"seccomp", filter},
                 {"seccomp_nr", static_cast<std::int64_t>(SYS_seccomp)}});
  pid_t zygote = -1, first = -1;
  for (int i = 0; i < 2; ++i) {
    host::CandidateProcess process(o);
    if (process.isolation().find("+pidns") == std::string::npos) {
      MESSAGE("no user namespaces here (" << process.isolation() << "): candidates are started directly");
      return;
    }
    INFO(process.isolation() << "; the zygote's last refusal: " << host::python_zygote_problem());
    CHECK(process.isolation().find("+forked") != std::string::npos);
    if (i == 0) zygote = host::python_zygote_pid();
    CHECK(zygote > 0);
    CHECK(host::python_zygote_pid() == zygote);  // the same one, kept
    CHECK(process.pid() != first);
    first = process.pid();
    // Its own PID namespace, where it is the second process (an idle init is
    // the first, so its own signals end it); PyTorch came with
    // the fork. An ordinary user without capabilities, filtered, with no
    // descriptor but its output and socket, in its private /tmp.
    const auto answer = import_module(process, load);
    INFO(answer.text);
    CHECK(answer.text.find("PID 2 TORCH True UID 1000 CAPS [0, 0, 0] NNP 1 SECCOMP 2 FDS [0, 1, 2, 3] CWD True") !=
          std::string::npos);
    // A child of this process: waitpid sees it (WNOHANG: alive, stopped between requests).
    int st = 0;
    CHECK(::waitpid(process.pid(), &st, WNOHANG) == 0);
  }
  // Ending the zygote ends no candidate; the next one starts a fresh zygote.
  host::CandidateProcess alive(o);
  host::end_python_zygote();
  CHECK(host::python_zygote_pid() == -1);
  CHECK(import_module(alive, load).text.find("PID 2 TORCH True") !=
        std::string::npos);
  host::CandidateProcess again(o);
  CHECK(again.isolation().find("+forked") != std::string::npos);
  CHECK(host::python_zygote_pid() > 0);
  CHECK(host::python_zygote_pid() != zygote);
  // Turned off: a fresh interpreter, with the same layers.
  ::setenv("KSEARCH_PYTHON_ZYGOTE", "0", 1);
  host::CandidateProcess started(o);
  ::unsetenv("KSEARCH_PYTHON_ZYGOTE");
  CHECK(started.isolation().find("+forked") == std::string::npos);
  CHECK(started.isolation().find("+pidns") != std::string::npos);
  CHECK(import_module(started, load).text.find("UID 1000 CAPS [0, 0, 0] NNP 1") !=
        std::string::npos);
}

// What a candidate writes where the libraries keep their caches reaches no
// other candidate and outlives its process nowhere: Triton's cache and
// PyTorch's extension builds are folders of its private /tmp, which, with
// its HOME, working folder and /dev/shm, are tmpfs of its own; the
// evaluator's cache (<cache>/python) is hidden from it.
TEST_CASE("python candidates: one candidate's cache files reach no other candidate") {
  if (!have_torch()) return;
  const EvaluatorConfig c = config("python_own_caches");
  auto ev = make_evaluator(c);
  SpecTask task(python_vadd_task());
  // Private folders need a mount namespace: where user namespaces are
  // refused, candidates run as plain processes and there is nothing to check.
  const EvalResult probe = ev->evaluate(task, py(kGood, "probe-namespaces"));
  REQUIRE(probe.status == EvalStatus::passed);
  if (probe.metrics.get_string("candidate_isolation", "").find("ns") == std::string::npos) {
    MESSAGE("skipped: no user namespaces here (" << probe.metrics.get_string("candidate_isolation", "") << ")");
    return;
  }
  const std::string cache = (c.cache_dir / "python").string();
  // Writes a marker everywhere it can, and computes honestly; the
  // evaluator's cache must be out of its sight.
  const std::string writer =
      "import os\n\ndef _put(path):\n    try:\n        os.makedirs(os.path.dirname(path), exist_ok=True)\n"
      "        with open(path, 'w') as f:\n            f.write('poison')\n        return True\n    except OSError:\n"
      "        return False\n\n"
      "_seen = os.listdir('" + cache + "') if os.path.isdir('" + cache + "') else []\n"
      "_wrote = _put('" + cache + "/ext/marker')\n"
      "for _d in (os.environ['TRITON_CACHE_DIR'], os.environ['TORCH_EXTENSIONS_DIR'], os.environ['TMPDIR'],\n"
      "           os.environ['HOME'], os.getcwd(), '/dev/shm'):\n    _put(_d + '/marker')\n\n"
      "def run(X, Y):\n    assert not _seen and not _wrote, f'saw {_seen} or wrote in the evaluator cache'\n"
      "    return X + 2 * Y\n";
  // Fails when it sees anything the writer left.
  const char* reader =
      "import os\n\n_bad = []\n"
      "for _d in (os.environ['TRITON_CACHE_DIR'], os.environ['TORCH_EXTENSIONS_DIR'], os.environ['TMPDIR'],\n"
      "           os.environ['HOME'], os.getcwd(), '/dev/shm'):\n"
      "    if os.path.exists(_d + '/marker'):\n        _bad.append(_d)\n"
      "if os.environ['TMPDIR'] in ('', '/tmp') or not os.environ['TRITON_CACHE_DIR'].startswith(os.environ['TMPDIR']):\n"
      "    _bad.append('TMPDIR is ' + os.environ['TMPDIR'])\n\n"
      "def run(X, Y):\n    assert not _bad, f'saw what is not its own: {_bad}'\n    return X + 2 * Y\n";
  EvalResult first = ev->evaluate(task, py(writer, "writes-markers"));
  INFO(first.to_json().dump(2));
  REQUIRE(first.status == EvalStatus::passed);
  EvalResult other = ev->evaluate(task, py(reader, "reads-markers"));
  INFO(other.to_json().dump(2));
  CHECK(other.status == EvalStatus::passed);
  // On disk: no marker anywhere in the cache.
  namespace fs = std::filesystem;
  for (const auto& e : fs::recursive_directory_iterator(c.cache_dir)) CHECK(e.path().filename() != "marker");
  CHECK_FALSE(fs::exists(c.cache_dir / "python" / "triton"));
}

// ---------------------------------------------------------------------------
// On the GPU (ctest entry test_python_candidates_gpu, label gpu): the same
// worker with a CUDA reference, Python candidates in PyTorch. Each skips,
// saying why, where no GPU or no CUDA build of PyTorch is at hand.

namespace {

bool python_gpu_present() {
  std::string why;
  if (!have_torch()) why = "no Python with PyTorch in $KSEARCH_PYTHON";
  else if (!cuda_available(&why)) {
  } else if (const std::string p = eval::python::python_problem(Language::python, true); !p.empty()) why = p;
  if (why.empty()) return true;
  MESSAGE("skipped: " << why);
  return false;
}

Solution gpu_py(const std::string& code, const std::string& name) {
  return python_solution("test/scale-python-gpu", code, name);
}

EvaluatorConfig gpu_config(const std::string& name) {
  EvaluatorConfig c = config(name);
  c.backend = ks::EvalBackend::cuda;
  c.options.max_time_per_workload_s = 0.2;
  c.options.flush_l2 = true;
  c.options.run_timeout_s = 120;  // the first workload imports PyTorch and starts CUDA
  return c;
}

// On the benchmark workload, about a millisecond of GPU work in five
// launches (a few tens of us of host time), so work left on another stream
// is most of what a call does: four exact fp32 products with the identity
// (TF32 is off for matmul by default). Elementwise on the small workload.
const char* kHeavy =
    "import torch as _t\n_eye = {}\n\ndef _work(x):\n    if x.numel() != 2048 * 2048:\n        return x * 2\n"
    "    m = x.view(2048, 2048)\n    e = _eye.setdefault(x.device, _t.eye(2048, device=x.device))\n"
    "    for _ in range(4):\n        m = m @ e\n    return (m * 2).view(-1)\n\n";

}  // namespace

TEST_CASE("python candidates on the GPU: verdicts, isolation, and timing no candidate can bend") {
  if (!python_gpu_present()) return;
  const bool legacy = std::getenv("KSEARCH_CUDA_LEGACY_IPC") != nullptr;
  auto ev = make_evaluator(gpu_config(legacy ? "python_gpu_legacy" : "python_gpu"));
  SpecTask task(test::gpu_scale_task());

  // The worker's GPU alone; its own Triton folder.
  const std::string honest =
      std::string("import os, torch\n") +
      "assert os.environ['CUDA_VISIBLE_DEVICES'].startswith('GPU-') and torch.cuda.device_count() == 1\n"
      "assert os.environ['TRITON_CACHE_DIR'].startswith(os.environ['TMPDIR'])\n\n" + kHeavy +
      "def run(x):\n    return _work(x)\n";
  EvalResult good = ev->evaluate(task, gpu_py(honest, "honest"));
  INFO(good.to_json().dump(2));
  REQUIRE(good.status == EvalStatus::passed);
  CHECK(good.metrics.get_number("process_start_s") > 0);
  CHECK(good.metrics.get_number("first_calls_s") > 0);
  CHECK(good.metrics.get_number("compile_s") >= good.metrics.get_number("first_calls_s"));
  CHECK(good.metrics.get_string("candidate_isolation", "").find("+userns") != std::string::npos);
  CHECK(good.metrics.get_string("gpu_buffers", "") == (legacy ? "ipc" : "descriptors"));
  const Json phases = test::checked_phases(good, 1e9);
  CHECK(phases.get_number("load_s") >= good.metrics.get_number("process_start_s"));
  const double honest_ms = good.latency_ms;

  EvalResult wrong = ev->evaluate(task, gpu_py("def run(x):\n    return x * 2.001\n", "wrong"));
  CHECK(wrong.status == EvalStatus::incorrect);

  // The same work on a stream of its own, never waited for: the events on
  // the current stream would see nothing of it, but the idle mark does.
  const std::string escape = std::string("import torch\n\n") + kHeavy +
                             "_side = torch.cuda.Stream()\n\ndef run(x):\n    with torch.cuda.stream(_side):\n"
                             "        return _work(x)\n";
  EvalResult side = ev->evaluate(task, gpu_py(escape, "side-stream"));
  INFO(side.to_json().dump(2));
  CHECK(side.status == EvalStatus::passed);
  CHECK(side.latency_ms > 0.7 * honest_ms);
  CHECK(side.metrics.get_number("stream_escapes") > 0);

  // Every timing function patched, from the module and from the call.
  const std::string patched =
      std::string("import torch\n\n") + kHeavy +
      "torch.cuda.Event.elapsed_time = lambda self, other: 0.001\n"
      "torch.cuda.Event.record = lambda self, stream=None: None\n"
      "torch.cuda.synchronize = lambda *a, **k: None\n"
      "torch.cuda.current_stream = lambda *a, **k: torch.cuda.Stream()\n\n"
      "def run(x):\n    torch.cuda.Event.elapsed_time = lambda self, other: 0.001\n    return _work(x)\n";
  EvalResult clocks = ev->evaluate(task, gpu_py(patched, "patched-timer"));
  INFO(clocks.to_json().dump(2));
  CHECK(clocks.status == EvalStatus::passed);
  CHECK(clocks.latency_ms > 0.7 * honest_ms);
  MESSAGE("latency: honest " << honest_ms << " ms, side stream " << side.latency_ms << " ms, patched timer "
                             << clocks.latency_ms << " ms (" << std::string(legacy ? "legacy IPC" : "descriptors")
                             << ")");

  // Honest for the checked calls (each sees an input for the first or
  // second time), then, in the timed calls that repeat one input, the
  // result handed back uncomputed and finished by a thread 50 ms later:
  // the batch copies its last result and answers first, and no request
  // wakes the process again before the worker checks.
  const char* deferred =
      "import collections, threading, time, torch\n_seen = collections.Counter()\n_todo = []\n"
      "_go = threading.Event()\n\ndef _worker():\n    while True:\n        _go.wait()\n        _go.clear()\n"
      "        time.sleep(0.05)\n        x, out = _todo[-1]\n        out.copy_(x * 2)\n\n"
      "threading.Thread(target=_worker, daemon=True).start()\n\ndef run(x):\n    _seen[x.data_ptr()] += 1\n"
      "    if _seen[x.data_ptr()] <= 2:\n        return x * 2\n    out = torch.empty_like(x)\n"
      "    _todo.append((x, out))\n    _go.set()\n    return out\n";
  EvalResult late = ev->evaluate(task, gpu_py(deferred, "deferred"));
  INFO(late.to_json().dump(2));
  CHECK(late.status == EvalStatus::incorrect);
  CHECK(message_of(late).find("timed calls did not compute") != std::string::npos);

  EvalResult again = ev->evaluate(task, gpu_py(honest, "honest-again"));
  CHECK(again.status == EvalStatus::passed);
}

TEST_CASE("python candidates on the GPU: host memory past the limit is memory_limit") {
  if (!python_gpu_present()) return;
  EvaluatorConfig c = gpu_config("python_gpu_hog");
  c.memory_limit_bytes = std::uint64_t{4} << 30;  // PyTorch and a CUDA context hold about 2 GiB
  auto ev = make_evaluator(c);
  SpecTask task(test::gpu_scale_task());
  EvalResult r = ev->evaluate(task, gpu_py("_hog = bytearray(6 << 30)\n\ndef run(x):\n    return x * 2\n", "hog"));
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::memory_limit);
  EvalResult good = ev->evaluate(task, gpu_py("def run(x):\n    return x * 2\n", "after-hog"));
  CHECK(good.status == EvalStatus::passed);
}
