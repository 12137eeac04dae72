#include "util/process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "ksearch/error.hpp"

extern char** environ;

namespace ks::util {
namespace {

using Clock = std::chrono::steady_clock;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(Status::subprocess, fmt::format("pipe: {}", std::strerror(errno)));
}

// Writes in the child between fork and exec: only async-signal-safe calls.
void child_fail(int fd, int err) {
  ssize_t r = ::write(fd, &err, sizeof err);
  (void)r;
  ::_exit(127);
}

// Runs `fork` on a thread that lives as long as the process, so a child's
// PR_SET_PDEATHSIG (which follows the forking *thread*) fires only when the
// process ends. The thread is detached: it is never joined, it just waits.
pid_t run_on_lasting_thread(const std::function<pid_t()>& fork) {
  struct Lasting {
    std::mutex m;
    std::condition_variable cv;
    const std::function<pid_t()>* job = nullptr;
    pid_t result = -1;
    int error = 0;
    bool done = false;
    std::mutex one_at_a_time;
    Lasting() {
      std::thread([this] {
        std::unique_lock lock(m);
        for (;;) {
          cv.wait(lock, [&] { return job != nullptr; });
          result = (*job)();
          error = errno;
          job = nullptr;
          done = true;
          cv.notify_all();
        }
      }).detach();
    }
  };
  static Lasting* lasting = new Lasting;  // never destroyed: its thread outlives static destruction
  std::lock_guard serial(lasting->one_at_a_time);
  std::unique_lock lock(lasting->m);
  lasting->done = false;
  lasting->job = &fork;
  lasting->cv.notify_all();
  lasting->cv.wait(lock, [&] { return lasting->done; });
  errno = lasting->error;
  return lasting->result;
}

// Writing to a pipe whose reader has gone raises SIGPIPE, which would kill
// the host program. A library must not change the process-wide disposition,
// so block the signal in this thread for the write and swallow a pending one.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending_before_);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SigpipeGuard() {
    if (!sigismember(&pending_before_, SIGPIPE)) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      timespec zero{0, 0};
      while (sigtimedwait(&set, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t old_;
  sigset_t pending_before_;
};

}  // namespace

Subprocess::Subprocess(const SpawnOptions& opts) {
  if (opts.argv.empty()) throw Error(Status::invalid_argument, "spawn: empty argv");
  // Build everything the child needs before fork().
  std::vector<std::string> env_strings;
  for (char** e = opts.clear_env ? nullptr : environ; e && *e; ++e) {
    std::string_view kv(*e);
    std::string key(kv.substr(0, kv.find('=')));
    if (opts.env_set.count(key)) continue;
    bool drop = false;
    for (const auto& u : opts.env_unset) drop = drop || u == key;
    if (!drop) env_strings.emplace_back(kv);
  }
  for (const auto& [k, v] : opts.env_set) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = opts.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  // Resolve the program in PATH now (execvpe is not async-signal-safe with a custom env).
  std::string prog = args[0];
  if (prog.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string_view p = path ? path : "/usr/bin:/bin";
    std::string found;
    while (!p.empty()) {
      auto c = p.find(':');
      std::string dir(p.substr(0, c));
      std::string cand = (dir.empty() ? "." : dir) + "/" + prog;
      if (::access(cand.c_str(), X_OK) == 0) {
        found = cand;
        break;
      }
      if (c == std::string_view::npos) break;
      p.remove_prefix(c + 1);
    }
    if (found.empty())
      throw Error(Status::subprocess, fmt::format("cannot start \"{}\": not found in PATH", prog));
    prog = found;
  }

  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, status_pipe[2];
  if (opts.pipe_stdin) make_pipe(in);
  if (opts.pipe_stdout) make_pipe(out);
  if (opts.pipe_stderr) make_pipe(err);
  make_pipe(status_pipe);
  pid_t parent = ::getpid();

  const bool deathsig = opts.die_with_parent_thread || opts.die_with_parent_process;
  auto do_fork = [&]() -> pid_t {
    pid_t child = ::fork();
    if (child != 0) return child;
    if (opts.new_session) ::setsid();
    else ::setpgid(0, 0);
    if (deathsig) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    // Restore default signal dispositions the parent may have changed.
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (in[0] >= 0 && ::dup2(in[0], 0) < 0) child_fail(status_pipe[1], errno);
    if (out[1] >= 0 && ::dup2(out[1], 1) < 0) child_fail(status_pipe[1], errno);
    if (err[1] >= 0 && ::dup2(err[1], 2) < 0) child_fail(status_pipe[1], errno);
    if (opts.stdout_to_stderr && out[1] < 0 && ::dup2(2, 1) < 0) child_fail(status_pipe[1], errno);
    // Close every other inherited descriptor, whatever its CLOEXEC flag (a
    // child holding another worker's pipe would keep it from seeing its
    // parent hang up).
    const unsigned keep = static_cast<unsigned>(status_pipe[1]);
    if (::syscall(SYS_close_range, 3u, keep - 1, 0u) != 0 || ::syscall(SYS_close_range, keep + 1, ~0u, 0u) != 0)
      for (int fd = 3; fd < 65536; ++fd)
        if (fd != status_pipe[1]) ::close(fd);
    if (!opts.cwd.empty() && ::chdir(opts.cwd.c_str()) != 0) child_fail(status_pipe[1], errno);
    ::execve(prog.c_str(), argv.data(), envp.data());
    child_fail(status_pipe[1], errno);
    return -1;  // not reached
  };
  pid_t pid = opts.die_with_parent_process ? run_on_lasting_thread(do_fork) : do_fork();
  if (pid < 0) {
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1], &status_pipe[0], &status_pipe[1]})
      close_fd(*fd);
    throw Error(Status::subprocess, fmt::format("fork: {}", std::strerror(errno)));
  }
  // Also from the parent, to close the race with kill(). Not for a new
  // session: setsid() fails in a child that is already a group leader.
  if (!opts.new_session) ::setpgid(pid, pid);
  pid_ = pid;
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(status_pipe[1]);
  in_ = in[1];
  out_ = out[0];
  err_ = err[0];
  int child_errno = 0;
  ssize_t n;
  do n = ::read(status_pipe[0], &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  close_fd(status_pipe[0]);
  if (n == sizeof child_errno) {
    kill_and_reap();
    close_fd(in_);
    close_fd(out_);
    close_fd(err_);
    throw Error(Status::subprocess,
                fmt::format("cannot start \"{}\": {}", args[0], std::strerror(child_errno)));
  }
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !status_) kill_and_reap();
  close_fd(in_);
  close_fd(out_);
  close_fd(err_);
}

