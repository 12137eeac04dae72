// The plan of a candidate as typed values (docs/launch-plan.md): for CUDA the
// launch plan (kernels launched in order), for host C++ the call plan
// (functions called in order), with scratch buffers and per-shape variants.
// Expressions stay text: the evaluator parses and evaluates them for each
// workload and checks the result against the compiled module and the device.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"

KS_NAMESPACE_BEGIN

enum class DType;     // ksearch/types.hpp
enum class Language;  // ksearch/types.hpp

class KS_API LaunchPlan {
 public:
  // An expression as the plan writes it: integer arithmetic over the
  // workload's dimensions, integer scalar inputs and tunable parameters
  // ("cdiv(N, 256)", "R", "128"), or inside a typed scalar a floating one
  // ("1.0 / C"). A JSON number (256) reads as its text.
  struct KS_API Expr {
    std::string text;

    Expr() = default;
    Expr(std::string t) : text(std::move(t)) {}
    Expr(const char* t) : text(t) {}
    Expr(int v) : text(std::to_string(v)) {}
    Expr(std::int64_t v) : text(std::to_string(v)) {}
    bool operator==(const Expr&) const = default;
  };

  // One argument, in the order of the kernel's or function's parameters.
  struct KS_API Arg {
    // plain: a tensor, scratch buffer or scalar input by name, else an
    //   integer expression (for a kernel its width follows the parameter);
    // f32, f64, i32, i64: a scalar of that type, {"f32": "1.0 / C"} in JSON.
    enum class Type { plain, f32, f64, i32, i64 };
    Type type = Type::plain;
    Expr value;

    Arg() = default;
    Arg(Expr v) : value(std::move(v)) {}
    Arg(std::string v) : value(std::move(v)) {}
    Arg(const char* v) : value(v) {}
    Arg(int v) : value(v) {}
    Arg(Type t, Expr v) : type(t), value(std::move(v)) {}
    bool operator==(const Arg&) const = default;
  };

  // A vendor GEMM step of a CUDA plan, run by cuBLASLt between the custom
  // kernels (docs/launch-plan.md, "GEMM steps"). Row-major, as the tensors:
  //   D[i] = alpha * op(A[i]) @ op(B[i]) + beta * C[i]  (then the epilogue)
  // for i < batch, op(A) m x k, op(B) k x n, D m x n. Operand dtypes are the
  // buffers' own (tensor or typed scratch).
  struct KS_API Gemm {
    enum class Epilogue { none, relu, gelu, bias, relu_bias, gelu_bias };  // bias: + bias[n] per column
    enum class Compute { f32, tf32 };       // accumulation in f32; tf32: f32 inputs as TF32
    std::string a, b, d;                    // buffer names
    std::optional<std::string> c;           // the beta term's input; none: D itself
    std::optional<std::string> bias;        // with a bias epilogue: n values of D's dtype
    Expr m, n, k;
    bool trans_a = false;                   // A is stored k x m (row-major) and read transposed
    bool trans_b = false;                   // B is stored n x k
    std::optional<Expr> lda, ldb, ldc, ldd; // row strides in elements; none: dense rows
    std::optional<Expr> batch;              // none: 1
    std::optional<Expr> stride_a, stride_b, stride_c, stride_d;  // elements between batch items; none: dense
    std::optional<Expr> alpha, beta;        // floating expressions; none: 1 and 0
    Epilogue epilogue = Epilogue::none;
    Compute compute = Compute::f32;
    std::optional<Expr> algo;               // index into cuBLASLt's ranking of algorithms for this GEMM on
                                            // this GPU (0, the default: its first choice; past the end of a
                                            // shorter ranking: its last); a tunable parameter
    bool operator==(const Gemm&) const = default;
  };

