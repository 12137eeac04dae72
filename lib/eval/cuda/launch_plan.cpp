#include "eval/cuda/launch_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ksearch/error.hpp"

namespace ks::eval::cuda {
namespace {

using util::Expr;
using util::Vars;
using Typed = ks::LaunchPlan;  // the plan as read (ksearch/launch_plan.hpp)

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(Status::invalid_argument, fmt::format("launch plan: {}: {}", where, what));
}

std::string join(const std::vector<std::string>& items, std::string_view none = "none") {
  if (items.empty()) return std::string(none);
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

template <typename Set>
std::vector<std::string> to_list(const Set& s) {
  return std::vector<std::string>(s.begin(), s.end());
}

// The codec (Typed::from_json) checked the JSON's shape; here the
// expressions are parsed, with errors naming the same fields.
Expr compile_expr(const Typed::Expr& e, const std::string& where) {
  try {
    return Expr::parse(e.text);
  } catch (const Error& err) {
    fail(where, err.what());
  }
}

std::array<Expr, 3> compile_dims(const std::vector<Typed::Expr>& dims, const std::string& where) {
  if (dims.empty() || dims.size() > 3)
    fail(where, fmt::format("expected one to three integer expressions, e.g. [\"cdiv(N, 256)\", 1], got {} entries",
                            dims.size()));
  std::array<Expr, 3> out{Expr::parse("1"), Expr::parse("1"), Expr::parse("1")};
  for (std::size_t d = 0; d < dims.size(); ++d) out[d] = compile_expr(dims[d], fmt::format("{}[{}]", where, d));
  return out;
}

PlanArg compile_arg(const Typed::Arg& a, const std::string& where) {
  PlanArg out;
  out.text = a.value.text;
  switch (a.type) {
    case Typed::Arg::Type::plain: out.kind = PlanArg::Kind::name_or_expr; break;
    case Typed::Arg::Type::f32: out.kind = PlanArg::Kind::f32; break;
    case Typed::Arg::Type::f64: out.kind = PlanArg::Kind::f64; break;
    case Typed::Arg::Type::i32: out.kind = PlanArg::Kind::i32; break;
    case Typed::Arg::Type::i64: out.kind = PlanArg::Kind::i64; break;
  }
  out.expr = compile_expr(
      a.value, a.type == Typed::Arg::Type::plain ? where : fmt::format("{}.{}", where, to_string(a.type)));
  return out;
}

PlanGemm compile_gemm(const Typed::Gemm& g, const std::string& where) {
  PlanGemm out;
  out.typed = g;
  out.m = compile_expr(g.m, where + ".m");
  out.n = compile_expr(g.n, where + ".n");
  out.k = compile_expr(g.k, where + ".k");
  auto opt = [&](const std::optional<Typed::Expr>& e, std::optional<Expr>& slot, const char* key) {
    if (e) slot = compile_expr(*e, fmt::format("{}.{}", where, key));
  };
  opt(g.lda, out.lda, "lda"), opt(g.ldb, out.ldb, "ldb"), opt(g.ldc, out.ldc, "ldc"), opt(g.ldd, out.ldd, "ldd");
  opt(g.batch, out.batch, "batch");
  opt(g.stride_a, out.stride_a, "stride_a"), opt(g.stride_b, out.stride_b, "stride_b");
  opt(g.stride_c, out.stride_c, "stride_c"), opt(g.stride_d, out.stride_d, "stride_d");
  opt(g.alpha, out.alpha, "alpha"), opt(g.beta, out.beta, "beta"), opt(g.algo, out.algo, "algo");
  return out;
}

PlanLaunch compile_launch(const Typed::Kernel& k, const std::string& where) {
  PlanLaunch out;
  if (k.when) out.when = compile_expr(*k.when, where + ".when");
  if (k.gemm) {
    out.gemm = compile_gemm(*k.gemm, where + ".gemm");
    out.kernel = "cuBLASLt GEMM";
    return out;
  }
  if (k.name.empty()) fail(where, "\"name\" is empty");
  out.kernel = k.name;
  out.grid = compile_dims(k.grid, where + ".grid");
  out.block = compile_dims(k.block, where + ".block");
  out.shared_bytes = k.shared_bytes ? compile_expr(*k.shared_bytes, where + ".shared_bytes") : Expr::parse("0");
  out.has_cluster = !k.cluster.empty();
  out.cluster = out.has_cluster ? compile_dims(k.cluster, where + ".cluster")
                                : std::array<Expr, 3>{Expr::parse("1"), Expr::parse("1"), Expr::parse("1")};
  for (std::size_t i = 0; i < k.args.size(); ++i)
    out.args.push_back(compile_arg(k.args[i], fmt::format("{}.args[{}]", where, i)));
  return out;
}

PlanScratch compile_scratch(const Typed::Scratch& s, const std::string& where) {
  PlanScratch out;
  out.name = s.name;
  if (s.bytes) {
    out.bytes = compile_expr(*s.bytes, where + ".bytes");
    return out;
  }
  if (!s.dtype) fail(where, fmt::format("scratch \"{}\" needs either \"dtype\" and \"shape\", or \"bytes\"", s.name));
  out.dtype = s.dtype;
  for (std::size_t d = 0; d < s.shape.size(); ++d)
    out.shape.push_back(compile_expr(s.shape[d], fmt::format("{}.shape[{}]", where, d)));
  return out;
}

PlanBody compile_body(const std::vector<Typed::Kernel>& kernels, const std::vector<Typed::Scratch>& scratch,
                      const std::string& prefix) {
  PlanBody body;
  for (std::size_t i = 0; i < kernels.size(); ++i)
    body.kernels.push_back(compile_launch(kernels[i], fmt::format("{}kernels[{}]", prefix, i)));
  for (std::size_t i = 0; i < scratch.size(); ++i)
    body.scratch.push_back(compile_scratch(scratch[i], fmt::format("{}scratch[{}]", prefix, i)));
  return body;
}

}  // namespace

LaunchPlan LaunchPlan::parse(const Json& j) { return parse(Typed::from_json(j, Language::cuda)); }

LaunchPlan LaunchPlan::parse(const ks::LaunchPlan& p) {
  if (!p.readable()) throw Error(Status::invalid_argument, p.problem());
  if (p.empty())
    throw Error(Status::invalid_argument, "launch plan: expected a JSON object with \"kernels\", got nothing");
  if (p.is_call_plan())
    throw Error(Status::invalid_argument,
                "launch plan: this is a host call plan (\"calls\"); a CUDA candidate needs a launch plan with "
                "\"kernels\"");
  if (p.kernels.empty() && p.variants.empty())
    throw Error(Status::invalid_argument, "launch plan: \"kernels\" is missing (the list of kernel "
                                          "launches, e.g. [{\"name\": \"k\", \"grid\": [\"N\"], "
                                          "\"block\": [256], \"args\": [\"x\", \"y\", \"N\"]}])");
  LaunchPlan plan;
  plan.top_ = compile_body(p.kernels, p.scratch, "");
  plan.has_top_kernels_ = !plan.top_.kernels.empty();
  for (std::size_t i = 0; i < p.variants.size(); ++i) {
    const Typed::Variant& v = p.variants[i];
    std::string where = fmt::format("variants[{}]", i);
    if (v.kernels.empty()) fail(where, "\"kernels\" is missing");
    PlanVariant pv;
    pv.when = compile_expr(v.when, where + ".when");
    pv.body = compile_body(v.kernels, v.scratch ? *v.scratch : std::vector<Typed::Scratch>{}, where + ".");
    pv.has_scratch = v.scratch.has_value();
    plan.variants_.push_back(std::move(pv));
  }
  return plan;
}

std::vector<std::string> LaunchPlan::kernel_names() const {
  std::vector<std::string> out;
  auto add = [&](const PlanBody& b) {
    for (const auto& k : b.kernels)
      if (!k.gemm && std::find(out.begin(), out.end(), k.kernel) == out.end()) out.push_back(k.kernel);
  };
  add(top_);
  for (const auto& v : variants_) add(v.body);
  return out;
}

std::string ResolvedPlan::describe() const {
  std::string out;
  for (const auto& l : launches) {
    if (l.gemm) {
      out += (out.empty() ? "" : "; ") + l.gemm->describe();
      continue;
    }
    out += fmt::format("{}{} grid {}x{}x{} block {}x{}x{} smem {}", out.empty() ? "" : "; ",
                       l.kernel, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                       l.block[2], l.shared_bytes);
    if (l.has_cluster) out += fmt::format(" cluster {}x{}x{}", l.cluster[0], l.cluster[1], l.cluster[2]);
  }
  return out;
}

namespace {

// Bytes an operand stored as `rows` x `cols` (row stride `ld`) spans over
// `batch` items `stride` apart. A stride is any non-negative int64, so the
// sum saturates (at 2^64 - 1) instead of wrapping round to a size that
// would pass the executor's check of the buffer.
std::uint64_t span_bytes(std::int64_t batch, std::int64_t stride, std::int64_t rows, std::int64_t cols,
                         std::int64_t ld, DType t) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t items = 0, row_span = 0, elems = 0, bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(batch - 1), static_cast<std::uint64_t>(stride), &items) ||
      __builtin_mul_overflow(static_cast<std::uint64_t>(rows - 1), static_cast<std::uint64_t>(ld), &row_span) ||
      __builtin_add_overflow(items, row_span, &elems) ||
      __builtin_add_overflow(elems, static_cast<std::uint64_t>(cols), &elems) ||
      __builtin_mul_overflow(elems, static_cast<std::uint64_t>(dtype_size(t)), &bytes))
    return kMax;
  return bytes;
}

}  // namespace

