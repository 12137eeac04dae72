// Compiles host candidates with the system C++ compiler into shared objects,
// cached by content: the same sources, plan, parameters, flags, compiler and
// CPU give the same artifact without running the compiler again.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "eval/backend.hpp"
#include "eval/isolation/sandbox.hpp"

namespace ks::eval::host {

struct HostCompilerOptions {
  std::string compiler;   // empty: $KSEARCH_CXX, else $CXX, else "c++"
  std::string cache_dir;  // used when a request names none; empty: <default cache>/host
  // Runs the compiler inside it (seeing only its build folder and the system);
  // null or inactive: unconfined. The compiler gets the candidate
  // environment either way.
  const isolation::Sandbox* sandbox = nullptr;
  // Set from another thread: a compilation in flight is killed and
  // compile() throws ks::Error(Status::cancelled).
  const std::atomic<bool>* cancel = nullptr;
};

// The flags every host candidate is compiled with (before parameter macros
// and user flags).
std::vector<std::string> host_base_flags();

// Thread-safe: the evaluator compiles several candidates at once.
std::unique_ptr<Compiler> make_host_compiler(const HostCompilerOptions& options = {});

}  // namespace ks::eval::host
