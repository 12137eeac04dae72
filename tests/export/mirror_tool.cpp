// The C++ side of the runtime-mirror test (test_runtime_mirror.py): reads a
// JSON request on stdin and answers, on stdout, with what libksearch's own
// code computes - lib/util/expr.cpp for expressions, lib/eval/cuda/launch_plan.cpp
// (with the kernel catalog built from a cubin, as the evaluator builds it)
// for plans. The Python runtime computes the same from the same request.
//
//   {"mode": "expr", "cases": [{"text": "...", "vars": {"N": 3}, "reals": {"s": "<bits>"}}]}
//   {"mode": "plan", "plan": {...}, "tensors": [...], "dtypes": {"x": "f16"}, "limits": {...},
//    "catalog": {"cubin_path": "...", "lowered_names": {...}} | {"kernels": [...]},
//    "cases": [{"vars": {...}, "scalars": {"sm_scale": {"dtype": "f32", "value": "<bits>"}}}]}
//   {"mode": "scalar", "cases": [{"dtype": "i32", "value": "<bits>"}]}: the value a
//    scalar input holds (store_element, then load_element)
// Doubles travel as the decimal text of their bit patterns.
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "core/elements.hpp"
#include "eval/cuda/cubin.hpp"
#include "eval/cuda/launch_plan.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"
#include "ksearch/json.hpp"
#include "util/expr.hpp"
#include "util/fs.hpp"

using namespace ks;
using namespace ks::eval;
using namespace ks::eval::cuda;

