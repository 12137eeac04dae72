#include "eval/isolation/seccomp.hpp"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

namespace ks::eval::isolation {
namespace {

// Refuses what a kernel never needs and an attacker would: new processes
// (threads are fine), exec, tracing or reading other processes, new
// namespaces, mounts, keyrings, BPF and perf. clone3 answers ENOSYS so that
// the C library falls back to clone, whose flags the filter can read.
std::vector<sock_filter> candidate_filter(bool allow_processes, pid_t own_pid) {
#if defined(__x86_64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  return {};
#endif
#if defined(__x86_64__) || defined(__aarch64__)
  const std::uint32_t eperm = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  const std::uint32_t enosys = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);
  std::vector<sock_filter> f;
  auto stmt = [&](std::uint16_t code, std::uint32_t k) { f.push_back(BPF_STMT(code, k)); };
  auto refuse = [&](long nr, std::uint32_t ret) {
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 1));
    stmt(BPF_RET | BPF_K, ret);
  };
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0));
  stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));  // the x32 ABI
  stmt(BPF_RET | BPF_K, eperm);
  if (!allow_processes) {
    refuse(SYS_fork, eperm);
    refuse(SYS_vfork, eperm);
  }
#endif
  refuse(SYS_clone3, enosys);
  if (own_pid > 0) {
    // A process in the worker's PID namespace signals only itself (and its
    // threads): never the worker, its siblings, or the user's other processes.
    for (long nr : {long{SYS_kill}, long{SYS_tgkill}, long{SYS_rt_sigqueueinfo}, long{SYS_rt_tgsigqueueinfo}}) {
      f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 4));
      stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));  // pid_t: the low 32 bits
      f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(own_pid), 0, 1));
      stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
      stmt(BPF_RET | BPF_K, eperm);
    }
    refuse(SYS_tkill, eperm);
    refuse(SYS_pidfd_send_signal, eperm);
  }
  for (long nr : {long{SYS_ptrace}, long{SYS_process_vm_readv}, long{SYS_process_vm_writev}, long{SYS_unshare},
                  long{SYS_setns}, long{SYS_mount}, long{SYS_umount2}, long{SYS_pivot_root}, long{SYS_chroot},
                  long{SYS_keyctl}, long{SYS_add_key}, long{SYS_request_key}, long{SYS_bpf},
                  long{SYS_perf_event_open}, long{SYS_userfaultfd}})
    refuse(nr, eperm);
  if (allow_processes) {
    // A new process may share nothing but its memory's copy: no new namespaces through clone.
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(SYS_clone), 0, 4));
    stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K,
                         CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                             CLONE_NEWCGROUP,
                         0, 1));
    stmt(BPF_RET | BPF_K, eperm);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    return f;
  }
  for (long nr : {long{SYS_execve}, long{SYS_execveat}}) refuse(nr, eperm);
  // clone: a thread shares the process (CLONE_THREAD); anything else is a new one.
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(SYS_clone), 0, 4));
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1));
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  stmt(BPF_RET | BPF_K, eperm);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  return f;
#endif
}

}  // namespace

std::string candidate_seccomp_program(bool allow_processes, pid_t own_pid) {
  const std::vector<sock_filter> f = candidate_filter(allow_processes, own_pid);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(sock_filter));
}

bool install_candidate_filter() {
  std::vector<sock_filter> f = candidate_filter(false, 0);
  if (f.empty()) return false;
  // No privilege can be gained from here on, and the filter holds for every
  // thread the candidate starts.
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  // SPEC_ALLOW, as container runtimes do: on kernels that tie the
  // speculative store bypass mitigation to seccomp, the filter does not
  // force it on the candidate's own code; the secrets are in other processes.
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, &prog) == 0) return true;
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}  // namespace ks::eval::isolation