std::uint64_t ResolvedGemm::bytes_a() const {
  return trans_a ? span_bytes(batch, stride_a, k, m, lda, a_type) : span_bytes(batch, stride_a, m, k, lda, a_type);
}
std::uint64_t ResolvedGemm::bytes_b() const {
  return trans_b ? span_bytes(batch, stride_b, n, k, ldb, b_type) : span_bytes(batch, stride_b, k, n, ldb, b_type);
}
std::uint64_t ResolvedGemm::bytes_c() const { return span_bytes(batch, stride_c, m, n, ldc, d_type); }
std::uint64_t ResolvedGemm::bytes_d() const { return span_bytes(batch, stride_d, m, n, ldd, d_type); }
std::uint64_t ResolvedGemm::bytes_bias() const { return bias.empty() ? 0 : static_cast<std::uint64_t>(n) * dtype_size(d_type); }

std::string ResolvedGemm::describe() const {
  std::string out = fmt::format("cuBLASLt GEMM {}{}x{}x{} {}{} @ {}{} -> {}", batch > 1 ? fmt::format("{} x ", batch) : "",
                                m, n, k, a, trans_a ? "^T" : "", b, trans_b ? "^T" : "", d);
  if (beta != 0) out += fmt::format(" + {} * {}", beta, c);
  if (epilogue != ks::LaunchPlan::Gemm::Epilogue::none) out += fmt::format(" epilogue {}", to_string(epilogue));
  if (compute != ks::LaunchPlan::Gemm::Compute::f32) out += fmt::format(" compute {}", to_string(compute));
  return out + fmt::format(" algo {}", algo);
}

