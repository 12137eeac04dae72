#include "emu/plan_runner.hpp"

#include <fmt/format.h>

#include <memory>
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
                      const std::map<std::string, double>& scalars) {
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
    owned.push_back(std::make_unique<GuardedBuffer>(static_cast<std::size_t>(bytes)));
    tensors[s.name] = owned.back().get();
  }

  PlanRunStats stats;
  for (const auto& k : *kernels) {
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
