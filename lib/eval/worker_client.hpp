// The parent's side of a ksearch-worker: starting it, exchanging frames with
// deadlines, and reporting how it died.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eval/protocol.hpp"
#include "eval/isolation/sandbox.hpp"
#include "ksearch/json.hpp"
#include "util/process.hpp"

namespace ks::eval {

// Finds the worker executable: `configured` when set, else $KSEARCH_WORKER,
// else next to libksearch (../libexec/ksearch/ksearch-worker, ../../libexec/..., or the same
// folder), else the build tree. Throws ks::Error(Status::not_found) listing
// the places it looked.
std::filesystem::path locate_worker(const std::filesystem::path& configured = {});

class WorkerProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // Whose code the process runs: a worker near candidates gets the
  // candidate environment (an allowlist, sandbox.hpp); a trusted helper such
  // as a task's reference oracle gets the caller's environment less every
  // credential (it needs the user's Python setup).
  enum class Code { candidate, trusted };

  // Starts the worker; does not wait for it (see wait_hello). It gets the
  // environment `code` calls for, a session of its own, and, with an active
  // `sandbox`, the confinement of `view`.
  WorkerProcess(const std::filesystem::path& exe, const std::vector<std::string>& args,
                const isolation::Sandbox* sandbox = nullptr, const isolation::SandboxView& view = {}, Code code = Code::candidate);
  // Closes the worker's stdin, gives it a moment to exit, then kills its
  // process group. No worker outlives its WorkerProcess.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Waits for the Hello reply. Throws ks::Error with the worker's own
  // status on a Fatal one (e.g. Status::no_device), or Status::subprocess
  // when it dies, stays silent or says something else.
  msg::Hello wait_hello(double timeout_s);

  // What the start cost, once wait_hello has returned: the spawn to the
  // hello, and the part of it before the worker's main() began (bubblewrap's
  // namespaces and mounts when sandboxed, the exec): the hello's started_s,
  // bounded by the total; 0 when the worker did not say.
  struct StartTimes {
    double total_s = 0;
    double to_main_s = 0;
  };
  StartTimes start_times() const { return start_times_; }

  // Throws ks::Error(Status::subprocess) when the worker has gone.
  void send(const msg::Request& request);
  // A frame as it is, in or outside the catalogue (tests feed a worker
  // malformed requests this way).
  void send_frame(const Json& frame);

  enum class Received { message, exited, timed_out, cancelled };
  // Waits for the next frame until `deadline`, keeping a tail of stderr;
  // `cancelled` within 100 ms of `*cancel` becoming true (the worker is left
  // as it is: the caller kills it). Throws ks::Error(Status::subprocess) on
  // bytes that are no frame. The caller decodes the frame with
  // msg::reply_from_json: a frame it cannot decode is the worker's fault,
  // bytes that are no frame may be a candidate's.
  Received receive(Json& frame, Clock::time_point deadline, const std::atomic<bool>* cancel = nullptr);

  // Kills the worker (if still running) and describes its end: "killed by
  // signal 11 (Segmentation fault)", plus the crash reporter's line and the
  // last lines the candidate printed.
  std::string kill_and_describe();
  // After kill_and_describe: the worker ended because it reached its memory
  // limit (kWorkerExitMemoryLimit).
  bool hit_memory_limit() const { return memory_limit_; }

  // False once the process has exited (reaped; kill_and_describe still
  // reports how).
  bool running() { return proc_.running(); }
  // The process this side started: the worker, or the bubblewrap process
  // that holds it (inside the sandbox the worker has a PID of its own).
  pid_t pid() const { return proc_.pid(); }
  const std::string& stderr_tail() const { return err_tail_; }

 private:
  void drain_stderr(std::chrono::milliseconds wait);

  bool sandboxed_;
  Clock::time_point spawned_ = Clock::now();  // before proc_, which spawns
  util::Subprocess proc_;
  FrameDecoder decoder_;
  std::string err_tail_;
  bool out_open_ = true, err_open_ = true;
  bool memory_limit_ = false;
  StartTimes start_times_;
};

}  // namespace ks::eval
