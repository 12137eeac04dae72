#include "eval/host/child_spawn.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

extern char** environ;

namespace ks::eval::host {
namespace {

bool write_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

void append(char* dst, std::size_t cap, const char* s) {
  std::size_t n = std::strlen(dst);
  while (*s && n + 1 < cap) dst[n++] = *s++;
  dst[n] = '\0';
}

int child_main(void* arg) {
  auto* c = static_cast<ChildSetup*>(arg);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // A session and process group of its own: kill(0, ...) reaches only it.
  ::setsid();
  if (c->namespaces) {
    // Its own user namespace, where it is an ordinary user: exec drops every
    // capability. Its own PID namespace: the worker and the sandbox's other
    // processes cannot be seen, signalled or traced from it.
    write_file("/proc/self/setgroups", "deny");
    if (!write_file("/proc/self/uid_map", c->uid_map) || !write_file("/proc/self/gid_map", c->gid_map))
      ::_exit(isolation::kExitSetupFailed);
    append(c->isolation, sizeof c->isolation, c->pid_namespace ? "+pidns" : "+userns");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) {
      if (const int failed = isolation::apply_mounts(c->mounts, c->isolation, sizeof c->isolation)) ::_exit(failed);
    } else if (!c->mounts.empty()) {
      ::_exit(isolation::kExitHideFailed);
    }
  }
  // Its output goes to the worker, which keeps a tail for failure reports.
  if (::dup2(c->out, 1) != 1 || ::dup2(c->out, 2) != 2) ::_exit(127);
  // Descriptor 3 is the socket; nothing else of the worker's stays open.
  if (c->sock == 3) {
    ::fcntl(3, F_SETFD, 0);
  } else if (::dup2(c->sock, 3) != 3) {
    ::_exit(127);
  }
  if (::syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
    for (int fd = 4; fd < 4096; ++fd) ::close(fd);
  if (c->rlimit_as > 0) {
    rlimit lim{static_cast<rlim_t>(c->rlimit_as), static_cast<rlim_t>(c->rlimit_as)};
    if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(127);
  }
  ::execve(c->exe.c_str(), c->argv.data(), c->envp.empty() ? environ : c->envp.data());
  ::_exit(127);
}

}  // namespace

pid_t spawn(ChildSetup& setup) {
  // Listed now: a zygote started just before is covered too.
  setup.mounts.clear();
  if (setup.namespaces && setup.layers)
    setup.mounts = isolation::candidate_mounts(setup.private_tmp, setup.pid_namespace, setup.hide);
  constexpr std::size_t kStack = 256 * 1024;
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  int flags = SIGCHLD;
  if (setup.namespaces) flags |= CLONE_NEWUSER | CLONE_NEWNS | (setup.pid_namespace ? CLONE_NEWPID : 0);
  const pid_t pid = ::clone(child_main, static_cast<char*>(stack) + kStack, flags, &setup);
  const int e = errno;
  ::munmap(stack, kStack);  // the child has its own copy
  errno = e;
  return pid;
}

}  // namespace ks::eval::host
