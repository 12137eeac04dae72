#include "emu/plan_runner.hpp"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

#include "emu/runtime.hpp"
#include "ksearch/types.hpp"

namespace ks_emu {
namespace {

constexpr unsigned char kGuardByte = 0xa5;

unsigned dim_at(const ks::Json& dims, std::size_t i, const ks::util::Vars& vars, const std::string& what) {
  if (!dims.is_array() || dims.size() < 1 || dims.size() > 3)
    throw std::runtime_error(what + " must be an array of one to three expressions");
  if (i >= dims.size()) return 1;
  const ks::Json& d = dims[i];
  long long v = d.is_string() ? ks::util::eval_int_expr(d.as_string(), vars) : d.as_int();
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

PlanRunStats run_plan(const KernelTable& table, const ks::Json& plan,
                      std::map<std::string, GuardedBuffer*> tensors, const ks::util::Vars& vars,
                      const std::map<std::string, double>& scalars) {
  const ks::util::RealVars reals(scalars.begin(), scalars.end());
  const ks::Json* kernels = plan.find("kernels");
  const ks::Json* scratch = plan.find("scratch");
  if (const ks::Json* variants = plan.find("variants")) {
    for (const auto& v : variants->as_array()) {
      if (ks::util::eval_double_expr(v.at("when").as_string(), vars) != 0.0) {
        kernels = v.find("kernels");
        // A variant without "scratch" keeps the top-level buffers.
        if (const ks::Json* vs = v.find("scratch")) scratch = vs;
        break;
      }
    }
  }
  if (!kernels || !kernels->is_array()) throw std::runtime_error("plan has no \"kernels\" array");

  std::vector<std::unique_ptr<GuardedBuffer>> owned;
  if (scratch) {
    for (const auto& s : scratch->as_array()) {
      const std::string name = s.at("name").as_string();
      if (tensors.count(name)) throw std::runtime_error("scratch \"" + name + "\" shadows a tensor");
      long long bytes = 0;
      if (const ks::Json* b = s.find("bytes")) {
        bytes = b->is_string() ? ks::util::eval_int_expr(b->as_string(), vars) : b->as_int();
      } else {
        auto dt = ks::dtype_from_string(s.at("dtype").as_string());
        if (!dt) throw std::runtime_error("scratch \"" + name + "\": unknown dtype");
        bytes = static_cast<long long>(ks::dtype_size(*dt));
        for (const auto& e : s.at("shape").as_array()) bytes *= ks::util::eval_int_expr(e.as_string(), vars);
      }
      if (bytes < 0) throw std::runtime_error("scratch \"" + name + "\" has a negative size");
      owned.push_back(std::make_unique<GuardedBuffer>(static_cast<std::size_t>(bytes)));
      tensors[name] = owned.back().get();
    }
  }

  PlanRunStats stats;
  for (const auto& k : kernels->as_array()) {
    const std::string name = k.at("name").as_string();
    const Kernel* kernel = table.find(name);
    if (!kernel) {
      std::string known;
      for (const auto& n : table.names()) known += (known.empty() ? "" : ", ") + n;
      throw std::runtime_error(fmt::format("kernel `{}` not found; kernels are: {}", name, known));
    }
    std::vector<Arg> args;
    const auto& arg_list = k.at("args").as_array();
    if (arg_list.size() != kernel->param_kinds.size())
      throw std::runtime_error(fmt::format("kernel `{}` takes {} arguments, the plan passes {}", name,
                                           kernel->param_kinds.size(), arg_list.size()));
    for (const auto& a : arg_list) {
      Arg arg;
      if (a.is_string()) {
        auto t = tensors.find(a.as_string());
        auto sc = scalars.find(a.as_string());
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
          arg.i = ks::util::eval_int_expr(a.as_string(), vars);
        }
      } else if (a.is_object() && a.size() == 1) {
        const auto& [type, expr] = a.as_object().front();
        if (type == "f32" || type == "f64") {
          arg.kind = Arg::Kind::real;
          arg.d = ks::util::Expr::parse(expr.is_string() ? expr.as_string() : expr.dump()).eval_double(vars, reals);
        } else {
          arg.kind = Arg::Kind::integer;
          arg.i = ks::util::Expr::parse(expr.is_string() ? expr.as_string() : expr.dump()).eval_int(vars, reals);
        }
      } else {
        throw std::runtime_error("kernel `" + name + "`: an argument is neither a name, an expression nor a typed scalar");
      }
      args.push_back(arg);
    }
    const ks::Json& grid = k.at("grid");
    const ks::Json& block = k.at("block");
    Dim3 g{dim_at(grid, 0, vars, name + " grid"), dim_at(grid, 1, vars, name + " grid"), dim_at(grid, 2, vars, name + " grid")};
    Dim3 b{dim_at(block, 0, vars, name + " block"), dim_at(block, 1, vars, name + " block"), dim_at(block, 2, vars, name + " block")};
    long long smem = 0;
    if (const ks::Json* s = k.find("shared_bytes"))
      smem = s->is_string() ? ks::util::eval_int_expr(s->as_string(), vars) : s->as_int();
    if (smem < 0 || smem > 227 * 1024)
      throw std::runtime_error(fmt::format("kernel `{}`: {} bytes of dynamic shared memory (H100 limit 232448)", name, smem));
    launch(g, b, static_cast<std::size_t>(smem), [&] { kernel->call(args); });
    for (const auto& [tname, buf] : tensors) buf->check_guards(tname + "\" after kernel `" + name + "`");
    stats.kernels.push_back(name);
  }
  return stats;
}

}  // namespace ks_emu
