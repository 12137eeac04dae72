// The Python zygote (CandidateProcessOptions::zygote): the worker's
// long-lived Python, which has imported PyTorch (and Triton) once and forks
// one process per Python candidate. It is started by spawn() like any
// candidate process, but as uid 0 of its user namespace, so that it keeps
// the capabilities a forked child needs to build its own namespaces
// (candidate_runner.py's enter_own_namespaces, which carries out the steps
// of eval/isolation/layers.hpp); it never runs candidate code and is
// non-dumpable. A forked process is adopted by the worker: the zygote forks
// through an intermediate process that exits at once while the worker is a
// child subreaper, so the worker stops, continues and reaps it as it does a
// process it started itself. In a PID namespace of its own the candidate's
// process is the second one, after an idle init the worker adopts too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ks::eval::host {

// What makes one zygote serve a candidate: one per interpreter, imports and limit.
struct ZygoteKind {
  std::vector<std::string> interpreter;  // CandidateProcessOptions::command
  std::string imports;                   // CandidateProcessOptions::zygote_imports
  std::uint64_t rlimit_as = 0;           // its children's address-space limit, which it imports under
  bool operator==(const ZygoteKind&) const = default;
};

// fork_through_zygote's answer when a process may have been made with the
// socket and pipe it was given (the zygote died or broke the protocol after
// the request): the caller must not give them to another.
inline constexpr pid_t kZygoteUnclear = -2;

// Asks the zygote (started when there is none of this kind) for a process
// that serves `sock` and writes to `out`, set up as `spec` (JSON) says.
// Returns its process id (a child of this process now), or -1 where the
// caller starts the process directly instead; `*init` gets the idle init
// of its PID namespace (a child of this process too), or -1.
pid_t fork_through_zygote(const ZygoteKind& kind, const std::string& spec, int sock, int out, pid_t* init);

// No zygote from now on in this process: candidates are started directly.
void disable_zygote();

// The process id of this worker's Python zygote, -1 when none runs; and its
// end (the next candidate that wants one starts it again).
pid_t python_zygote_pid();
void end_python_zygote();
// Why the zygote last refused to fork ("" when it never did), for messages.
std::string python_zygote_problem();

}  // namespace ks::eval::host
