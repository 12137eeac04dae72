#include "interrupt.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "exit_codes.hpp"
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
// a temporary file, synced, renamed over the old one.
void mark_stopped(const std::filesystem::path& dir) {
  const auto file = dir / "manifest.json";
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto m = Json::try_parse(ss.str());
  if (!m || !m->is_object() || m->get_string("status") != "running") return;
  (*m)["status"] = "stopped";
  (*m)["stop_reason"] = "interrupted";
  (*m)["finished"] = utc_timestamp();
  const std::string text = m->dump(2) + "\n";
  const auto tmp = dir / "manifest.json.interrupted.tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
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
