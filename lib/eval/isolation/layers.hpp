// The layers of a candidate's process inside the sandbox: its own mount
// namespace with a private /tmp and /dev/shm, a /proc of its own (or the
// worker's, with every other process covered), the evaluator's folders
// covered. One description and two executors: the C++ child a candidate's
// process is cloned as (apply_mounts, between clone and exec), and a Python
// candidate's process forked by the zygote (candidate_runner.py's
// enter_own_namespaces carries out mounts_json()). What is mounted where is
// decided here alone; docs/security.md says why each layer exists.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ksearch/json.hpp"

namespace ks::eval::isolation {

// Exit codes of a child that could not set up its layers.
inline constexpr int kExitSetupFailed = 125;  // it could not enter its namespaces
inline constexpr int kExitHideFailed = 124;   // it could not cover the folders it must not see

struct MountStep {
  enum class Op {
    tmpfs,            // an empty tmpfs on `target`, with `data` and `flags`
    proc,             // a /proc of its PID namespace; where none can be mounted, an empty tmpfs ("+noproc")
    cover_processes,  // an empty read-only tmpfs on /proc/<pid> of every process but its own ("+ownproc")
  };
  Op op = Op::tmpfs;
  std::string target;
  std::string data;         // tmpfs options
  unsigned long flags = 0;  // MS_* flags
  bool enter = false;       // its working folder after the step
  bool absent_ok = false;   // a target that does not exist is no failure
  // cover_processes: /proc/<pid> of every process and thread there was when
  // the parent prepared the step (the C++ child cannot list /proc without
  // allocating); the Python executor lists /proc itself.
  std::vector<std::string> paths;
};

// The steps for a candidate's process: `private_tmp` ("" for none) its
// TMPDIR, HOME and working folder, /dev/shm of its own, a /proc of its PID
// namespace (or the worker's, covered), and `hide` covered.
std::vector<MountStep> candidate_mounts(const std::string& private_tmp, bool pid_namespace,
                                        const std::vector<std::string>& hide);

// The steps as data for the Python executor.
Json mounts_json(const std::vector<MountStep>& steps);

// Carries out `steps` in the calling process's own mount namespace, which
// it may change (its user namespace holds the capabilities). For a child
// between clone and exec: no allocation. Appends each layer's name to
// `isolation` (a buffer of `cap` bytes). Returns 0, or kExitHideFailed.
int apply_mounts(const std::vector<MountStep>& steps, char* isolation, std::size_t cap);

// A folder in the worker's /tmp for candidates to mount their own tmpfs on;
// made once per worker, mode 0700. In every candidate's mount namespace it
// is a mount point, which no candidate can remove or replace. Throws
// RunError, every time, when it cannot be made.
const std::string& private_tmp_mount_point();

// /proc/<pid> of every process and thread there is now.
std::vector<std::string> process_entries();

}  // namespace ks::eval::isolation
