// The seccomp filter of every candidate's process: what no kernel needs and
// an attacker would (new processes, exec, tracing or reading other
// processes, new namespaces, mounts, keyrings, BPF, perf). A host C++
// candidate's process installs it itself before it loads the candidate; a
// Python candidate's runner gets the program (candidate_seccomp_program)
// and installs it before the candidate's code runs. docs/security.md lists
// what it refuses.
#pragma once

#include <sys/types.h>

#include <string>

namespace ks::eval::isolation {

// The filter as raw `struct sock_filter` entries. With `allow_processes`,
// fork and exec stay allowed (Triton runs ptxas and a C compiler); with
// `own_pid` (a process in the worker's PID namespace), signals may go to
// that process only. Empty where no filter exists for this CPU.
std::string candidate_seccomp_program(bool allow_processes, pid_t own_pid = 0);

// Installs the filter (no processes, no exec) on this process and every
// thread it starts, with no_new_privs. False where it cannot.
bool install_candidate_filter();

}  // namespace ks::eval::isolation
