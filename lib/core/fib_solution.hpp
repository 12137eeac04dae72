// FlashInfer-Bench Solution JSON (benchmark-suites.md §3.3) as a libksearch
// Solution. python and triton Solutions are evaluated as they are. cpp and
// cuda ones are built the way FlashInfer-Bench builds them (a PyTorch
// extension, or tvm-ffi) inside the sandboxed Python candidate: they become a
// python solution whose one module (fib_extension_loader.py, generated)
// carries the Solution and builds it when imported.
#pragma once

#include <optional>
#include <string>

#include "ksearch/json.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"

namespace ks::core {

// The generated module's file name.
inline constexpr const char* kExtensionLoaderFile = "fib_extension.py";

// The Solution `j` for `task` (its "definition" must be the task's). Throws
// ks::Error (invalid_argument) naming the field at fault.
Solution import_flashinfer_solution(const Json& j, const TaskSpec& task);

// For a solution made by import_flashinfer_solution from a cpp or cuda
// Solution, and unchanged since: that Solution, its spec with binding and
// destination_passing_style written out. Otherwise nullopt.
std::optional<Json> extension_solution_of(const Solution& s);

}  // namespace ks::core