std::string ResolvedPlan::step_where(const ResolvedLaunch& l) const {
  return fmt::format("{}kernels[{}]", variant >= 0 ? fmt::format("variants[{}].", variant) : "", l.step);
}

// ---------------------------------------------------------------------------
// Resolution

namespace {

const KernelDesc& find_kernel(const KernelCatalog& kernels, const std::string& name,
                              const std::string& where) {
  const KernelDesc* k = kernels.find ? kernels.find(name) : nullptr;
  if (!k)
    fail(where, fmt::format("kernel `{}` not found in module; kernels are: {}{}", name,
                            join(kernels.names),
                            name.find('<') == std::string::npos
                                ? ""
                                : " (a template kernel is named by its instantiation, e.g. "
                                  "`gemm<128, 64>`, and must be instantiable with those arguments)"));
  return *k;
}

void check_arg_count(const PlanLaunch& l, const KernelDesc& k, const std::string& where) {
  if (!k.params || k.params->size() == l.args.size()) return;
  fail(where, fmt::format("kernel `{}` takes {} parameter{} but the plan passes {} argument{}",
                          l.kernel, k.params->size(), k.params->size() == 1 ? "" : "s",
                          l.args.size(), l.args.size() == 1 ? "" : "s"));
}

template <typename T>
std::array<unsigned char, 8> bytes_of(T v) {
  std::array<unsigned char, 8> b{};
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}

struct Resolver {
  const Vars& vars;
  const std::set<std::string>& tensors;
  const KernelCatalog& kernels;
  const DeviceLimits& limits;
  const ScalarArgs& scalars;
  std::map<std::string, DType> dtypes;  // tensors', then typed scratch buffers'
  util::RealVars reals;  // the floating scalar inputs
  std::set<std::string> scratch_names;

