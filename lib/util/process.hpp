// Child processes: started with pipes, in their own process group, and
// always ended. Used for worker processes, the host compiler and the
// `command` LLM policy.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ks::util {

struct SpawnOptions {
  std::vector<std::string> argv;                  // argv[0] is looked up in PATH when it has no '/'
  // The child's environment: the parent's, less env_unset, plus env_set; or,
  // with clear_env, env_set alone (processes that run untrusted code get an
  // environment built from an allowlist, never the caller's whole one).
  std::map<std::string, std::string> env_set;
  std::vector<std::string> env_unset;
  bool clear_env = false;
  // setsid() instead of setpgid(): a session of its own, so the child has no
  // controlling terminal to inject input into; still its own process group.
  bool new_session = false;
  std::string cwd;                                // empty: inherit
  bool pipe_stdin = true;
  bool pipe_stdout = true;
  bool pipe_stderr = true;                        // false: stderr goes to the parent's stderr
  // With pipe_stdout false: the child's stdout goes where its stderr goes, not
  // to the parent's stdout (which may carry the program's own output, e.g. JSON).
  bool stdout_to_stderr = false;
  // Ask the kernel to SIGKILL the child when the thread that spawned it dies.
  // Only safe when the spawning thread outlives the child (synchronous use).
  bool die_with_parent_thread = false;
  // The same for the whole process: the child is forked by a thread that
  // lives as long as the process, so it dies with the process and not with
  // a short-lived thread that happened to start it (long-lived workers).
  bool die_with_parent_process = false;
};

// A running child. The destructor kills the whole process group and reaps
// it, so no process outlives its owner.
class Subprocess {
 public:
  // Throws ks::Error(Status::subprocess) when the program cannot be started,
  // with the exec error (e.g. "No such file or directory").
  explicit Subprocess(const SpawnOptions& opts);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  int stdin_fd() const { return in_; }
  int stdout_fd() const { return out_; }
  int stderr_fd() const { return err_; }
  void close_stdin();

  // Non-blocking check; returns the wait status once the child has exited.
  std::optional<int> poll_exit();
  // Waits up to `timeout`; returns the wait status, or nullopt on timeout.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // SIGKILLs the process group and reaps the child; returns its wait status.
  int kill_and_reap();
  bool running();

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::optional<int> status_;
};

struct CommandResult {
  int exit_code = -1;        // valid when !signaled && !timed_out
  int signal = 0;            // the terminating signal, when signaled
  bool signaled = false;
  bool timed_out = false;
  bool output_truncated = false;
  bool cancelled = false;    // `cancel` was set: the program was killed
  std::string out;
  std::string err;
  double wall_s = 0;
  bool ok() const { return !timed_out && !signaled && exit_code == 0; }
  // "exit code 2", "killed by signal 11 (Segmentation fault)", "timed out after 5.0 s"
  std::string describe() const;
};

// Runs a program to completion, feeding `input` on stdin and capturing at
// most `max_output` bytes of each stream; kills it after `timeout_s`, or
// within 100 ms of `*cancel` becoming true (another thread's request).
CommandResult run_command(SpawnOptions opts, const std::string& input, double timeout_s,
                          std::size_t max_output = 16u << 20, const std::atomic<bool>* cancel = nullptr);

// "Segmentation fault" etc.
std::string signal_name(int sig);

// Turns a wait status into CommandResult's exit fields.
void decode_wait_status(int status, CommandResult& r);

// Reads up to `max` bytes available within `timeout`; returns false on EOF.
bool read_some(int fd, std::string& out, std::size_t max, std::chrono::milliseconds timeout);
// Writes everything (retrying on EINTR/EAGAIN); returns false if the reader is gone.
bool write_all_fd(int fd, const void* data, std::size_t size);

}  // namespace ks::util
