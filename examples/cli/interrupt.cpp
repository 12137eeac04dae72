#include "interrupt.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "exit_codes.hpp"
#include "ksearch/io.hpp"
#include "ksearch/json.hpp"
#include "ksearch/run_store.hpp"

namespace ks::cli {

namespace {

// SIGUSR1 wakes the watcher when the command is done with it.
sigset_t watched() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGUSR1);
  return s;
}

// Rewrites manifest.json with status "stopped" the way the run store does:
// a temporary file, synced, renamed over the old one; never through a link.
void mark_stopped(const std::filesystem::path& dir) {
  const auto file = dir / "manifest.json";
  try {
    auto m = Json::try_parse(read_file(file, std::size_t{64} << 20, false));
    if (!m || !m->is_object() || m->get_string("status") != "running") return;
    (*m)["status"] = "stopped";
    (*m)["stop_reason"] = ks::to_string(ks::StopReason::interrupted);
    (*m)["finished"] = utc_timestamp();
    write_file_atomic(file, m->dump(2) + "\n");
  } catch (const std::exception&) {
    // Stopping at once matters more; a resume finds the run "running" and continues it.
  }
}

}  // namespace

Interrupts::Interrupts() {
  sigset_t s = watched();
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
  watcher_ = std::thread([this] { watch(); });
}

Interrupts::~Interrupts() {
  quitting_ = true;
  pthread_kill(watcher_.native_handle(), SIGUSR1);
  watcher_.join();
  // A stop asked for during the run has been honoured; later signals get
  // their usual meaning again.
  sigset_t s = watched();
  sigdelset(&s, SIGUSR1);
  pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
}

void Interrupts::set_run_dir(const std::filesystem::path& dir) {
  std::lock_guard lock(mu_);
  run_dir_ = dir;
}

void Interrupts::watch() {
  sigset_t s = watched();
  for (;;) {
    int sig = 0;
    if (sigwait(&s, &sig) != 0) continue;
    if (sig == SIGUSR1) {
      if (quitting_) return;
      continue;
    }
    const char* what = sig == SIGINT ? "Ctrl-C" : "SIGTERM";
    std::filesystem::path dir;
    {
      std::lock_guard lock(mu_);
      dir = run_dir_;
    }
    if (dir.empty()) {  // before the run started (its checks): nothing to keep
      std::fprintf(stderr, "\nksearch: %s: stopped before the run started\n", what);
      std::_Exit(kExitInterrupted);
    }
    if (count_.fetch_add(1) == 0) {
      std::fprintf(stderr, "\nksearch: %s: stopping after the current round; the run can be resumed. Interrupt again "
                   "to stop at once.\n", what);
      continue;
    }
    mark_stopped(dir);
    std::fprintf(stderr, "ksearch: %s again: stopped at once; resume with `ksearch resume %s`\n", what,
                 dir.string().c_str());
    // Worker processes notice their parent is gone and end themselves.
    std::_Exit(kExitInterrupted);
  }
}

}  // namespace ks::cli
