// Starting a candidate's process (or the Python zygote) directly: clone
// with its namespaces, its layers (eval/isolation/layers.hpp), its output
// pipe and socket on descriptors 1, 2 and 3, nothing else of the worker's,
// then exec. CandidateProcess and the zygote both start processes so.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "eval/isolation/layers.hpp"

namespace ks::eval::host {

// Everything the child needs, prepared before clone(): between clone and
// exec a child of a threaded process may only make system calls.
struct ChildSetup {
  int sock = -1;
  int out = -1;  // the write end of the pipe its stdout and stderr go to
  bool namespaces = false;
  std::string uid_map, gid_map;
  std::string exe;
  std::vector<std::string> args;
  char isolation[64] = "process";  // filled in by the child, passed on in argv
  std::vector<char*> argv;
  std::vector<std::string> env;    // the whole environment, when it differs from the worker's
  std::vector<char*> envp;
  std::uint64_t rlimit_as = 0;     // set before exec (a Python candidate's process)
  bool pid_namespace = true;
  // Its layers (isolation/layers.hpp), with namespaces: the private /tmp
  // (also its TMPDIR and HOME; "" for none) and the folders it must not see.
  std::string private_tmp;
  std::vector<std::string> hide;
  bool layers = true;  // false: none (the zygote, whose children set up their own)
  std::vector<isolation::MountStep> mounts;  // made by spawn() from the above
};

// Clones and execs the process `setup` describes; its pid, or -1 (errno
// set). With namespaces: a new user, mount (and PID) namespace where it is
// uid 1000 (uid_map), with setup.mounts carried out before exec.
pid_t spawn(ChildSetup& setup);

}  // namespace ks::eval::host