void Subprocess::close_stdin() { close_fd(in_); }

std::optional<int> Subprocess::poll_exit() {
  if (status_) return status_;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    // Reap stray grandchildren left in the group.
    ::kill(-pid_, SIGKILL);
  }
  return status_;
}

std::optional<int> Subprocess::wait_for(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  auto step = std::chrono::microseconds(200);
  for (;;) {
    if (auto s = poll_exit()) return s;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(step);
    step = std::min<std::chrono::microseconds>(step * 2, std::chrono::milliseconds(20));
  }
}

int Subprocess::kill_and_reap() {
  if (status_) return *status_;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int st = 0;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  status_ = st;
  return st;
}

bool Subprocess::running() { return !poll_exit().has_value(); }

std::string signal_name(int sig) {
  const char* d = ::strsignal(sig);
  return d ? std::string(d) : fmt::format("signal {}", sig);
}

void decode_wait_status(int status, CommandResult& r) {
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
    r.signaled = false;
  } else if (WIFSIGNALED(status)) {
    r.signaled = true;
    r.signal = WTERMSIG(status);
  }
}

std::string CommandResult::describe() const {
  if (timed_out) return fmt::format("timed out after {:.1f} s", wall_s);
  if (signaled) return fmt::format("killed by signal {} ({})", signal, signal_name(signal));
  return fmt::format("exit code {}", exit_code);
}

bool read_some(int fd, std::string& out, std::size_t max, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (r <= 0) return true;  // timeout or EINTR: nothing yet, not EOF
  char buf[65536];
  ssize_t n = ::read(fd, buf, std::min(sizeof buf, max == 0 ? sizeof buf : max));
  if (n == 0) return false;
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  out.append(buf, static_cast<std::size_t>(n));
  return true;
}

