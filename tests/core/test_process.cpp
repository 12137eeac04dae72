#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>

#include <thread>

#include "ksearch/error.hpp"
#include "util/process.hpp"

using namespace ks::util;

TEST_CASE("process: run_command captures output and exit code") {
  auto r = ks::util::run_command({.argv = {"sh", "-c", "cat; echo err >&2; exit 3"}}, "hello", 10);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 3);
  CHECK(r.out == "hello");
  CHECK(r.err == "err\n");
  CHECK(r.describe() == "exit code 3");
}

TEST_CASE("process: a hung command is killed at its timeout") {
  auto r = ks::util::run_command({.argv = {"sh", "-c", "sleep 120"}}, "", 0.3);
  CHECK(r.timed_out);
  CHECK(r.wall_s < 60);  // killed at 0.3 s, not waited for: any load leaves that far below 120 s
  CHECK(r.describe().find("timed out") != std::string::npos);
}

TEST_CASE("process: a crashing command reports its signal") {
  auto r = ks::util::run_command({.argv = {"sh", "-c", "kill -SEGV $$"}}, "", 10);
  CHECK(r.signaled);
  CHECK(r.signal == SIGSEGV);
}

TEST_CASE("process: a missing program is a clear error") {
  CHECK_THROWS_AS(ks::util::run_command({.argv = {"/nonexistent/prog"}}, "", 5), ks::Error);
  CHECK_THROWS_AS(ks::util::run_command({.argv = {"ksearch-no-such-program"}}, "", 5), ks::Error);
}

TEST_CASE("process: a child that ignores stdin does not block or kill the parent") {
  std::string big(8 << 20, 'x');  // larger than a pipe buffer
  auto r = ks::util::run_command({.argv = {"sh", "-c", "exit 0"}}, big, 10);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
}

TEST_CASE("process: the destructor ends the whole process group") {
  pid_t grandchild = 0;
  {
    ks::util::Subprocess p({.argv = {"sh", "-c", "sleep 60 & echo $!; wait"}});
    std::string out;  // the shell starts at once; 60 s only absorbs a loaded machine
    for (int i = 0; i < 1200 && out.find('\n') == std::string::npos; ++i)
      ks::util::read_some(p.stdout_fd(), out, 0, std::chrono::milliseconds(50));
    REQUIRE(out.find('\n') != std::string::npos);
    grandchild = static_cast<pid_t>(std::stol(out));
    CHECK(grandchild > 0);
  }
  // Give the kernel a moment to deliver SIGKILL to the group (and init to reap it: up to 60 s when busy).
  bool gone = false;
  for (int i = 0; i < 3000 && !gone; ++i) {
    gone = ::kill(grandchild, 0) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(gone);
}

TEST_CASE("process: environment additions reach the child") {
  auto r = ks::util::run_command({.argv = {"sh", "-c", "echo $KS_TEST_VAR"}, .env_set = {{"KS_TEST_VAR", "42"}}}, "", 10);
  CHECK(r.out == "42\n");
}

TEST_CASE("process: stdout_to_stderr sends the child's stdout where its stderr goes") {
  // A helper whose chatter must not reach the program's stdout (ksearch run --json with --wandb).
  ks::util::Subprocess p({.argv = {"sh", "-c", "echo out; echo err >&2"}, .pipe_stdin = false, .pipe_stdout = false,
                          .stdout_to_stderr = true});
  std::string err;
  while (ks::util::read_some(p.stderr_fd(), err, 1 << 16, std::chrono::seconds(10))) {
  }
  CHECK(err == "out\nerr\n");
  auto status = p.wait_for(std::chrono::seconds(10));
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}
