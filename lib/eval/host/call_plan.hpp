// The call plan of a host candidate (docs/launch-plan.md): which C++
// functions to call, in order, with which tensors, scratch buffers and
// scalar values; per-shape variants; and the typed shims generated for it.
#pragma once

#include <string>
#include <vector>

#include "ksearch/json.hpp"
#include "ksearch/launch_plan.hpp"
#include "ksearch/types.hpp"
#include "util/expr.hpp"

namespace ks::eval::host {

struct HostArg {
  enum class Kind { tensor, scratch, value };
  Kind kind = Kind::value;
  std::string text;         // tensor or scratch name, or the expression as written
  DType dtype = DType::i64; // tensor element type, or the scalar's type (i64 unless typed or a scalar input)
  bool is_const = false;    // task inputs are passed as const T*
  util::Expr expr;        // for values
};

struct HostCall {
  std::string fn;            // the C++ function (or qualified name / template-id) to call
  std::vector<HostArg> args;
  std::string shim;          // the generated extern "C" entry, e.g. "ks_call_0_1"
};

struct HostScratch {
  std::string name;
  DType dtype = DType::u8;
  std::vector<util::Expr> shape;  // element count = product (empty with `bytes`)
  util::Expr bytes;               // explicit size in bytes, when given instead of dtype + shape
};

struct HostPlanBody {
  std::vector<HostCall> calls;
  std::vector<HostScratch> scratch;
};

struct HostPlan {
  HostPlanBody main;
  struct Variant {
    util::Expr when;
    HostPlanBody body;
  };
  std::vector<Variant> variants;

  // Compiles a call plan; strings naming one of `tensors` are tensor arguments.
  // Throws ks::Error(Status::invalid_argument) with a message starting
  // "call plan:" and naming the bad field.
  static HostPlan parse(const LaunchPlan& plan, const std::vector<TensorSpec>& tensors);
  // The same for a plan's JSON, read by ks::LaunchPlan::from_json first.
  static HostPlan parse(const Json& plan, const std::vector<TensorSpec>& tensors);

  // The body whose `when` holds first, else the main one. Throws
  // ks::Error(Status::invalid_argument) when a `when` cannot be evaluated.
  const HostPlanBody& select(const util::Vars& vars) const;

  std::vector<const HostCall*> all_calls() const;
};

// C++ source of one `extern "C" void <shim>(void* const* args)` per call:
// args[i] is the address of argument i's value (a pointer for tensors and
// scratch), cast to the typed parameter the call plan implies.
std::string generate_shims(const HostPlan& plan);

// "matmul(const float* A, const float* B, float* C, int64_t M, ...)": how the
// plan calls a function, for compile errors the model can act on.
std::string describe_call(const HostCall& call);

}  // namespace ks::eval::host
