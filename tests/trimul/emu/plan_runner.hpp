// Executes a CUDA launch plan (docs/launch-plan.md) on the host emulation:
// picks the variant, allocates scratch filled with the poison pattern,
// evaluates grids, blocks, shared memory and arguments, and launches each
// kernel in order. Test-only; the CUDA backend does the same on a GPU.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "emu/kernel_table.hpp"
#include "ksearch/json.hpp"
#include "ksearch/launch_plan.hpp"
#include "util/expr.hpp"

namespace ks_emu {

// Host memory standing in for a device buffer: poisoned with 0xFF (a NaN for
// floats, like the evaluator), 16-byte aligned, with guard bytes on both
// sides so a kernel writing out of bounds is caught.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(std::size_t bytes = 0);
  void* data() { return storage_.data() + kGuard; }
  const void* data() const { return storage_.data() + kGuard; }
  std::size_t bytes() const { return bytes_; }
  // Throws std::runtime_error naming `what` when a guard byte changed.
  void check_guards(const std::string& what) const;

 private:
  static constexpr std::size_t kGuard = 256;
  std::size_t bytes_ = 0;
  std::vector<unsigned char> storage_;
};

struct PlanRunStats {
  std::vector<std::string> kernels;  // launched, in order
};

// GEMM steps run as a plain host GEMM (f32 accumulation) with the plan's
// row-major semantics, reading operand dtypes from `dtypes` (the tensors')
// and the scratch declarations; a step whose "when" is zero is skipped.
// `tensors` maps the task's tensor names to their buffers; `vars` holds the
// workload's dimensions, the solution's parameter values and integer scalar
// inputs; `scalars` the task's scalar inputs (a bare name passes the value,
// floating ones are readable in typed expressions). Throws
// std::runtime_error (or ks::Error for a malformed expression) naming the
// kernel and the problem.
PlanRunStats run_plan(const KernelTable& table, const ks::LaunchPlan& plan,
                      std::map<std::string, GuardedBuffer*> tensors, const ks::util::Vars& vars,
                      const std::map<std::string, double>& scalars = {},
                      std::map<std::string, ks::DType> dtypes = {});

}  // namespace ks_emu
