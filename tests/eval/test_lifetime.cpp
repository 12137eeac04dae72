// No worker process outlives its evaluator, even when the evaluator's
// process is SIGKILLed in the middle of a run.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "fixtures.hpp"
#include "support/test_util.hpp"
#include "util/process.hpp"

namespace {

// Gone, or a zombie waiting for a reaper (which may be slow in a container).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  const std::string text = ks::test::read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
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
  CHECK(wait_gone(worker, std::chrono::seconds(2)));
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
  // Let the endless candidate start spinning in the worker.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  REQUIRE_FALSE(process_gone(static_cast<pid_t>(pid)));
  ::kill(helper.pid(), SIGKILL);
  helper.wait_for(std::chrono::seconds(5));
  CHECK(wait_gone(static_cast<pid_t>(pid), std::chrono::seconds(3)));
}