bool write_all_fd(int fd, const void* data, std::size_t size) {
  SigpipeGuard guard;
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd pf{fd, POLLOUT, 0};
        ::poll(&pf, 1, 100);
        continue;
      }
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

CommandResult run_command(SpawnOptions opts, const std::string& input, double timeout_s,
                          std::size_t max_output, const std::atomic<bool>* cancel) {
  opts.pipe_stdin = true;
  opts.pipe_stdout = true;
  opts.pipe_stderr = true;
  opts.die_with_parent_thread = true;
  CommandResult r;
  auto start = Clock::now();
  Subprocess p(opts);
  // Feed stdin without blocking on a child that does not read it.
  ::fcntl(p.stdin_fd(), F_SETFL, ::fcntl(p.stdin_fd(), F_GETFL) | O_NONBLOCK);
  std::size_t written = 0;
  bool in_open = true;
  if (input.empty()) {
    p.close_stdin();
    in_open = false;
  }
  bool out_open = true, err_open = true;
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(timeout_s));
  while (out_open || err_open || in_open) {
    if (cancel && cancel->load()) {
      r.cancelled = true;
      break;
    }
    if (Clock::now() >= deadline) {
      r.timed_out = true;
      break;
    }
    pollfd fds[3];
    int n = 0;
    int i_out = -1, i_err = -1, i_in = -1;
    if (out_open) { i_out = n; fds[n++] = {p.stdout_fd(), POLLIN, 0}; }
    if (err_open) { i_err = n; fds[n++] = {p.stderr_fd(), POLLIN, 0}; }
    if (in_open) { i_in = n; fds[n++] = {p.stdin_fd(), POLLOUT, 0}; }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    int pr = ::poll(fds, static_cast<nfds_t>(n), static_cast<int>(std::max<long long>(1, std::min<long long>(left.count(), 100))));
    if (pr < 0 && errno != EINTR) break;
    auto drain = [&](int idx, int fd, std::string& dst, bool& open) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      char buf[65536];
      ssize_t k = ::read(fd, buf, sizeof buf);
      if (k <= 0) {
        if (k == 0 || (errno != EINTR && errno != EAGAIN)) open = false;
        return;
      }
      std::size_t room = dst.size() < max_output ? max_output - dst.size() : 0;
      if (static_cast<std::size_t>(k) > room) r.output_truncated = true;
      dst.append(buf, std::min<std::size_t>(room, static_cast<std::size_t>(k)));
    };
    drain(i_out, p.stdout_fd(), r.out, out_open);
    drain(i_err, p.stderr_fd(), r.err, err_open);
    if (i_in >= 0 && (fds[i_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      if (fds[i_in].revents & (POLLERR | POLLHUP)) {
        p.close_stdin();
        in_open = false;
      } else {
        ssize_t k;
        {
          SigpipeGuard guard;
          k = ::write(p.stdin_fd(), input.data() + written, input.size() - written);
        }
        if (k > 0) written += static_cast<std::size_t>(k);
        else if (k < 0 && errno != EAGAIN && errno != EINTR) written = input.size();
        if (written >= input.size()) {
          p.close_stdin();
          in_open = false;
        }
      }
    }
  }
  int status;
  if (r.timed_out || r.cancelled) {
    status = p.kill_and_reap();
  } else {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    std::optional<int> st;
    // The streams are closed but the program may linger: still in slices, for `cancel`.
    while (!st && left.count() > 0 && !(cancel && cancel->load())) {
      st = p.wait_for(std::min(left, std::chrono::milliseconds(100)));
      left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    }
    if (!st) st = p.wait_for(std::chrono::milliseconds(1));
    if (!st && cancel && cancel->load()) {
      r.cancelled = true;
      status = p.kill_and_reap();
    } else if (!st) {
      r.timed_out = true;
      status = p.kill_and_reap();
    } else {
      status = *st;
    }
  }
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (!r.timed_out && !r.cancelled) decode_wait_status(status, r);
  return r;
}

}  // namespace ks::util
