#include "eval/worker_client.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "ksearch/error.hpp"

namespace ks::eval {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kTailBytes = 16u << 10;

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// Where this code was loaded from: libksearch.so, or the program itself
// when the components are linked statically.
fs::path this_binary() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&locate_worker), &info) && info.dli_fname)
    return fs::path(info.dli_fname);
  return {};
}

}  // namespace

fs::path locate_worker(const fs::path& configured) {
  std::vector<fs::path> tried;
  auto accept = [&](const fs::path& p) {
    tried.push_back(p);
    return executable(p);
  };
  if (!configured.empty()) {
    if (accept(configured)) return configured;
    throw Error(Status::not_found,
                fmt::format("the configured ksearch-worker \"{}\" is not an executable file", configured.string()));
  }
  if (const char* env = std::getenv("KSEARCH_WORKER"); env && *env) {
    if (accept(env)) return env;
    throw Error(Status::not_found,
                fmt::format("$KSEARCH_WORKER=\"{}\" is not an executable file", env));
  }
  if (fs::path self = this_binary(); !self.empty()) {
    fs::path dir = fs::absolute(self).parent_path();
    // <prefix>/lib or a multiarch <prefix>/lib/<triplet>, then the same folder.
    for (const fs::path& p : {dir / ".." / "libexec" / "ksearch" / "ksearch-worker",
                              dir / ".." / ".." / "libexec" / "ksearch" / "ksearch-worker", dir / "ksearch-worker"})
      if (accept(p)) return fs::weakly_canonical(p);
  }
#ifdef KS_WORKER_BUILD_PATH
  if (accept(KS_WORKER_BUILD_PATH)) return KS_WORKER_BUILD_PATH;
#endif
  std::string list;
  for (const auto& p : tried) list += "\n  " + p.string();
  throw Error(Status::not_found,
              "cannot find the ksearch-worker program; looked in:" + list +
                  "\nset $KSEARCH_WORKER or EvaluatorConfig::worker_path");
}

WorkerProcess::WorkerProcess(const fs::path& exe, const std::vector<std::string>& args, const isolation::Sandbox* sandbox,
                             const isolation::SandboxView& view, Code code)
    : sandboxed_(sandbox && sandbox->active()),
      proc_([&] {
        // A name without '/' is looked up in PATH (an oracle's "python3");
        // a path is made absolute, so the sandbox can show that one file.
        std::vector<std::string> argv{exe.has_parent_path() ? fs::absolute(exe).string() : exe.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        const bool confined = sandbox && sandbox->active();
        isolation::SandboxView v = view;
        v.die_with_parent = true;  // bubblewrap's parent is the lasting spawner thread (process.hpp)
        util::SpawnOptions o;
        o.argv = confined ? sandbox->wrap(argv, v) : argv;
        o.clear_env = true;
        o.env_set = code == Code::trusted ? isolation::trusted_environment() : isolation::candidate_environment(confined);
        o.new_session = true;
        o.die_with_parent_process = true;
        return o;
      }()) {}

WorkerProcess::~WorkerProcess() {
  // Closing stdin asks for a clean exit (the worker may be writing a
  // reference file); the Subprocess destructor then kills whatever is left.
  proc_.close_stdin();
  if (!proc_.wait_for(std::chrono::milliseconds(200))) proc_.kill_and_reap();
}

void WorkerProcess::drain_stderr(std::chrono::milliseconds wait) {
  if (!err_open_) return;
  std::string chunk;
  err_open_ = util::read_some(proc_.stderr_fd(), chunk, 0, wait);
  err_tail_ += chunk;
  if (err_tail_.size() > kTailBytes) err_tail_.erase(0, err_tail_.size() - kTailBytes);
}


WorkerProcess::Received WorkerProcess::receive(Json& message, Clock::time_point deadline,
                                               const std::atomic<bool>* cancel) {
  for (;;) {
    if (auto m = decoder_.next()) {
      message = std::move(*m);
      return Received::message;
    }
    if (!out_open_) return Received::exited;
    if (cancel && cancel->load()) return Received::cancelled;
    auto now = Clock::now();
    if (now >= deadline) return Received::timed_out;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    pollfd fds[2] = {{proc_.stdout_fd(), POLLIN, 0}, {err_open_ ? proc_.stderr_fd() : -1, POLLIN, 0}};
    int r = ::poll(fds, 2, static_cast<int>(std::clamp<long long>(left, 1, cancel ? 100 : 1000)));
    if (r < 0 && errno != EINTR)
      throw Error(Status::subprocess, fmt::format("poll on the worker failed: {}", std::strerror(errno)));
    if (fds[1].revents) drain_stderr(std::chrono::milliseconds(0));
    if (fds[0].revents) {
      char buf[65536];
      ssize_t n = ::read(proc_.stdout_fd(), buf, sizeof buf);
      if (n > 0) decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) out_open_ = false;
    }
  }
}