  std::int64_t eval_int(const Expr& e, const std::string& where) const {
    try {
      return e.eval_int(vars, reals);
    } catch (const Error& err) {
      fail(where, err.what());
    }
  }

  double eval_double(const Expr& e, const std::string& where) const {
    try {
      return e.eval_double(vars, reals);
    } catch (const Error& err) {
      fail(where, err.what());
    }
  }

  // A scalar input named as an argument: its value in its own type.
  ResolvedArg scalar_input(const std::string& name, const ScalarArg& s, const std::optional<ParamInfo>& param,
                           const std::string& where) const {
    ResolvedArg out;
    out.size = dtype_size(s.dtype);
    if (param && param->size != out.size)
      fail(where, fmt::format("scalar input `{}` is {} ({} bytes) but the kernel's parameter is {} bytes", name,
                              to_string(s.dtype), out.size, param->size));
    switch (s.dtype) {
      case DType::f32: out.bytes = bytes_of(static_cast<float>(s.value)); break;
      case DType::f64: out.bytes = bytes_of(s.value); break;
      case DType::i64: out.bytes = bytes_of(static_cast<std::int64_t>(s.value)); break;
      case DType::i32: out.bytes = bytes_of(static_cast<std::int32_t>(s.value)); break;
      case DType::i16: out.bytes = bytes_of(static_cast<std::int16_t>(s.value)); break;
      case DType::i8: out.bytes = bytes_of(static_cast<std::int8_t>(s.value)); break;
      case DType::u8:
      case DType::boolean: out.bytes = bytes_of(static_cast<std::uint8_t>(s.value)); break;
      default: fail(where, fmt::format("scalar input `{}` has dtype {}, which a plan cannot pass", name, to_string(s.dtype)));
    }
    return out;
  }

  std::vector<ResolvedScratch> scratch(const std::vector<PlanScratch>& list,
                                       const std::string& prefix) {
    std::vector<ResolvedScratch> out;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& s = list[i];
      std::string where = fmt::format("{}scratch[{}] \"{}\"", prefix, i, s.name);
      if (tensors.count(s.name))
        fail(where, "the name is already a tensor of the task; pick another");
      if (vars.count(s.name))
        fail(where, "the name is already a dimension or parameter; pick another");
      if (!scratch_names.insert(s.name).second) fail(where, "declared twice");
      std::int64_t bytes = 0;
      if (s.dtype) {
        bytes = static_cast<std::int64_t>(dtype_size(*s.dtype));
        for (std::size_t d = 0; d < s.shape.size(); ++d) {
          std::int64_t n = eval_int(s.shape[d], fmt::format("{}.shape[{}]", where, d));
          if (n < 0) fail(where, fmt::format("shape[{}] = {} is negative", d, n));
          if (__builtin_mul_overflow(bytes, n, &bytes)) fail(where, "the size overflows");
        }
      } else {
        bytes = eval_int(s.bytes, where + ".bytes");
        if (bytes < 0) fail(where, fmt::format("bytes = {} is negative", bytes));
      }
      if (s.dtype) dtypes[s.name] = *s.dtype;
      out.push_back({s.name, static_cast<std::size_t>(bytes)});
    }
    return out;
  }

  std::array<unsigned, 3> dims(const std::array<Expr, 3>& e, const std::string& where,
                               const std::array<std::int64_t, 3>& max) const {
    std::array<unsigned, 3> out{};
    for (std::size_t d = 0; d < 3; ++d) {
      std::int64_t v = eval_int(e[d], fmt::format("{}[{}]", where, d));
      if (v < 1 || v > max[d])
        fail(fmt::format("{}[{}]", where, d),
             fmt::format("`{}` = {} is outside 1..{}", e[d].text(), v, max[d]));
      out[d] = static_cast<unsigned>(v);
    }
    return out;
  }

