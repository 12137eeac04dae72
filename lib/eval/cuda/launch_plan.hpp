// Launch plans (docs/launch-plan.md) in executable form: compiled from the
// typed ks::LaunchPlan (expressions parsed), and resolved against one
// workload, a compiled module and a device's limits. Both steps are pure
// functions of their inputs, so every rule is checked (and tested) without a
// GPU, and every error is phrased for the model that wrote the plan.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "eval/backend.hpp"
#include "eval/cuda/cubin.hpp"
#include "ksearch/json.hpp"
#include "ksearch/launch_plan.hpp"
#include "ksearch/types.hpp"
#include "util/expr.hpp"

namespace ks::eval::cuda {

struct PlanArg {
  enum class Kind { name_or_expr, f32, f64, i32, i64 };
  Kind kind = Kind::name_or_expr;
  std::string text;   // the argument as written
  util::Expr expr;  // parsed; for name_or_expr a bare identifier may also be a buffer name
};

// A GEMM step (ks::LaunchPlan::Gemm) with its expressions parsed; an
// optional expression that is absent keeps its default.
struct PlanGemm {
  ks::LaunchPlan::Gemm typed;  // buffer names, transposes, epilogue, compute
  util::Expr m, n, k;
  std::optional<util::Expr> lda, ldb, ldc, ldd, batch, stride_a, stride_b, stride_c, stride_d, alpha, beta, algo;
};

struct PlanLaunch {
  std::optional<util::Expr> when;  // the step runs only where non-zero
  std::optional<PlanGemm> gemm;    // a GEMM step: the fields below are unused
  std::string kernel;  // as written: "row_softmax" or a name expression "gemm<128, 64>"
  std::array<util::Expr, 3> grid, block, cluster;
  bool has_cluster = false;
  util::Expr shared_bytes;
  std::vector<PlanArg> args;
};

struct PlanScratch {
  std::string name;
  std::optional<DType> dtype;         // with shape
  std::vector<util::Expr> shape;
  util::Expr bytes;                 // or a size in bytes
};

struct PlanBody {
  std::vector<PlanLaunch> kernels;
  std::vector<PlanScratch> scratch;
};

struct PlanVariant {
  util::Expr when;
  PlanBody body;
  bool has_scratch = false;  // a variant without "scratch" keeps the top-level buffers
};

class LaunchPlan {
 public:
  // Throws ks::Error(Status::invalid_argument) naming the field:
  // "launch plan: kernels[0].grid[1]: expression \"R/\": ...".
  static LaunchPlan parse(const ks::LaunchPlan& plan);
  // The same for a plan's JSON, read by ks::LaunchPlan::from_json first.
  static LaunchPlan parse(const Json& plan);

  const PlanBody& top() const { return top_; }
  const std::vector<PlanVariant>& variants() const { return variants_; }
  // Every kernel name the plan uses, in order of first appearance.
  std::vector<std::string> kernel_names() const;

