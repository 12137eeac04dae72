// Host memory for candidate tensors with out-of-bounds detection.
//
// Every block sits between two inaccessible guard pages, its end placed as
// close to the trailing guard page as 64-byte alignment allows:
//
//   [guard page][canary ... | block | canary (< 64 B)][guard page]
//
// An access that runs into a guard page faults; the crash reporter then
// names the block ("past the end of output \"C\""). A small overrun that
// stays inside the canary bytes does not fault but is found by
// check_canaries() after every checked run.
//
// The data pages live in a sealed memfd, so a block can be mapped into a
// candidate's own process (eval/host/candidate_process.hpp) with the same
// layout: the candidate sees the block and nothing else of the worker, and
// the seals stop it from shrinking the file under the worker's mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ks::eval::host {

// Allocates `bytes` (64-byte aligned, at least one byte); throws
// ks::eval::RunError when memory is exhausted.
void* guarded_alloc(std::size_t bytes);
void guarded_free(void* p);

// Names a block for reports, e.g. "output \"C\"".
void set_guard_label(void* p, std::string_view label);

// What another process needs to map a block: its memfd (owned by the block,
// valid until guarded_free), a serial number unique for the life of the
// process, its size and label. nullopt for a pointer that is no block.
struct SharedBlock {
  int fd = -1;
  std::uint64_t serial = 0;
  std::size_t bytes = 0;
  std::size_t offset = 0;  // where the block starts in the memfd
  std::string label;
};
std::optional<SharedBlock> shared_block(const void* p);

// In a candidate's process: maps the block another process allocated (its
// memfd `fd`, `bytes` long) with the same guard pages and canary layout,
// registered under `label` for the crash reporter; returns the block's
// address, or nullptr with errno set. guarded_free() unmaps it.
void* guarded_map_shared(int fd, std::size_t bytes, std::string_view label);

// "" when the canary bytes around the block are intact; otherwise what was
// overwritten, e.g. "12 bytes past the end of output \"C\" (4096 bytes) were overwritten".
std::string check_canaries(const void* p);

// Installs handlers for fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGTRAP, SIGABRT) that write one line to stderr, starting with
// "ksearch-worker: fatal:", naming the signal, the address and, when it lies
// in a guard page, the block it overran; then the process dies of the same
// signal. Only for worker processes: a library must not take over the
// signal handlers of the program that embeds it. `sink`, when given, gets
// the line too (it runs in the signal handler: async-signal-safe calls only).
using CrashSink = void (*)(const char* line, std::size_t len);
void install_crash_reporter(CrashSink sink = nullptr);

// Tells the crash reporter the process's memory limit (RLIMIT_AS): a fatal
// signal once the address space has come within 10 % of it is reported as
// a failed allocation, and ends the process with kWorkerExitMemoryLimit (the
// run worker), or, `wait_when_out_of_memory` (a candidate's process, whose
// words decide nothing), waits there for the evaluator to read its memory
// and end it. 0: no limit.
void set_memory_limit(std::uint64_t bytes, bool wait_when_out_of_memory = false);

}  // namespace ks::eval::host
