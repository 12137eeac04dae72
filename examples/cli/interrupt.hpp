// Ctrl-C and SIGTERM during a run or resume. The first asks the run to stop
// after the current round (the folder stays resumable) and says so; the
// second ends the process at once, after marking the run's manifest
// "stopped" so `ksearch show` does not call a dead run "running".
#pragma once

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

namespace ks::cli {

class Interrupts {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread, and so in every thread
  // started after it, and takes them on a thread of its own. Construct it
  // before the library starts any thread.
  Interrupts();
  ~Interrupts();
  Interrupts(const Interrupts&) = delete;
  Interrupts& operator=(const Interrupts&) = delete;

  bool requested() const { return count_.load() > 0; }
  // The run folder, once known: the second interrupt marks its manifest.
  void set_run_dir(const std::filesystem::path& dir);

 private:
  void watch();
  std::atomic<int> count_{0};
  std::atomic<bool> quitting_{false};
  std::mutex mu_;
  std::filesystem::path run_dir_;
  std::thread watcher_;
};

}  // namespace ks::cli