namespace {

util::Vars vars_of(const Json& j) {
  util::Vars v;
  if (j.is_object())
    for (const auto& [k, x] : j.as_object()) v[k] = x.as_int();
  return v;
}

// Doubles travel as their bit patterns: JSON has no NaN or infinity.
Json bits(double d) {
  std::uint64_t u = 0;
  std::memcpy(&u, &d, sizeof d);
  return Json(std::to_string(u));
}

double from_bits(const Json& j) {
  const std::uint64_t u = std::stoull(j.as_string());
  double d = 0;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

util::RealVars reals_of(const Json& j) {
  util::RealVars r;
  if (j.is_object())
    for (const auto& [k, x] : j.as_object()) r[k] = from_bits(x);
  return r;
}

ScalarArgs scalars_of(const Json& j) {
  ScalarArgs out;
  if (j.is_object())
    for (const auto& [k, x] : j.as_object()) {
      auto dt = dtype_from_string(x.get_string("dtype"));
      if (!dt) throw Error(Status::invalid_argument, "mirror_tool: unknown dtype " + x.get_string("dtype"));
      out[k] = ScalarArg{*dt, from_bits(x["value"])};
    }
  return out;
}

Json scalar_case(const Json& c) {
  auto dt = dtype_from_string(c.get_string("dtype"));
  if (!dt) throw Error(Status::invalid_argument, "mirror_tool: unknown dtype " + c.get_string("dtype"));
  unsigned char buf[8] = {};
  core::store_element(buf, *dt, 0, from_bits(c["value"]));
  return bits(core::load_element(buf, *dt, 0));
}

Json expr_case(const Json& c) {
  util::Expr e;
  try {
    e = util::Expr::parse(c.get_string("text"));
  } catch (const Error& err) {
    return Json::obj({{"parse_error", err.what()}});
  }
  const util::Vars v = vars_of(c["vars"]);
  // Without "reals", the one-argument forms (which the two-argument ones must equal with none).
  const bool with_reals = c["reals"].is_object();
  const util::RealVars r = reals_of(c["reals"]);
  Json out = Json::object();
  Json names = Json::array();
  for (const auto& n : e.variables()) names.push_back(n);
  out["variables"] = names;
  try {
    util::ExprValue x = with_reals ? e.eval(v, r) : e.eval(v);
    out["value"] = x.is_int ? Json::obj({{"int", std::to_string(x.i)}}) : Json::obj({{"double", bits(x.d)}});
  } catch (const Error& err) {
    out["value"] = Json::obj({{"error", err.what()}});
  }
  try {
    out["eval_int"] = Json::obj({{"int", std::to_string(with_reals ? e.eval_int(v, r) : e.eval_int(v))}});
  } catch (const Error& err) {
    out["eval_int"] = Json::obj({{"error", err.what()}});
  }
  try {
    out["eval_double"] = Json::obj({{"double", bits(with_reals ? e.eval_double(v, r) : e.eval_double(v))}});
  } catch (const Error& err) {
    out["eval_double"] = Json::obj({{"error", err.what()}});
  }
  return out;
}

DeviceLimits limits_of(const Json& j) {
  DeviceLimits l;
  if (!j.is_object()) return l;
  l.max_threads_per_block = j.get_int("max_threads_per_block", l.max_threads_per_block);
  if (j["max_block"].is_array())
    for (std::size_t i = 0; i < 3; ++i) l.max_block[i] = j["max_block"][i].as_int();
  if (j["max_grid"].is_array())
    for (std::size_t i = 0; i < 3; ++i) l.max_grid[i] = j["max_grid"][i].as_int();
  l.max_shared_per_block = j.get_int("max_shared_per_block", l.max_shared_per_block);
  l.max_shared_per_block_optin = j.get_int("max_shared_per_block_optin", l.max_shared_per_block_optin);
  l.cluster_launch = j.get_bool("cluster_launch", l.cluster_launch);
  l.max_cluster_size = j.get_int("max_cluster_size", l.max_cluster_size);
  return l;
}

std::string hex(const std::array<unsigned char, 8>& b, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", b[i]);
  return s;
}

// Every field of a resolved GEMM step, the bytes it reaches into each buffer and its description.
Json gemm_json(const ResolvedGemm& g) {
  auto i = [](std::int64_t v) { return Json(v); };
  auto u = [](std::uint64_t v) { return Json(std::to_string(v)); };  // may pass INT64_MAX
  return Json::obj({{"a", g.a}, {"b", g.b}, {"c", g.c}, {"d", g.d}, {"bias", g.bias},
                    {"types", Json::arr({to_string(g.a_type), to_string(g.b_type), to_string(g.d_type)})},
                    {"mnk_batch", Json::arr({i(g.m), i(g.n), i(g.k), i(g.batch)})},
                    {"trans", Json::arr({g.trans_a, g.trans_b})},
                    {"ld", Json::arr({i(g.lda), i(g.ldb), i(g.ldc), i(g.ldd)})},
                    {"strides", Json::arr({i(g.stride_a), i(g.stride_b), i(g.stride_c), i(g.stride_d)})},
                    {"alpha", bits(g.alpha)}, {"beta", bits(g.beta)},
                    {"epilogue", to_string(g.epilogue)}, {"compute", to_string(g.compute)}, {"algo", g.algo},
                    {"bytes", Json::arr({u(g.bytes_a()), u(g.bytes_b()), u(g.bytes_c()), u(g.bytes_d()),
                                         u(g.bytes_bias())})},
                    {"describe", g.describe()}});
}

Json resolved_json(const ResolvedPlan& p) {
  Json launches = Json::array();
  for (const auto& l : p.launches) {
    if (l.gemm) {
      launches.push_back(Json::obj({{"step", l.step}, {"where", p.step_where(l)}, {"gemm", gemm_json(*l.gemm)}}));
      continue;
    }
    Json args = Json::array();
    for (const auto& a : l.args)
      args.push_back(a.is_buffer ? Json::obj({{"buffer", a.buffer}})
                                 : Json::obj({{"bytes", hex(a.bytes, a.size)}, {"size", static_cast<std::int64_t>(a.size)}}));
    auto dims = [](const std::array<unsigned, 3>& d) { return Json::arr({d[0], d[1], d[2]}); };
    launches.push_back(Json::obj({{"step", l.step},
                                  {"kernel", l.kernel},
                                  {"symbol", l.symbol},
                                  {"grid", dims(l.grid)},
                                  {"block", dims(l.block)},
                                  {"cluster", dims(l.cluster)},
                                  {"has_cluster", l.has_cluster},
                                  {"shared_bytes", static_cast<std::int64_t>(l.shared_bytes)},
                                  {"args", args}}));
  }
  Json scratch = Json::array();
  for (const auto& s : p.scratch) scratch.push_back(Json::arr({s.name, static_cast<std::int64_t>(s.bytes)}));
  return Json::obj({{"variant", p.variant}, {"launches", launches}, {"scratch", scratch}, {"describe", p.describe()}});
}

Json plan_request(const Json& req) {
  eval::cuda::LaunchPlan plan;
  try {
    plan = eval::cuda::LaunchPlan::parse(req["plan"]);
  } catch (const Error& e) {
    return Json::obj({{"plan_error", e.what()}});
  }
  std::set<std::string> tensors;
  for (const auto& t : req["tensors"].as_array()) tensors.insert(t.as_string());
  std::map<std::string, DType> dtypes;
  if (req["dtypes"].is_object())
    for (const auto& [name, t] : req["dtypes"].as_object()) {
      auto dt = dtype_from_string(t.as_string());
      if (!dt) throw Error(Status::invalid_argument, "mirror_tool: unknown dtype " + t.as_string());
      dtypes[name] = *dt;
    }
  const DeviceLimits limits = limits_of(req["limits"]);
  KernelCatalog cat;
  const Json& c = req["catalog"];
  std::map<std::string, std::string> lowered;
  if (c["lowered_names"].is_object())
    for (const auto& [k, v] : c["lowered_names"].as_object()) lowered[k] = v.as_string();
  std::vector<CubinKernel> from_cubin;
  std::map<std::string, KernelDesc> explicit_kernels;
  if (!c.get_string("cubin_path").empty()) {
    // As CudaProgram finds kernels: recorded lowered names, then the module's own names.
    from_cubin = inspect_cubin(util::read_file(c.get_string("cubin_path")));
    cat = module_catalog(from_cubin, lowered);
  } else {
    for (const auto& k : c["kernels"].as_array()) {
      KernelDesc d;
      d.symbol = k.get_string("symbol");
      if (k["params"].is_array()) {
        std::vector<ParamInfo> ps;
        for (const auto& p : k["params"].as_array())
          ps.push_back(ParamInfo{static_cast<std::uint32_t>(p[0].as_int()), static_cast<std::uint32_t>(p[1].as_int())});
        d.params = ps;
      }
      d.max_threads_per_block = k.get_int("max_threads_per_block");
      d.static_shared_bytes = k.get_int("static_shared_bytes");
      explicit_kernels[k.get_string("name")] = d;
      cat.names.push_back(k.get_string("name"));
    }
    cat.find = [&explicit_kernels](const std::string& name) -> const KernelDesc* {
      auto it = explicit_kernels.find(name);
      return it == explicit_kernels.end() ? nullptr : &it->second;
    };
  }
  Json names = Json::array();
  for (const auto& n : plan.kernel_names()) names.push_back(n);
  Json results = Json::array();
  for (const auto& k : req["cases"].as_array()) {
    try {
      results.push_back(resolved_json(resolve_plan(plan, vars_of(k["vars"]), tensors, cat, limits,
                                                   scalars_of(k["scalars"]), dtypes)));
    } catch (const Error& e) {
      results.push_back(Json::obj({{"error", e.what()}}));
    }
  }
  return Json::obj({{"kernel_names", names}, {"results", results}});
}

}  // namespace

int main() {
  try {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    Json req = Json::parse(text);
    Json out;
    if (req.get_string("mode") == "expr") {
      out = Json::array();
      for (const auto& c : req["cases"].as_array()) out.push_back(expr_case(c));
    } else if (req.get_string("mode") == "plan") {
      out = plan_request(req);
    } else if (req.get_string("mode") == "scalar") {
      out = Json::array();
      for (const auto& c : req["cases"].as_array()) out.push_back(scalar_case(c));
    } else {
      std::fprintf(stderr, "mirror_tool: unknown mode\n");
      return 2;
    }
    std::string s = out.dump();
    std::fwrite(s.data(), 1, s.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mirror_tool: %s\n", e.what());
    return 1;
  }
}