  // A step of a CUDA plan: a kernel launch, or a GEMM step when `gemm` is set
  // (then name, grid, block, shared_bytes, cluster and args are unused).
  struct KS_API Kernel {
    std::string name;                  // an extern "C" kernel, or a name expression "gemm<128, 64>"
    std::vector<Expr> grid;            // one to three; missing entries are 1
    std::vector<Expr> block;           // one to three
    std::optional<Expr> shared_bytes;  // dynamic shared memory; none: 0
    std::vector<Expr> cluster;         // thread-block cluster dims (sm_90+); empty: none
    std::vector<Arg> args;
    std::optional<Expr> when;          // the step runs only where this is non-zero; none: always
    std::optional<Gemm> gemm;
    bool operator==(const Kernel&) const = default;
  };

  // A host C++ function call.
  struct KS_API Call {
    std::string fn;  // a function of the candidate's source, optionally qualified or a template-id
    std::vector<Arg> args;
    bool operator==(const Call&) const = default;
  };

  // A buffer the plan needs between launches, sized by dtype and shape or by
  // bytes. Its contents are undefined at the start of every run.
  struct KS_API Scratch {
    std::string name;
    std::optional<DType> dtype;  // with shape (a call plan may also type a `bytes` buffer)
    std::vector<Expr> shape;     // element count = product
    std::optional<Expr> bytes;   // or the size in bytes
    bool operator==(const Scratch&) const = default;
  };

  // A per-shape plan: the first variant whose `when` is non-zero replaces the
  // top-level kernels (or calls) and, when it has its own, the scratch buffers.
  struct KS_API Variant {
    Expr when;
    std::vector<Kernel> kernels;
    std::vector<Call> calls;
    std::optional<std::vector<Scratch>> scratch;  // none: the top-level buffers
    bool operator==(const Variant&) const = default;
  };

  std::vector<Kernel> kernels;  // a CUDA launch plan
  std::vector<Call> calls;      // a host call plan
  std::vector<Scratch> scratch;
  std::vector<Variant> variants;

  // No plan at all (a solution without one); written as JSON null.
  bool empty() const;
  // Whether this is a host call plan ("calls") rather than a CUDA launch plan.
  bool is_call_plan() const;

  // Reads a plan: the one reader of the schema. `lang` picks the schema
  // (cuda: "kernels", cpp: "calls"); without it the plan's keys do. JSON
  // null gives the empty plan. Throws ks::Error(Status::invalid_argument)
  // naming the field: "launch plan: kernels[0]: \"grid\" is missing",
  // "call plan: calls[1] (\"f\") needs \"args\": an array". Expressions are
  // checked where they are evaluated, by the evaluator.
  static LaunchPlan from_json(const Json& j);
  static LaunchPlan from_json(const Json& j, Language lang);

  // A plan read from JSON writes back exactly as read (key order, numbers
  // and strings, dtype spellings) while its fields are unchanged, since
  // solution ids hash this JSON; a plan built or changed in code writes its
  // canonical form.
  Json to_json() const;

  // A plan a stored solution holds that does not follow the schema: kept as
  // written (so the solution keeps its id) with what is wrong with it, and
  // no fields; evaluating it fails with that message. Recorded runs hold
  // such plans from before plans were checked when an answer was read.
  // Plans that do follow the schema come back as from_json gives them.
  static LaunchPlan as_written(const Json& j, Language lang);
  bool readable() const { return problem().empty(); }
  // Why an as_written plan is unreadable; "" for every other plan.
  const std::string& problem() const;

  // Every kernel (or function) name the plan uses, in order of first
  // appearance; GEMM steps have none.
  std::vector<std::string> names() const;

  // Compares the fields, not how the JSON was written.
  bool operator==(const LaunchPlan& other) const;

 private:
  struct Written;
  std::shared_ptr<const Written> written_;
};

KS_API const char* to_string(LaunchPlan::Arg::Type t);  // "plain", "f32", ...
KS_API const char* to_string(LaunchPlan::Gemm::Epilogue e);  // "none", "relu", ..., "gelu_bias"
KS_API const char* to_string(LaunchPlan::Gemm::Compute c);   // "f32", "tf32"

KS_NAMESPACE_END