  ResolvedArg scalar_arg(const PlanArg& a, const std::optional<ParamInfo>& param,
                         const std::string& where) const {
    ResolvedArg out;
    auto need_size = [&](std::size_t size, const char* what) {
      if (param && param->size != size)
        fail(where, fmt::format("{} is {} bytes but the kernel's parameter is {} bytes", what,
                                size, param->size));
      out.size = size;
    };
    switch (a.kind) {
      case PlanArg::Kind::f32:
        need_size(4, "an f32 value");
        out.bytes = bytes_of(static_cast<float>(eval_double(a.expr, where)));
        return out;
      case PlanArg::Kind::f64:
        need_size(8, "an f64 value");
        out.bytes = bytes_of(eval_double(a.expr, where));
        return out;
      case PlanArg::Kind::i32: {
        need_size(4, "an i32 value");
        std::int64_t v = eval_int(a.expr, where);
        if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
          fail(where, fmt::format("`{}` = {} does not fit in 32 bits", a.text, v));
        out.bytes = bytes_of(static_cast<std::int32_t>(v));
        return out;
      }
      case PlanArg::Kind::i64:
        need_size(8, "an i64 value");
        out.bytes = bytes_of(eval_int(a.expr, where));
        return out;
      case PlanArg::Kind::name_or_expr:
        break;
    }
    std::int64_t v = eval_int(a.expr, where);
    // The width follows the kernel's parameter; without a known layout, int.
    std::size_t size = param ? param->size : 4;
    auto fits = [&](std::int64_t lo, std::int64_t hi) { return v >= lo && v <= hi; };
    bool ok = false;
    switch (size) {
      case 1: ok = fits(-128, 255); break;
      case 2: ok = fits(-32768, 65535); break;
      case 4: ok = fits(std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::uint32_t>::max()); break;
      case 8: ok = true; break;
      default:
        fail(where, fmt::format("the kernel's parameter is a {}-byte value, which a plan cannot "
                                "pass; take pointers and integers or floats",
                                size));
    }
    if (!ok)
      fail(where, fmt::format("`{}` = {} does not fit the kernel's {}-byte integer parameter{}",
                              a.text, v, size,
                              param ? "" : " (use {\"i64\": ...} for a 64-bit parameter)"));
    out.size = size;
    std::memcpy(out.bytes.data(), &v, size);  // little-endian: the low bytes
    return out;
  }

  // A GEMM operand: a tensor or scratch buffer whose dtype is known.
  DType operand(const std::string& name, const char* role, const std::string& where) const {
    if (!tensors.count(name) && !scratch_names.count(name))
      fail(where, fmt::format("{} `{}` is not a tensor or scratch buffer; tensors: {}; scratch: {}", role, name,
                              join(to_list(tensors)), join(to_list(scratch_names))));
    auto it = dtypes.find(name);
    if (it == dtypes.end())
      fail(where, fmt::format("{} `{}` has no dtype; declare the scratch buffer with \"dtype\" and \"shape\"", role,
                              name));
    return it->second;
  }

