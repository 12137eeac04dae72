#include "emu/plan_runner.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>

#include "emu/runtime.hpp"
#include "ksearch/types.hpp"

namespace ks_emu {
namespace {

constexpr unsigned char kGuardByte = 0xa5;

using Plan = ks::LaunchPlan;

unsigned dim_at(const std::vector<Plan::Expr>& dims, std::size_t i, const ks::util::Vars& vars, const std::string& what) {
  if (dims.size() < 1 || dims.size() > 3) throw std::runtime_error(what + " must be an array of one to three expressions");
  if (i >= dims.size()) return 1;
  long long v = ks::util::eval_int_expr(dims[i].text, vars);
  if (v <= 0 || v > 0x7fffffffLL) throw std::runtime_error(fmt::format("{}[{}] = {} is out of range", what, i, v));
  return static_cast<unsigned>(v);
}

float load(const void* base, long long i, ks::DType t) {
  switch (t) {
    case ks::DType::f32: return static_cast<const float*>(base)[i];
    case ks::DType::f16: return f16_to_float(static_cast<const unsigned short*>(base)[i]);
    case ks::DType::bf16: {
      const unsigned bits = static_cast<unsigned>(static_cast<const unsigned short*>(base)[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default: throw std::runtime_error("GEMM step: unsupported dtype");
  }
}

void store(void* base, long long i, ks::DType t, float v) {
  switch (t) {
    case ks::DType::f32: static_cast<float*>(base)[i] = v; return;
    case ks::DType::f16: static_cast<unsigned short*>(base)[i] = float_to_f16(v); return;
    case ks::DType::bf16: {
      unsigned bits;
      std::memcpy(&bits, &v, 4);
      bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
      static_cast<unsigned short*>(base)[i] = static_cast<unsigned short>(bits >> 16);
      return;
    }
    default: throw std::runtime_error("GEMM step: unsupported dtype");
  }
}

// D[i] = alpha * op(A[i]) @ op(B[i]) + beta * C[i], then the epilogue: what
// cuBLASLt does for the step, written plainly.
void run_gemm(const Plan::Gemm& g, std::map<std::string, GuardedBuffer*>& buffers,
              const std::map<std::string, ks::DType>& dtypes, const ks::util::Vars& vars) {
  const ks::util::RealVars none;
  auto eval = [&](const std::optional<Plan::Expr>& e, long long def) {
    return e ? ks::util::eval_int_expr(e->text, vars) : def;
  };
  auto buffer = [&](const std::string& name) -> std::pair<void*, ks::DType> {
    auto b = buffers.find(name);
    auto t = dtypes.find(name);
    if (b == buffers.end() || t == dtypes.end()) throw std::runtime_error("GEMM step: unknown buffer " + name);
    return {b->second->data(), t->second};
  };
  const long long m = ks::util::eval_int_expr(g.m.text, vars), n = ks::util::eval_int_expr(g.n.text, vars),
                  k = ks::util::eval_int_expr(g.k.text, vars), batch = eval(g.batch, 1);
  const long long lda = eval(g.lda, g.trans_a ? m : k), ldb = eval(g.ldb, g.trans_b ? k : n);
  const long long ldc = eval(g.ldc, n), ldd = eval(g.ldd, n);
  const long long sa = eval(g.stride_a, (g.trans_a ? k : m) * lda), sb = eval(g.stride_b, (g.trans_b ? n : k) * ldb);
  const long long sc = eval(g.stride_c, m * ldc), sd = eval(g.stride_d, m * ldd);
  const double alpha = g.alpha ? ks::util::Expr::parse(g.alpha->text).eval_double(vars, none) : 1.0;
  const double beta = g.beta ? ks::util::Expr::parse(g.beta->text).eval_double(vars, none) : 0.0;
  auto [a, ta] = buffer(g.a);
  auto [b, tb] = buffer(g.b);
  auto [d, td] = buffer(g.d);
  auto [c, tc] = buffer(g.c.value_or(g.d));
  std::pair<void*, ks::DType> bias{nullptr, ks::DType::f32};
  if (g.bias) bias = buffer(*g.bias);
  using E = Plan::Gemm::Epilogue;
  std::vector<float> out(static_cast<std::size_t>(m * n));
  for (long long p = 0; p < batch; ++p) {
    for (long long i = 0; i < m; ++i)
      for (long long j = 0; j < n; ++j) {
        float acc = 0.f;
        for (long long q = 0; q < k; ++q)
          acc += load(a, p * sa + (g.trans_a ? q * lda + i : i * lda + q), ta) *
                 load(b, p * sb + (g.trans_b ? j * ldb + q : q * ldb + j), tb);
        float v = static_cast<float>(alpha) * acc;
        if (beta != 0) v += static_cast<float>(beta) * load(c, p * sc + i * ldc + j, tc);
        if (bias.first) v += load(bias.first, j, bias.second);
        if (g.epilogue == E::relu || g.epilogue == E::relu_bias) v = v > 0 ? v : 0;
        if (g.epilogue == E::gelu || g.epilogue == E::gelu_bias)
          v = 0.5f * v * (1.f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
        out[static_cast<std::size_t>(i * n + j)] = v;
      }
    // Written after every read of the item, as C may be D.
    for (long long i = 0; i < m; ++i)
      for (long long j = 0; j < n; ++j) store(d, p * sd + i * ldd + j, td, out[static_cast<std::size_t>(i * n + j)]);
  }
}

}  // namespace

GuardedBuffer::GuardedBuffer(std::size_t bytes) : bytes_(bytes), storage_(bytes + 2 * kGuard, 0xff) {
  std::memset(storage_.data(), kGuardByte, kGuard);
  std::memset(storage_.data() + kGuard + bytes, kGuardByte, kGuard);
}

void GuardedBuffer::check_guards(const std::string& what) const {
  for (std::size_t i = 0; i < kGuard; ++i)
    if (storage_[i] != kGuardByte || storage_[kGuard + bytes_ + i] != kGuardByte)
      throw std::runtime_error("out-of-bounds write around buffer \"" + what + "\"");
}

PlanRunStats run_plan(const KernelTable& table, const ks::LaunchPlan& plan,
                      std::map<std::string, GuardedBuffer*> tensors, const ks::util::Vars& vars,
                      const std::map<std::string, double>& scalars, std::map<std::string, ks::DType> dtypes) {
  const ks::util::RealVars reals(scalars.begin(), scalars.end());
  const std::vector<Plan::Kernel>* kernels = &plan.kernels;
  const std::vector<Plan::Scratch>* scratch = &plan.scratch;
  for (const auto& v : plan.variants) {
    if (ks::util::eval_double_expr(v.when.text, vars) != 0.0) {
      kernels = &v.kernels;
      // A variant without "scratch" keeps the top-level buffers.
      if (v.scratch) scratch = &*v.scratch;
      break;
    }
  }
  if (kernels->empty()) throw std::runtime_error("plan has no \"kernels\" array");

  std::vector<std::unique_ptr<GuardedBuffer>> owned;
  for (const auto& s : *scratch) {
    if (tensors.count(s.name)) throw std::runtime_error("scratch \"" + s.name + "\" shadows a tensor");
    long long bytes = 0;
    if (s.bytes) {
      bytes = ks::util::eval_int_expr(s.bytes->text, vars);
    } else {
      if (!s.dtype) throw std::runtime_error("scratch \"" + s.name + "\": no dtype");
      bytes = static_cast<long long>(ks::dtype_size(*s.dtype));
      for (const auto& e : s.shape) bytes *= ks::util::eval_int_expr(e.text, vars);
    }
    if (bytes < 0) throw std::runtime_error("scratch \"" + s.name + "\" has a negative size");
    if (s.dtype) dtypes[s.name] = *s.dtype;
    owned.push_back(std::make_unique<GuardedBuffer>(static_cast<std::size_t>(bytes)));
    tensors[s.name] = owned.back().get();
  }

  PlanRunStats stats;
  for (const auto& k : *kernels) {
    if (k.when && ks::util::eval_double_expr(k.when->text, vars) == 0.0) continue;
    if (k.gemm) {
      run_gemm(*k.gemm, tensors, dtypes, vars);
      for (const auto& [tname, buf] : tensors) buf->check_guards(tname + "\" after a GEMM step");
      stats.kernels.push_back("gemm");
      continue;
    }
    const std::string& name = k.name;
    const Kernel* kernel = table.find(name);
    if (!kernel) {
      std::string known;
      for (const auto& n : table.names()) known += (known.empty() ? "" : ", ") + n;
      throw std::runtime_error(fmt::format("kernel `{}` not found; kernels are: {}", name, known));
    }
    std::vector<Arg> args;
    if (k.args.size() != kernel->param_kinds.size())
      throw std::runtime_error(fmt::format("kernel `{}` takes {} arguments, the plan passes {}", name,
                                           kernel->param_kinds.size(), k.args.size()));
    for (const auto& a : k.args) {
      Arg arg;
      const std::string& text = a.value.text;
      if (a.type == Plan::Arg::Type::plain) {
        auto t = tensors.find(text);
        auto sc = scalars.find(text);
        if (t != tensors.end()) {
          arg.kind = Arg::Kind::pointer;
          arg.ptr = t->second->data();
        } else if (sc != scalars.end()) {
          // A scalar input by name: its value (an integral one also converts to an integer parameter).
          arg.kind = sc->second == static_cast<double>(static_cast<long long>(sc->second)) ? Arg::Kind::integer
                                                                                            : Arg::Kind::real;
          arg.i = static_cast<long long>(sc->second);
          arg.d = sc->second;
        } else {
          arg.kind = Arg::Kind::integer;
          arg.i = ks::util::eval_int_expr(text, vars);
        }
      } else if (a.type == Plan::Arg::Type::f32 || a.type == Plan::Arg::Type::f64) {
        arg.kind = Arg::Kind::real;
        arg.d = ks::util::Expr::parse(text).eval_double(vars, reals);
      } else {
        arg.kind = Arg::Kind::integer;
        arg.i = ks::util::Expr::parse(text).eval_int(vars, reals);
      }
      args.push_back(arg);
    }
    Dim3 g{dim_at(k.grid, 0, vars, name + " grid"), dim_at(k.grid, 1, vars, name + " grid"), dim_at(k.grid, 2, vars, name + " grid")};
    Dim3 b{dim_at(k.block, 0, vars, name + " block"), dim_at(k.block, 1, vars, name + " block"), dim_at(k.block, 2, vars, name + " block")};
    long long smem = k.shared_bytes ? ks::util::eval_int_expr(k.shared_bytes->text, vars) : 0;
    if (smem < 0 || smem > 227 * 1024)
      throw std::runtime_error(fmt::format("kernel `{}`: {} bytes of dynamic shared memory (H100 limit 232448)", name, smem));
    launch(g, b, static_cast<std::size_t>(smem), [&] { kernel->call(args); });
    for (const auto& [tname, buf] : tensors) buf->check_guards(tname + "\" after kernel `" + name + "`");
    stats.kernels.push_back(name);
  }
  return stats;
}

}  // namespace ks_emu
