// No worker process outlives its evaluator, even when the evaluator's
// process is SIGKILLed in the middle of a run.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "fixtures.hpp"
#include "support/test_util.hpp"
#include "util/process.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace {

// Gone, or a zombie waiting for a reaper (which may be slow in a container).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  const std::string text = ks::test::read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

// CPU time, in clock ticks, of `root` and every live process below it (a
// sandboxed worker runs under bubblewrap, whose PID the evaluator reports).
long tree_ticks(pid_t root) {
  struct Proc {
    pid_t ppid;
    long ticks;
  };
  std::map<pid_t, Proc> procs;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string text = ks::test::read_proc_file(e.path() / "stat");
    auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream in(text.substr(close + 2));
    std::string field;
    std::vector<std::string> f;
    while (in >> field) f.push_back(field);
    if (f.size() < 13 || f[0] == "Z") continue;  // fields from state on: utime and stime are the 12th and 13th
    procs[static_cast<pid_t>(std::stol(name))] = {static_cast<pid_t>(std::stol(f[1])), std::stol(f[11]) + std::stol(f[12])};
  }
  long total = 0;
  for (const auto& [pid, proc] : procs) {
    for (pid_t p = pid; p > 1;) {
      if (p == root) {
        total += proc.ticks;
        break;
      }
      auto it = procs.find(p);
      if (it == procs.end()) break;
      p = it->second.ppid;
    }
  }
  return total;
}

bool wait_gone(pid_t pid, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (process_gone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return process_gone(pid);
}

}  // namespace

TEST_CASE("lifetime: destroying the evaluator ends its worker") {
  pid_t worker = 0;
  {
    auto ev = ks::make_evaluator(ks::test::test_config(ks::test::scratch_dir("life_destroy").string()));
    ks::SpecTask task(ks::test::vadd_task());
    auto r = ev->evaluate(task, ks::test::vadd_candidate(ks::test::kGoodBody));
    REQUIRE(r.status == ks::EvalStatus::passed);
    worker = static_cast<pid_t>(r.metrics.get_int("worker_pid"));
    REQUIRE(worker > 0);
    CHECK_FALSE(process_gone(worker));
  }
  CHECK(wait_gone(worker, std::chrono::seconds(60)));  // at once when honest; a safety net for a loaded machine
}

TEST_CASE("lifetime: a worker dies with its SIGKILLed parent, even mid-candidate") {
  auto dir = ks::test::scratch_dir("life_sigkill");
  ks::util::Subprocess helper({.argv = {(ks::test::binary_dir() / "tests" / "eval" / "ks_eval_parent_helper").string(),
                                          dir.string()},
                                 .pipe_stderr = false});
  std::string out;
  for (int i = 0; i < 1200 && out.find('\n') == std::string::npos; ++i)
    ks::util::read_some(helper.stdout_fd(), out, 0, std::chrono::milliseconds(100));
  INFO(out);
  std::istringstream line(out);
  std::string word, status;
  long long pid = 0;
  line >> word >> pid >> status;
  REQUIRE(word == "worker");
  REQUIRE(status == "passed");
  REQUIRE(pid > 0);
  // Until the endless candidate spins in the worker: half a second of CPU
  // beyond what the good one used (loading takes a fraction of that). The
  // limit is a safety net; how long it takes depends on the machine's load.
  const long before = tree_ticks(static_cast<pid_t>(pid));
  const long spin = ::sysconf(_SC_CLK_TCK) / 2;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (tree_ticks(static_cast<pid_t>(pid)) - before < spin && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(tree_ticks(static_cast<pid_t>(pid)) - before >= spin);
  REQUIRE_FALSE(process_gone(static_cast<pid_t>(pid)));
  ::kill(helper.pid(), SIGKILL);
  helper.wait_for(std::chrono::seconds(60));
  // The worker notices within about half a second; 60 s only absorbs a loaded machine.
  CHECK(wait_gone(static_cast<pid_t>(pid), std::chrono::seconds(60)));
}