  ResolvedLaunch gemm(const PlanGemm& g, const std::string& where) const {
    using Typed = ks::LaunchPlan::Gemm;
    ResolvedGemm r;
    const Typed& t = g.typed;
    r.a = t.a, r.b = t.b, r.d = t.d, r.c = t.c.value_or(t.d), r.bias = t.bias.value_or("");
    r.a_type = operand(r.a, "a", where);
    r.b_type = operand(r.b, "b", where);
    r.d_type = operand(r.d, "d", where);
    // Every operand starts at its buffer's start: D in a buffer it also reads from would be read and
    // written at once (C in place is the exception cuBLASLt allows).
    for (const auto& [name, role] : {std::pair{&r.a, "a"}, std::pair{&r.b, "b"}, std::pair{&r.bias, "bias"}})
      if (*name == r.d)
        fail(where, fmt::format("d `{}` is also {}: the step would read and write it at once; write D to another "
                                "buffer",
                                r.d, role));
    if (r.c != r.d && operand(r.c, "c", where) != r.d_type)
      fail(where, fmt::format("c `{}` is {} but d `{}` is {}; they must match", r.c, to_string(operand(r.c, "c", where)),
                              r.d, to_string(r.d_type)));
    if (!r.bias.empty() && operand(r.bias, "bias", where) != r.d_type)
      fail(where, fmt::format("bias `{}` is {} but d `{}` is {}; they must match", r.bias,
                              to_string(operand(r.bias, "bias", where)), r.d, to_string(r.d_type)));
    // The combinations cuBLASLt runs (cublasLtMatmul's table), f32 accumulation.
    const DType in = r.a_type;
    const bool half = in == DType::f16 || in == DType::bf16;
    if (r.b_type != in || !(half || in == DType::f32) || !(r.d_type == in || (half && r.d_type == DType::f32)))
      fail(where, fmt::format("a {}, b {}, d {}: a GEMM step takes a and b of one dtype, f16, bf16 or f32, and d of "
                              "that dtype or f32 (for f16 and bf16)",
                              to_string(r.a_type), to_string(r.b_type), to_string(r.d_type)));
    if (t.compute == Typed::Compute::tf32 && in != DType::f32)
      fail(where, fmt::format("compute \"tf32\" is for f32 operands; these are {}", to_string(in)));
    auto positive = [&](const Expr& e, const char* key) {
      std::int64_t v = eval_int(e, fmt::format("{}.{}", where, key));
      if (v < 1 || v > std::numeric_limits<std::int32_t>::max())
        fail(where, fmt::format("{} = `{}` = {} is outside 1..2147483647", key, e.text(), v));
      return v;
    };
    r.m = positive(g.m, "m"), r.n = positive(g.n, "n"), r.k = positive(g.k, "k");
    r.batch = g.batch ? positive(*g.batch, "batch") : 1;
    r.trans_a = t.trans_a, r.trans_b = t.trans_b;
    // Row strides: at least a row of the stored matrix.
    auto ld = [&](const std::optional<Expr>& e, const char* key, std::int64_t cols) {
      if (!e) return cols;
      std::int64_t v = eval_int(*e, fmt::format("{}.{}", where, key));
      if (v < cols)
        fail(where, fmt::format("{} = `{}` = {} is less than a stored row ({} elements)", key, e->text(), v, cols));
      if (v > std::numeric_limits<std::int32_t>::max())
        fail(where, fmt::format("{} = `{}` = {} is more than 2147483647", key, e->text(), v));
      return v;
    };
    r.lda = ld(g.lda, "lda", r.trans_a ? r.m : r.k);
    r.ldb = ld(g.ldb, "ldb", r.trans_b ? r.k : r.n);
    r.ldd = ld(g.ldd, "ldd", r.n);
    // C read in place (c is d) has D's layout: cuBLASLt computes in place only with one layout.
    const bool c_is_d = r.c == r.d;
    r.ldc = c_is_d && !g.ldc ? r.ldd : ld(g.ldc, "ldc", r.n);
    auto stride = [&](const std::optional<Expr>& e, const char* key, std::int64_t dense) {
      if (!e) return dense;
      std::int64_t v = eval_int(*e, fmt::format("{}.{}", where, key));
      if (v < 0) fail(where, fmt::format("{} = `{}` = {} is negative", key, e->text(), v));
      return v;
    };
    r.stride_a = stride(g.stride_a, "stride_a", (r.trans_a ? r.k : r.m) * r.lda);
    r.stride_b = stride(g.stride_b, "stride_b", (r.trans_b ? r.n : r.k) * r.ldb);
    r.stride_d = stride(g.stride_d, "stride_d", r.m * r.ldd);
    r.stride_c = stride(g.stride_c, "stride_c", c_is_d ? r.stride_d : r.m * r.ldc);
    if (c_is_d && (r.ldc != r.ldd || r.stride_c != r.stride_d))
      fail(where, fmt::format("c is d (`{}`), read in place, so ldc and stride_c must be ldd and stride_d ({} and {}), "
                              "not {} and {}",
                              r.d, r.ldd, r.stride_d, r.ldc, r.stride_c));
    // The batch's outputs may not overlap: items stacked (each after the
    // last row of the one before) or side by side within D's rows.
    if (r.batch > 1 && r.stride_d < (r.m - 1) * r.ldd + r.n &&
        !(r.stride_d >= r.n && (r.batch - 1) * r.stride_d + r.n <= r.ldd))
      fail(where, fmt::format("stride_d = {} makes the batch's outputs overlap (m = {}, n = {}, ldd = {}); stack them "
                              "(stride_d >= {}) or place them side by side in D's rows",
                              r.stride_d, r.m, r.n, r.ldd, (r.m - 1) * r.ldd + r.n));
    r.alpha = g.alpha ? eval_double(*g.alpha, where + ".alpha") : 1.0;
    r.beta = g.beta ? eval_double(*g.beta, where + ".beta") : 0.0;
    r.epilogue = t.epilogue;
    r.compute = t.compute;
    if (g.algo) {
      std::int64_t a = eval_int(*g.algo, where + ".algo");
      if (a < 0 || a > 63) fail(where, fmt::format("algo = `{}` = {} is outside 0..63", g.algo->text(), a));
      r.algo = static_cast<int>(a);
    }
    ResolvedLaunch out;
    out.kernel = "cuBLASLt GEMM";
    out.gemm = std::move(r);
    return out;
  }