 private:
  PlanBody top_;
  bool has_top_kernels_ = false;
  std::vector<PlanVariant> variants_;
  friend struct PlanResolver;
};

// What the device allows; read from the driver, or set by hand in tests.
struct DeviceLimits {
  std::int64_t max_threads_per_block = 1024;
  std::array<std::int64_t, 3> max_block{1024, 1024, 64};
  std::array<std::int64_t, 3> max_grid{2147483647, 65535, 65535};
  std::int64_t max_shared_per_block = 48 * 1024;        // without opting in
  std::int64_t max_shared_per_block_optin = 48 * 1024;  // the most a kernel may opt into
  bool cluster_launch = false;
  std::int64_t max_cluster_size = 8;                    // portable limit; 16 with opt-in on Hopper
};

// A kernel as the plan can address it. `params` is nullopt when the layout is
// unknown (then argument count and widths cannot be checked).
struct KernelDesc {
  std::string symbol;
  std::optional<std::vector<ParamInfo>> params;
  std::int64_t max_threads_per_block = 0;  // the kernel's own limit (registers, launch bounds); 0 = unknown
  std::int64_t static_shared_bytes = 0;
};

// Finds kernels by the name a plan uses; `names` lists what the module offers
// (for "kernels are: ..." in errors).
struct KernelCatalog {
  std::function<const KernelDesc*(const std::string& plan_name)> find;
  std::vector<std::string> names;
};

struct ResolvedArg {
  bool is_buffer = false;
  std::string buffer;              // tensor or scratch name
  std::array<unsigned char, 8> bytes{};  // scalar value, little-endian
  std::size_t size = 0;            // bytes passed
};

// A GEMM step for one workload, in the plan's row-major terms:
// D[i] = alpha * op(A[i]) @ op(B[i]) + beta * C[i], then the epilogue.
struct ResolvedGemm {
  std::string a, b, c, d, bias;  // buffer names; c is d when the plan names none; bias "" without
  DType a_type{}, b_type{}, d_type{};
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  std::int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;                  // row strides, elements
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;  // between batch items, elements
  double alpha = 1, beta = 0;
  ks::LaunchPlan::Gemm::Epilogue epilogue = ks::LaunchPlan::Gemm::Epilogue::none;
  ks::LaunchPlan::Gemm::Compute compute = ks::LaunchPlan::Gemm::Compute::f32;
  int algo = 0;  // index into cuBLASLt's ranking

  // Bytes from the start of each buffer the step reads or writes; the
  // executor checks them against the buffers it binds.
  std::uint64_t bytes_a() const, bytes_b() const, bytes_c() const, bytes_d() const, bytes_bias() const;
  // "cuBLASLt GEMM 128 x 1024x1024x64 left @ right^T -> out + 0.5 * out epilogue relu compute tf32 algo 3"
  // (batch, when above 1; beta and c, when beta is not 0; the epilogue and compute, when not the default).
  std::string describe() const;
};

struct ResolvedLaunch {
  int step = 0;  // index in the plan's (or variant's) "kernels"
  std::optional<ResolvedGemm> gemm;  // a GEMM step: the kernel fields below are unused
  std::string kernel;  // as written in the plan
  std::string symbol;
  std::array<unsigned, 3> grid{1, 1, 1}, block{1, 1, 1}, cluster{1, 1, 1};
  bool has_cluster = false;
  std::size_t shared_bytes = 0;
  std::vector<ResolvedArg> args;
};

struct ResolvedScratch {
  std::string name;
  std::size_t bytes = 0;
};

struct ResolvedPlan {
  int variant = -1;  // index of the variant used, -1 = the top-level plan
  std::vector<ResolvedLaunch> launches;
  std::vector<ResolvedScratch> scratch;
  std::string describe() const;  // "row_softmax grid 1024x1x1 block 256x1x1 smem 0"
  // Where a resolved step is in the plan, for messages: "kernels[2]", "variants[1].kernels[0]".
  std::string step_where(const ResolvedLaunch& l) const;
};

// Evaluates the plan for one workload: steps whose `when` is zero are left
// out (`step` keeps their place). `vars` holds dimensions and tunable
// parameter values, `tensors` the task's tensor names, `scalars` the task's
// scalar inputs (an argument naming one passes its value in its own type;
// floating ones are also readable in expressions). Throws
// ks::Error(Status::invalid_argument) with an actionable message.
// `dtypes` gives the tensors' dtypes, which GEMM steps need (a tensor
// without one cannot be a GEMM operand).
ResolvedPlan resolve_plan(const LaunchPlan& plan, const util::Vars& vars,
                          const std::set<std::string>& tensors, const KernelCatalog& kernels,
                          const DeviceLimits& limits, const ScalarArgs& scalars = {},
                          const std::map<std::string, DType>& dtypes = {});

// The checks that need no workload: every kernel the plan names exists in the
// module and receives as many arguments as it has parameters. Run right
// after compilation. Throws ks::Error(Status::invalid_argument).
void check_plan_against_module(const LaunchPlan& plan, const KernelCatalog& kernels);

}  // namespace ks::eval::cuda