msg::Hello WorkerProcess::wait_hello(double timeout_s) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  Json msg;
  switch (receive(msg, deadline)) {
    case Received::message: break;
    case Received::exited:
      throw Error(Status::subprocess, "ksearch-worker exited during start-up: " + kill_and_describe());
    case Received::timed_out:
      throw Error(Status::subprocess,
                  fmt::format("ksearch-worker did not start within {:.0f} s: {}", timeout_s, kill_and_describe()));
    case Received::cancelled:  // not asked for: no cancel flag is passed
      throw Error(Status::cancelled, "the worker's start was cancelled");
  }
  const msg::Reply reply = msg::reply_from_json(msg);
  if (const auto* fatal = std::get_if<msg::Fatal>(&reply))
    throw Error(fatal->status, fatal->message.empty() ? "the worker could not start" : fatal->message);
  const auto* hello = std::get_if<msg::Hello>(&reply);
  if (!hello)
    throw Error(Status::subprocess, fmt::format("ksearch-worker sent \"{}\" instead of hello", msg::name_of(reply)));
  start_times_.total_s = std::chrono::duration<double>(Clock::now() - spawned_).count();
  // Both ends read CLOCK_MONOTONIC; a figure outside the start (a clock of
  // another machine?) is not believed.
  if (hello->started_s > 0)
    start_times_.to_main_s = std::clamp(hello->started_s - monotonic_seconds(spawned_), 0.0, start_times_.total_s);
  return *hello;
}

void WorkerProcess::send(const msg::Request& request) { send_frame(msg::to_json(request)); }

void WorkerProcess::send_frame(const Json& frame) {
  if (!write_frame(proc_.stdin_fd(), frame))
    throw Error(Status::subprocess, "the ksearch-worker process is gone (cannot send a request)");
}

std::string WorkerProcess::kill_and_describe() {
  // Collect what is still in the pipe before the process disappears.
  auto st = proc_.wait_for(std::chrono::milliseconds(50));
  int status = st ? *st : proc_.kill_and_reap();
  for (int i = 0; i < 20 && err_open_; ++i) drain_stderr(std::chrono::milliseconds(10));
  util::CommandResult cr;
  util::decode_wait_status(status, cr);
  // bubblewrap exits with 128 + the signal that ended the process it ran.
  if (sandboxed_ && !cr.signaled && cr.exit_code > 128 && cr.exit_code < 128 + 65) {
    cr.signaled = true;
    cr.signal = cr.exit_code - 128;
  }
  memory_limit_ = st && !cr.signaled && cr.exit_code == kWorkerExitMemoryLimit;
  std::string how = st ? (cr.signaled ? fmt::format("killed by signal {} ({})", cr.signal, util::signal_name(cr.signal))
                          : memory_limit_ ? std::string("ended at its memory limit")
                                          : fmt::format("exited with code {}", cr.exit_code))
                       : "killed";
  // The crash reporter's line first, then what the candidate printed last.
  std::string report, printed;
  std::istringstream in(err_tail_);
  for (std::string line; std::getline(in, line);) {
    constexpr std::string_view kFatal = "ksearch-worker: fatal: ";
    if (line.rfind(kFatal, 0) == 0) report = line.substr(kFatal.size());
    else printed += line + "\n";
  }
  std::string out = how;
  if (!report.empty()) out += "; " + report;
  if (!printed.empty()) {
    if (printed.size() > 1500) printed = "..." + printed.substr(printed.size() - 1500);
    out += "\nlast output of the worker:\n" + printed;
  }
  return out;
}

}  // namespace ks::eval