  ResolvedLaunch launch(const PlanLaunch& l, const std::string& where) const {
    if (l.gemm) return gemm(*l.gemm, where + " (GEMM step)");
    const KernelDesc& k = find_kernel(kernels, l.kernel, where);
    check_arg_count(l, k, where);
    ResolvedLaunch out;
    out.kernel = l.kernel;
    out.symbol = k.symbol;
    std::string kw = fmt::format("{} (kernel `{}`)", where, l.kernel);
    out.grid = dims(l.grid, kw + " grid", limits.max_grid);
    out.block = dims(l.block, kw + " block", limits.max_block);
    std::int64_t threads = std::int64_t{out.block[0]} * out.block[1] * out.block[2];
    if (threads > limits.max_threads_per_block)
      fail(kw, fmt::format("a block of {}x{}x{} = {} threads exceeds the device's limit of {}",
                           out.block[0], out.block[1], out.block[2], threads,
                           limits.max_threads_per_block));
    if (k.max_threads_per_block > 0 && threads > k.max_threads_per_block)
      fail(kw, fmt::format("a block of {} threads exceeds this kernel's limit of {} (set by its "
                           "register use or __launch_bounds__)",
                           threads, k.max_threads_per_block));
    std::int64_t shared = eval_int(l.shared_bytes, kw + " shared_bytes");
    if (shared < 0) fail(kw, fmt::format("shared_bytes = {} is negative", shared));
    if (shared + k.static_shared_bytes > limits.max_shared_per_block_optin)
      fail(kw, fmt::format("shared_bytes = `{}` = {} plus {} bytes of static shared memory "
                           "exceeds the device's limit of {} bytes per block",
                           l.shared_bytes.text(), shared, k.static_shared_bytes,
                           limits.max_shared_per_block_optin));
    out.shared_bytes = static_cast<std::size_t>(shared);
    if (l.has_cluster) {
      out.cluster = dims(l.cluster, kw + " cluster", {limits.max_cluster_size, limits.max_cluster_size,
                                                     limits.max_cluster_size});
      std::int64_t size = std::int64_t{out.cluster[0]} * out.cluster[1] * out.cluster[2];
      out.has_cluster = size > 1;
      if (out.has_cluster && !limits.cluster_launch)
        fail(kw, "cluster dimensions need thread-block clusters (sm_90 or newer), which this "
                 "device does not support");
      if (size > limits.max_cluster_size)
        fail(kw, fmt::format("a cluster of {} blocks exceeds the limit of {}", size,
                             limits.max_cluster_size));
      for (std::size_t d = 0; d < 3; ++d)
        if (out.grid[d] % out.cluster[d] != 0)
          fail(kw, fmt::format("cluster[{}] = {} does not divide grid[{}] = {}", d,
                               out.cluster[d], d, out.grid[d]));
    }
    for (std::size_t i = 0; i < l.args.size(); ++i) {
      const PlanArg& a = l.args[i];
      std::string aw = fmt::format("{} argument {} `{}`", kw, i, a.text);
      std::optional<ParamInfo> param;
      if (k.params) param = (*k.params)[i];
      bool is_name = a.kind == PlanArg::Kind::name_or_expr &&
                     (tensors.count(a.text) || scratch_names.count(a.text));
      if (is_name) {
        if (param && param->size != 8)
          fail(aw, fmt::format("a buffer is passed as an 8-byte pointer but the kernel's "
                               "parameter {} is {} bytes",
                               i, param->size));
        ResolvedArg r;
        r.is_buffer = true;
        r.buffer = a.text;
        r.size = 8;
        out.args.push_back(std::move(r));
        continue;
      }
      if (a.kind == PlanArg::Kind::name_or_expr) {
        if (auto s = scalars.find(a.text); s != scalars.end()) {
          out.args.push_back(scalar_input(a.text, s->second, param, aw));
          continue;
        }
        // Name the buffers too, so a misspelt tensor reads as such.
        for (const auto& v : a.expr.variables())
          if (!vars.count(v) && !reals.count(v))
            fail(aw, fmt::format("unknown name `{}`; tensors: {}; scratch: {}; {}dimensions and parameters: {}", v,
                                 join(to_list(tensors)), join(to_list(scratch_names)),
                                 scalars.empty() ? std::string() : "scalar inputs: " + join([&] {
                                   std::vector<std::string> names;
                                   for (const auto& [n, val] : scalars) names.push_back(n);
                                   return names;
                                 }()) + "; ",
                                 join([&] {
                                   std::vector<std::string> names;
                                   for (const auto& [n, val] : vars)
                                     if (!scalars.count(n)) names.push_back(n);
                                   return names;
                                 }())));
      }
      out.args.push_back(scalar_arg(a, param, aw));
    }
    return out;
  }
};

}  // namespace

