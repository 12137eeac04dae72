#include "eval/cuda/launch_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "util/json_fields.hpp"
#include "ksearch/error.hpp"

namespace ks::eval::cuda {
namespace {

using util::Expr;
using util::Vars;

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

const Json& required(const Json& j, const char* key, const std::string& where) {
  const Json* v = j.find(key);
  if (!v || v->is_null()) fail(where, fmt::format("\"{}\" is missing", key));
  return *v;
}

// An integer expression written as a string ("cdiv(N, 256)") or a number (256).
Expr parse_expr(const Json& j, const std::string& where) {
  std::string text;
  if (j.is_int()) {
    text = std::to_string(j.as_int());
  } else if (j.is_string()) {
    text = j.as_string();
  } else {
    fail(where, fmt::format("expected an integer expression (a string such as \"cdiv(N, 256)\" "
                            "or a number), got {}",
                            j.dump()));
  }
  try {
    return Expr::parse(text);
  } catch (const Error& e) {
    fail(where, e.what());
  }
}

std::array<Expr, 3> parse_dims(const Json& j, const std::string& where) {
  if (!j.is_array() || j.empty() || j.size() > 3)
    fail(where, fmt::format("expected one to three integer expressions, e.g. [\"cdiv(N, 256)\", 1], "
                            "got {}",
                            j.dump()));
  std::array<Expr, 3> out{Expr::parse("1"), Expr::parse("1"), Expr::parse("1")};
  for (std::size_t d = 0; d < j.size(); ++d)
    out[d] = parse_expr(j[d], fmt::format("{}[{}]", where, d));
  return out;
}

PlanArg parse_arg(const Json& j, const std::string& where) {
  PlanArg a;
  if (j.is_string() || j.is_int()) {
    a.kind = PlanArg::Kind::name_or_expr;
    a.text = j.is_string() ? j.as_string() : std::to_string(j.as_int());
    a.expr = parse_expr(j, where);
    return a;
  }
  if (j.is_number())
    fail(where, fmt::format("{} is not an integer; pass a floating value as {{\"f32\": \"{}\"}}",
                            j.dump(), j.dump()));
  if (j.is_object() && j.size() == 1) {
    const auto& [key, value] = j.as_object().front();
    static const std::pair<const char*, PlanArg::Kind> kinds[] = {
        {"f32", PlanArg::Kind::f32}, {"f64", PlanArg::Kind::f64},
        {"i32", PlanArg::Kind::i32}, {"i64", PlanArg::Kind::i64}};
    for (const auto& [name, kind] : kinds) {
      if (key != name) continue;
      a.kind = kind;
      if (value.is_number() && !value.is_int()) {
        a.text = value.dump();
        try {
          a.expr = Expr::parse(a.text);
        } catch (const Error& e) {
          fail(where, e.what());
        }
      } else {
        a.expr = parse_expr(value, fmt::format("{}.{}", where, key));
        a.text = a.expr.text();
      }
      return a;
    }
  }
  fail(where, fmt::format("expected a tensor or scratch name, an integer expression, or one of "
                          "{{\"f32\"|\"f64\"|\"i32\"|\"i64\": \"expr\"}}, got {}",
                          j.dump()));
}

PlanLaunch parse_launch(const Json& j, const std::string& where) {
  if (!j.is_object()) fail(where, fmt::format("expected an object, got {}", j.dump()));
  util::FieldReader r(j, "launch plan: " + where);
  r.allow({"name", "grid", "block", "shared_bytes", "cluster", "args"});
  PlanLaunch k;
  k.kernel = r.required_string("name");
  if (k.kernel.empty()) fail(where, "\"name\" is empty");
  k.grid = parse_dims(required(j, "grid", where), where + ".grid");
  k.block = parse_dims(required(j, "block", where), where + ".block");
  if (const Json* s = j.find("shared_bytes"); s && !s->is_null())
    k.shared_bytes = parse_expr(*s, where + ".shared_bytes");
  else
    k.shared_bytes = Expr::parse("0");
  if (const Json* c = j.find("cluster"); c && !c->is_null()) {
    k.cluster = parse_dims(*c, where + ".cluster");
    k.has_cluster = true;
  } else {
    k.cluster = {Expr::parse("1"), Expr::parse("1"), Expr::parse("1")};
  }
  const auto& args = r.required_array("args");
  for (std::size_t i = 0; i < args.size(); ++i)
    k.args.push_back(parse_arg(args[i], fmt::format("{}.args[{}]", where, i)));
  return k;
}

PlanScratch parse_scratch(const Json& j, const std::string& where) {
  if (!j.is_object()) fail(where, fmt::format("expected an object, got {}", j.dump()));
  util::FieldReader r(j, "launch plan: " + where);
  r.allow({"name", "dtype", "shape", "bytes"});
  PlanScratch s;
  s.name = r.required_string("name");
  bool has_bytes = j.find("bytes") != nullptr;
  bool has_shape = j.find("shape") != nullptr || j.find("dtype") != nullptr;
  if (has_bytes == has_shape)
    fail(where, fmt::format("scratch \"{}\" needs either \"dtype\" and \"shape\", or \"bytes\"",
                            s.name));
  if (has_bytes) {
    s.bytes = parse_expr(required(j, "bytes", where), where + ".bytes");
    return s;
  }
  const std::string& dt = r.required_string("dtype");
  s.dtype = dtype_from_string(dt);
  if (!s.dtype)
    fail(where + ".dtype",
         fmt::format("unknown dtype \"{}\" (f32, f64, f16, bf16, f8e4m3, f8e5m2, i8, i16, i32, i64, u8, bool)", dt));
  const auto& shape = r.required_array("shape");
  for (std::size_t d = 0; d < shape.size(); ++d)
    s.shape.push_back(parse_expr(shape[d], fmt::format("{}.shape[{}]", where, d)));
  return s;
}

void parse_body(const Json& j, const std::string& prefix, PlanBody& body) {
  if (const Json* ks = j.find("kernels")) {
    if (!ks->is_array() || ks->empty())
      fail(prefix + "kernels", "expected a non-empty array of kernel launches");
    for (std::size_t i = 0; i < ks->size(); ++i)
      body.kernels.push_back(parse_launch((*ks)[i], fmt::format("{}kernels[{}]", prefix, i)));
  }
  if (const Json* ss = j.find("scratch"); ss && !ss->is_null()) {
    if (!ss->is_array()) fail(prefix + "scratch", "expected an array of buffers");
    for (std::size_t i = 0; i < ss->size(); ++i)
      body.scratch.push_back(parse_scratch((*ss)[i], fmt::format("{}scratch[{}]", prefix, i)));
  }
}

}  // namespace

LaunchPlan LaunchPlan::parse(const Json& j) {
  if (!j.is_object())
    throw Error(Status::invalid_argument,
                fmt::format("launch plan: expected a JSON object with \"kernels\", got {}",
                            j.is_null() ? std::string("nothing") : j.dump()));
  util::FieldReader r(j, "launch plan");
  r.allow({"kernels", "scratch", "variants"});
  LaunchPlan plan;
  parse_body(j, "", plan.top_);
  plan.has_top_kernels_ = !plan.top_.kernels.empty();
  if (const Json* vs = j.find("variants"); vs && !vs->is_null()) {
    if (!vs->is_array()) fail("variants", "expected an array of {\"when\": ..., \"kernels\": [...]}");
    for (std::size_t i = 0; i < vs->size(); ++i) {
      const Json& v = (*vs)[i];
      std::string where = fmt::format("variants[{}]", i);
      if (!v.is_object()) fail(where, fmt::format("expected an object, got {}", v.dump()));
      util::FieldReader vr(v, "launch plan: " + where);
      vr.allow({"when", "kernels", "scratch"});
      PlanVariant pv;
      pv.when = parse_expr(required(v, "when", where), where + ".when");
      if (!v.find("kernels")) fail(where, "\"kernels\" is missing");
      parse_body(v, where + ".", pv.body);
      pv.has_scratch = v.find("scratch") != nullptr;
      plan.variants_.push_back(std::move(pv));
    }
  }
  if (!plan.has_top_kernels_ && plan.variants_.empty())
    throw Error(Status::invalid_argument, "launch plan: \"kernels\" is missing (the list of kernel "
                                          "launches, e.g. [{\"name\": \"k\", \"grid\": [\"N\"], "
                                          "\"block\": [256], \"args\": [\"x\", \"y\", \"N\"]}])");
  return plan;
}

std::vector<std::string> LaunchPlan::kernel_names() const {
  std::vector<std::string> out;
  auto add = [&](const PlanBody& b) {
    for (const auto& k : b.kernels)
      if (std::find(out.begin(), out.end(), k.kernel) == out.end()) out.push_back(k.kernel);
  };
  add(top_);
  for (const auto& v : variants_) add(v.body);
  return out;
}

std::string ResolvedPlan::describe() const {
  std::string out;
  for (const auto& l : launches) {
    out += fmt::format("{}{} grid {}x{}x{} block {}x{}x{} smem {}", out.empty() ? "" : "; ",
                       l.kernel, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                       l.block[2], l.shared_bytes);
    if (l.has_cluster) out += fmt::format(" cluster {}x{}x{}", l.cluster[0], l.cluster[1], l.cluster[2]);
  }
  return out;
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

  ResolvedLaunch launch(const PlanLaunch& l, const std::string& where) const {
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
                          const DeviceLimits& limits, const ScalarArgs& scalars) {
  Resolver r{vars, tensors, kernels, limits, scalars, {}, {}};
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
  for (std::size_t i = 0; i < body->kernels.size(); ++i)
    out.launches.push_back(r.launch(body->kernels[i], fmt::format("{}kernels[{}]", prefix, i)));
  return out;
}

void check_plan_against_module(const LaunchPlan& plan, const KernelCatalog& kernels) {
  auto check_body = [&](const PlanBody& b, const std::string& prefix) {
    for (std::size_t i = 0; i < b.kernels.size(); ++i) {
      std::string where = fmt::format("{}kernels[{}]", prefix, i);
      check_arg_count(b.kernels[i], find_kernel(kernels, b.kernels[i].kernel, where), where);
    }
  };
  check_body(plan.top(), "");
  for (std::size_t i = 0; i < plan.variants().size(); ++i)
    check_body(plan.variants()[i].body, fmt::format("variants[{}].", i));
}

}  // namespace ks::eval::cuda