ResolvedPlan resolve_plan(const LaunchPlan& plan, const Vars& vars,
                          const std::set<std::string>& tensors, const KernelCatalog& kernels,
                          const DeviceLimits& limits, const ScalarArgs& scalars,
                          const std::map<std::string, DType>& dtypes) {
  Resolver r{vars, tensors, kernels, limits, scalars, {}, {}, {}};
  for (const auto& [name, t] : dtypes)
    if (tensors.count(name)) r.dtypes[name] = t;
  for (const auto& [name, s] : scalars)
    if (dtype_is_float(s.dtype)) r.reals[name] = s.value;
  ResolvedPlan out;
  const PlanBody* body = nullptr;
  std::string prefix;
  for (std::size_t i = 0; i < plan.variants().size() && !body; ++i) {
    const auto& v = plan.variants()[i];
    if (r.eval_double(v.when, fmt::format("variants[{}].when", i)) != 0.0) {
      body = &v.body;
      out.variant = static_cast<int>(i);
      prefix = fmt::format("variants[{}].", i);
    }
  }
  const std::vector<PlanScratch>* scratch = &plan.top().scratch;
  std::string scratch_prefix;
  if (body) {
    if (plan.variants()[static_cast<std::size_t>(out.variant)].has_scratch) {
      scratch = &body->scratch;
      scratch_prefix = prefix;
    }
  } else {
    if (plan.top().kernels.empty()) {
      std::string dims;
      for (const auto& [n, v] : vars) dims += fmt::format("{}{}={}", dims.empty() ? "" : ", ", n, v);
      throw Error(Status::invalid_argument,
                  fmt::format("launch plan: no variant applies to this workload ({}) and there "
                              "are no top-level \"kernels\"",
                              dims));
    }
    body = &plan.top();
  }
  out.scratch = r.scratch(*scratch, scratch_prefix);
  for (std::size_t i = 0; i < body->kernels.size(); ++i) {
    const PlanLaunch& l = body->kernels[i];
    std::string where = fmt::format("{}kernels[{}]", prefix, i);
    if (l.when && r.eval_double(*l.when, where + ".when") == 0.0) continue;
    ResolvedLaunch launch = r.launch(l, where);
    launch.step = static_cast<int>(i);
    out.launches.push_back(std::move(launch));
  }
  if (out.launches.empty())
    fail(prefix.empty() ? "kernels" : prefix + "kernels", "every step's \"when\" is zero for this workload: "
                                                          "nothing would run");
  return out;
}

void check_plan_against_module(const LaunchPlan& plan, const KernelCatalog& kernels) {
  auto check_body = [&](const PlanBody& b, const std::string& prefix) {
    for (std::size_t i = 0; i < b.kernels.size(); ++i) {
      if (b.kernels[i].gemm) continue;
      std::string where = fmt::format("{}kernels[{}]", prefix, i);
      check_arg_count(b.kernels[i], find_kernel(kernels, b.kernels[i].kernel, where), where);
    }
  };
  check_body(plan.top(), "");
  for (std::size_t i = 0; i < plan.variants().size(); ++i)
    check_body(plan.variants()[i].body, fmt::format("variants[{}].", i));
}

}  // namespace ks::eval::cuda
