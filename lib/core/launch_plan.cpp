// The launch plan codec: the one reader of the plan schema (docs/launch-plan.md).
// It checks the JSON's shape - objects, arrays, required and unknown fields,
// dtypes - with messages that name the field; the evaluator's plan compilers
// (eval/cuda/launch_plan, eval/host/call_plan) check the values: expressions,
// names, and what the module and device allow.
#include "ksearch/launch_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "ksearch/error.hpp"
#include "ksearch/types.hpp"
#include "util/json_fields.hpp"

KS_NAMESPACE_BEGIN

// The JSON a plan was read from, and the fields as read: while the fields are
// unchanged, to_json gives back that JSON byte for byte.
struct LaunchPlan::Written {
  Json json;
  LaunchPlan fields;
  std::string problem;  // as_written: why the JSON does not follow the schema
};

namespace {

using P = LaunchPlan;

const char* const kArgTypes[] = {"plain", "f32", "f64", "i32", "i64"};

// "keys \"grid\", \"block\"": what a plan without its list has instead.
std::string key_list(const Json& obj) {
  std::string out;
  for (const auto& [k, v] : obj.as_object()) out += (out.empty() ? "\"" : ", \"") + k + "\"";
  return out.empty() ? "no keys" : "keys " + out;
}

constexpr const char* kKernelsExample =
    "(the list of kernel launches, e.g. [{\"name\": \"k\", \"grid\": [\"N\"], \"block\": [256], \"args\": [\"x\", "
    "\"y\", \"N\"]}])";

// ---------------------------------------------------------------------------
// CUDA launch plans ("launch plan: kernels[0].grid: ...")

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(Status::invalid_argument, fmt::format("launch plan: {}: {}", where, what));
}

const Json& required(const Json& j, const char* key, const std::string& where) {
  const Json* v = j.find(key);
  if (!v || v->is_null()) fail(where, fmt::format("\"{}\" is missing", key));
  return *v;
}

// An integer expression written as a string ("cdiv(N, 256)") or a number (256).
P::Expr read_expr(const Json& j, const std::string& where) {
  if (j.is_int()) return P::Expr(std::to_string(j.as_int()));
  if (j.is_string()) return P::Expr(j.as_string());
  fail(where, fmt::format("expected an integer expression (a string such as \"cdiv(N, 256)\" or a number), got {}",
                          j.dump()));
}

std::vector<P::Expr> read_dims(const Json& j, const std::string& where) {
  if (!j.is_array() || j.empty() || j.size() > 3)
    fail(where, fmt::format("expected one to three integer expressions, e.g. [\"cdiv(N, 256)\", 1], got {}", j.dump()));
  std::vector<P::Expr> out;
  for (std::size_t d = 0; d < j.size(); ++d) out.push_back(read_expr(j[d], fmt::format("{}[{}]", where, d)));
  return out;
}

P::Arg read_kernel_arg(const Json& j, const std::string& where) {
  if (j.is_string() || j.is_int()) return P::Arg(read_expr(j, where));
  if (j.is_number())
    fail(where, fmt::format("{} is not an integer; pass a floating value as {{\"f32\": \"{}\"}}", j.dump(), j.dump()));
  if (j.is_object() && j.size() == 1) {
    const auto& [key, value] = j.as_object().front();
    for (int t = 1; t < 5; ++t) {
      if (key != kArgTypes[t]) continue;
      // A floating constant may be written as a number: {"f32": 0.5}.
      if (value.is_number() && !value.is_int()) return P::Arg(static_cast<P::Arg::Type>(t), P::Expr(value.dump()));
      return P::Arg(static_cast<P::Arg::Type>(t), read_expr(value, fmt::format("{}.{}", where, key)));
    }
  }
  fail(where, fmt::format("expected a tensor or scratch name, an integer expression, or one of "
                          "{{\"f32\"|\"f64\"|\"i32\"|\"i64\": \"expr\"}}, got {}",
                          j.dump()));
}

const char* const kEpilogues[] = {"none", "relu", "gelu", "bias", "relu_bias", "gelu_bias"};
const char* const kComputes[] = {"f32", "tf32"};

template <typename E, std::size_t N>
E read_name(const Json& j, const char* const (&names)[N], const std::string& where) {
  std::string list;
  for (std::size_t i = 0; i < N; ++i) {
    if (j.is_string() && j.as_string() == names[i]) return static_cast<E>(i);
    list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", names[i]);
  }
  fail(where, fmt::format("expected one of {}, got {}", list, j.dump()));
}

std::optional<P::Expr> optional_expr(const Json& j, const char* key, const std::string& where) {
  const Json* v = j.find(key);
  if (!v || v->is_null()) return std::nullopt;
  return read_expr(*v, where + "." + key);
}

// alpha and beta: floating expressions, written as numbers or strings.
std::optional<P::Expr> optional_real(const Json& j, const char* key, const std::string& where) {
  const Json* v = j.find(key);
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_number() && !v->is_int()) return P::Expr(v->dump());
  return read_expr(*v, where + "." + key);
}

std::string buffer_name(const Json& j, const char* key, const std::string& where) {
  const Json& v = required(j, key, where);
  if (!v.is_string() || v.as_string().empty())
    fail(where + "." + key, fmt::format("expected the name of a tensor or scratch buffer, got {}", v.dump()));
  return v.as_string();
}

// {"gemm": {"a": ..., "b": ..., "d": ..., "m": ..., "n": ..., "k": ..., ...}}
P::Gemm read_gemm(const Json& j, const std::string& where) {
  if (!j.is_object())
    fail(where, fmt::format("expected an object such as {{\"a\": \"x\", \"b\": \"w\", \"d\": \"y\", \"m\": "
                            "\"M\", \"n\": \"N\", \"k\": \"K\"}}, got {}",
                            j.dump()));
  util::FieldReader r(j, "launch plan: " + where);
  r.allow({"a", "b", "c", "d", "bias", "m", "n", "k", "trans_a", "trans_b", "lda", "ldb", "ldc", "ldd", "batch",
           "stride_a", "stride_b", "stride_c", "stride_d", "alpha", "beta", "epilogue", "compute", "algo"});
  P::Gemm g;
  g.a = buffer_name(j, "a", where);
  g.b = buffer_name(j, "b", where);
  g.d = buffer_name(j, "d", where);
  if (j.find("c") && !j.find("c")->is_null()) g.c = buffer_name(j, "c", where);
  if (j.find("bias") && !j.find("bias")->is_null()) g.bias = buffer_name(j, "bias", where);
  g.m = read_expr(required(j, "m", where), where + ".m");
  g.n = read_expr(required(j, "n", where), where + ".n");
  g.k = read_expr(required(j, "k", where), where + ".k");
  for (auto [key, slot] : {std::pair{"trans_a", &g.trans_a}, std::pair{"trans_b", &g.trans_b}})
    if (const Json* t = j.find(key); t && !t->is_null()) {
      if (!t->is_bool()) fail(where + "." + key, fmt::format("expected true or false, got {}", t->dump()));
      *slot = t->as_bool();
    }
  g.lda = optional_expr(j, "lda", where);
  g.ldb = optional_expr(j, "ldb", where);
  g.ldc = optional_expr(j, "ldc", where);
  g.ldd = optional_expr(j, "ldd", where);
  g.batch = optional_expr(j, "batch", where);
  g.stride_a = optional_expr(j, "stride_a", where);
  g.stride_b = optional_expr(j, "stride_b", where);
  g.stride_c = optional_expr(j, "stride_c", where);
  g.stride_d = optional_expr(j, "stride_d", where);
  g.alpha = optional_real(j, "alpha", where);
  g.beta = optional_real(j, "beta", where);
  if (const Json* e = j.find("epilogue"); e && !e->is_null())
    g.epilogue = read_name<P::Gemm::Epilogue>(*e, kEpilogues, where + ".epilogue");
  if (const Json* c = j.find("compute"); c && !c->is_null())
    g.compute = read_name<P::Gemm::Compute>(*c, kComputes, where + ".compute");
  g.algo = optional_expr(j, "algo", where);
  const bool bias_epilogue = g.epilogue == P::Gemm::Epilogue::bias || g.epilogue == P::Gemm::Epilogue::relu_bias ||
                             g.epilogue == P::Gemm::Epilogue::gelu_bias;
  if (bias_epilogue != g.bias.has_value())
    fail(where, bias_epilogue ? fmt::format("epilogue \"{}\" needs \"bias\": a buffer of n values",
                                            kEpilogues[static_cast<int>(g.epilogue)])
                              : std::string("\"bias\" needs a bias epilogue (\"bias\", \"relu_bias\" or \"gelu_bias\")"));
  return g;
}

P::Kernel read_launch(const Json& j, const std::string& where) {
  if (!j.is_object()) fail(where, fmt::format("expected an object, got {}", j.dump()));
  util::FieldReader r(j, "launch plan: " + where);
  P::Kernel k;
  if (const Json* w = j.find("when"); w && !w->is_null()) k.when = read_expr(*w, where + ".when");
  if (const Json* g = j.find("gemm"); g && !g->is_null()) {
    r.allow({"gemm", "when"});
    k.gemm = read_gemm(*j.find("gemm"), where + ".gemm");
    return k;
  }
  r.allow({"name", "grid", "block", "shared_bytes", "cluster", "args", "when", "gemm"});
  k.name = r.required_string("name");
  if (k.name.empty()) fail(where, "\"name\" is empty");
  k.grid = read_dims(required(j, "grid", where), where + ".grid");
  k.block = read_dims(required(j, "block", where), where + ".block");
  if (const Json* s = j.find("shared_bytes"); s && !s->is_null())
    k.shared_bytes = read_expr(*s, where + ".shared_bytes");
  if (const Json* c = j.find("cluster"); c && !c->is_null()) k.cluster = read_dims(*c, where + ".cluster");
  const auto& args = r.required_array("args");
  for (std::size_t i = 0; i < args.size(); ++i)
    k.args.push_back(read_kernel_arg(args[i], fmt::format("{}.args[{}]", where, i)));
  return k;
}

P::Scratch read_kernel_scratch(const Json& j, const std::string& where) {
  if (!j.is_object()) fail(where, fmt::format("expected an object, got {}", j.dump()));
  util::FieldReader r(j, "launch plan: " + where);
  r.allow({"name", "dtype", "shape", "bytes"});
  P::Scratch s;
  s.name = r.required_string("name");
  bool has_bytes = j.find("bytes") != nullptr;
  bool has_shape = j.find("shape") != nullptr || j.find("dtype") != nullptr;
  if (has_bytes == has_shape)
    fail(where, fmt::format("scratch \"{}\" needs either \"dtype\" and \"shape\", or \"bytes\"", s.name));
  if (has_bytes) {
    s.bytes = read_expr(required(j, "bytes", where), where + ".bytes");
    return s;
  }
  const std::string& dt = r.required_string("dtype");
  s.dtype = dtype_from_string(dt);
  if (!s.dtype)
    fail(where + ".dtype",
         fmt::format("unknown dtype \"{}\" (f32, f64, f16, bf16, f8e4m3, f8e5m2, i8, i16, i32, i64, u8, bool)", dt));
  const auto& shape = r.required_array("shape");
  for (std::size_t d = 0; d < shape.size(); ++d)
    s.shape.push_back(read_expr(shape[d], fmt::format("{}.shape[{}]", where, d)));
  return s;
}

void read_kernel_body(const Json& j, const std::string& prefix, std::vector<P::Kernel>& kernels,
                      std::vector<P::Scratch>& scratch) {
  if (const Json* ks = j.find("kernels")) {
    if (!ks->is_array() || ks->empty()) fail(prefix + "kernels", "expected a non-empty array of kernel launches");
    for (std::size_t i = 0; i < ks->size(); ++i)
      kernels.push_back(read_launch((*ks)[i], fmt::format("{}kernels[{}]", prefix, i)));
  }
  if (const Json* ss = j.find("scratch"); ss && !ss->is_null()) {
    if (!ss->is_array()) fail(prefix + "scratch", "expected an array of buffers");
    for (std::size_t i = 0; i < ss->size(); ++i)
      scratch.push_back(read_kernel_scratch((*ss)[i], fmt::format("{}scratch[{}]", prefix, i)));
  }
}

LaunchPlan read_launch_plan(const Json& j) {
  if (!j.is_object())
    throw Error(Status::invalid_argument, fmt::format("launch plan: expected a JSON object with \"kernels\", got {}",
                                                      j.is_null() ? std::string("nothing") : j.dump()));
  if (j.contains("calls") && !j.contains("kernels"))
    throw Error(Status::invalid_argument,
                "launch plan: this is a host call plan (\"calls\"); a CUDA candidate needs a launch plan with "
                "\"kernels\"");
  if (!j.contains("kernels") && !j.contains("variants"))
    throw Error(Status::invalid_argument,
                fmt::format("launch plan: \"kernels\" is missing {}; the plan has {}", kKernelsExample, key_list(j)));
  util::FieldReader r(j, "launch plan");
  r.allow({"kernels", "scratch", "variants"});
  LaunchPlan plan;
  read_kernel_body(j, "", plan.kernels, plan.scratch);
  if (const Json* vs = j.find("variants"); vs && !vs->is_null()) {
    if (!vs->is_array()) fail("variants", "expected an array of {\"when\": ..., \"kernels\": [...]}");
    for (std::size_t i = 0; i < vs->size(); ++i) {
      const Json& v = (*vs)[i];
      std::string where = fmt::format("variants[{}]", i);
      if (!v.is_object()) fail(where, fmt::format("expected an object, got {}", v.dump()));
      util::FieldReader vr(v, "launch plan: " + where);
      vr.allow({"when", "kernels", "scratch"});
      P::Variant pv;
      pv.when = read_expr(required(v, "when", where), where + ".when");
      if (!v.find("kernels")) fail(where, "\"kernels\" is missing");
      std::vector<P::Scratch> scratch;
      read_kernel_body(v, where + ".", pv.kernels, scratch);
      // Any "scratch" (null too) replaces the top-level buffers.
      if (v.find("scratch")) pv.scratch = std::move(scratch);
      plan.variants.push_back(std::move(pv));
    }
  }
  if (plan.kernels.empty() && plan.variants.empty())
    throw Error(Status::invalid_argument, fmt::format("launch plan: \"kernels\" is missing {}", kKernelsExample));
  return plan;
}

// ---------------------------------------------------------------------------
// Host call plans ("call plan: calls[0] (\"f\") argument 2 ...")

[[noreturn]] void bad(const std::string& what) { throw Error(Status::invalid_argument, "call plan: " + what); }

// An expression of a call plan: a string or an integer ("" when neither).
std::string call_expr_text(const Json& j) {
  return j.is_string() ? j.as_string() : j.is_int() ? std::to_string(j.as_int()) : "";
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

DType call_dtype(const Json& d, const std::string& at) {
  auto dt = dtype_from_string(d.as_string());
  if (!dt) bad(fmt::format("{}: unknown dtype \"{}\"", at, d.as_string()));
  return *dt;
}

std::vector<P::Scratch> read_call_scratch(const Json& j, const std::string& where) {
  std::vector<P::Scratch> out;
  if (!j.is_array()) bad(fmt::format("{} must be an array", where));
  for (std::size_t i = 0; i < j.size(); ++i) {
    const Json& s = j[i];
    std::string at = fmt::format("{}[{}]", where, i);
    if (!s.is_object()) bad(fmt::format("{} must be an object", at));
    P::Scratch sc;
    const Json* name = s.find("name");
    if (!name || !name->is_string() || !is_identifier(name->as_string()))
      bad(fmt::format("{} needs a \"name\" that is an identifier", at));
    sc.name = name->as_string();
    at = fmt::format("scratch \"{}\"", sc.name);
    if (const Json* b = s.find("bytes")) {
      std::string text = call_expr_text(*b);
      if (text.empty()) bad(fmt::format("{}: \"bytes\" must be an integer expression", at));
      sc.bytes = P::Expr(text);
      if (const Json* d = s.find("dtype"); d && d->is_string()) sc.dtype = call_dtype(*d, at);
    } else {
      const Json* d = s.find("dtype");
      const Json* shape = s.find("shape");
      if (!d || !d->is_string() || !shape || !shape->is_array())
        bad(fmt::format("{} needs \"dtype\" and \"shape\", or \"bytes\"", at));
      sc.dtype = call_dtype(*d, at);
      for (const auto& e : shape->as_array()) {
        std::string text = call_expr_text(e);
        if (text.empty()) bad(fmt::format("{}: shape entries must be integer expressions", at));
        sc.shape.push_back(P::Expr(text));
      }
    }
    for (const auto& [k, v] : s.as_object())
      if (k != "name" && k != "dtype" && k != "shape" && k != "bytes")
        bad(fmt::format("{}: unknown field \"{}\" (known: name, dtype, shape, bytes)", at, k));
    out.push_back(std::move(sc));
  }
  return out;
}

P::Arg read_call_arg(const Json& arg, const std::string& aat) {
  if (arg.is_string() || arg.is_int()) return P::Arg(call_expr_text(arg));
  if (arg.is_object() && arg.size() == 1) {
    const auto& [type, value] = arg.as_object().front();
    auto dt = dtype_from_string(type);
    P::Arg::Type t = !dt                  ? P::Arg::Type::plain
                      : *dt == DType::f32 ? P::Arg::Type::f32
                      : *dt == DType::f64 ? P::Arg::Type::f64
                      : *dt == DType::i32 ? P::Arg::Type::i32
                      : *dt == DType::i64 ? P::Arg::Type::i64
                                          : P::Arg::Type::plain;
    if (t == P::Arg::Type::plain)
      bad(fmt::format("{}: typed scalar must be one of {{\"f32\"|\"f64\"|\"i32\"|\"i64\": expr}}, found \"{}\"", aat,
                      type));
    if (!value.is_string() && !value.is_number())
      bad(fmt::format("{}: the value of \"{}\" must be an expression", aat, type));
    return P::Arg(t, P::Expr(value.is_string() ? value.as_string() : value.dump()));
  }
  bad(fmt::format("{} must be a tensor name, a scratch name, an integer expression or "
                  "{{\"f32\": expr}}-style typed scalar",
                  aat));
}

void read_call_body(const Json& j, const std::string& where, std::vector<P::Call>& calls_out,
                    std::optional<std::vector<P::Scratch>>& scratch) {
  if (const Json* s = j.find("scratch"); s && !s->is_null()) scratch = read_call_scratch(*s, where + "scratch");
  const Json* calls = j.find("calls");
  if (!calls || !calls->is_array() || calls->empty())
    bad(fmt::format("{}\"calls\" must be a non-empty array of {{\"fn\": ..., \"args\": [...]}}", where));
  for (std::size_t i = 0; i < calls->size(); ++i) {
    const Json& c = (*calls)[i];
    std::string at = fmt::format("{}calls[{}]", where, i);
    if (!c.is_object()) bad(fmt::format("{} must be an object", at));
    P::Call call;
    const Json* fn = c.find("fn");
    if (!fn || !fn->is_string()) bad(fmt::format("{} needs \"fn\": the name of a C++ function", at));
    call.fn = fn->as_string();
    at = fmt::format("{} (\"{}\")", at, call.fn);
    const Json* args = c.find("args");
    if (!args || !args->is_array()) bad(fmt::format("{} needs \"args\": an array", at));
    for (const auto& [k, v] : c.as_object())
      if (k != "fn" && k != "args") bad(fmt::format("{}: unknown field \"{}\" (known: fn, args)", at, k));
    for (std::size_t a = 0; a < args->size(); ++a)
      call.args.push_back(read_call_arg((*args)[a], fmt::format("{} argument {}", at, a)));
    calls_out.push_back(std::move(call));
  }
}

LaunchPlan read_call_plan(const Json& plan) {
  if (!plan.is_object())
    bad(fmt::format("the plan must be a JSON object with \"calls\", found {}", json_type_name(plan.type())));
  if (plan.contains("kernels") && !plan.contains("calls"))
    bad("this is a CUDA launch plan (\"kernels\"); a host (cpp) candidate needs a call plan with \"calls\"");
  if (!plan.contains("calls"))
    bad(fmt::format("\"calls\" must be a non-empty array of {{\"fn\": ..., \"args\": [...]}}; the plan has {}",
                    key_list(plan)));
  // "params" is tolerated: tunable parameters written inside the plan (the
  // candidate parser moves them out; older stored plans may keep them).
  for (const auto& [k, v] : plan.as_object())
    if (k != "calls" && k != "scratch" && k != "variants" && k != "params")
      bad(fmt::format("unknown field \"{}\" (known: calls, scratch, variants)", k));
  LaunchPlan p;
  std::optional<std::vector<P::Scratch>> scratch;
  read_call_body(plan, "", p.calls, scratch);
  if (scratch) p.scratch = std::move(*scratch);
  if (const Json* vs = plan.find("variants"); vs && !vs->is_null()) {
    if (!vs->is_array()) bad("\"variants\" must be an array");
    for (std::size_t i = 0; i < vs->size(); ++i) {
      const Json& v = (*vs)[i];
      std::string at = fmt::format("variants[{}]", i);
      if (!v.is_object()) bad(at + " must be an object");
      const Json* when = v.find("when");
      if (!when || !when->is_string()) bad(at + " needs \"when\": a condition over the dimensions");
      for (const auto& [k, val] : v.as_object())
        if (k != "when" && k != "calls" && k != "scratch")
          bad(fmt::format("{}: unknown field \"{}\" (known: when, calls, scratch)", at, k));
      P::Variant var;
      var.when = P::Expr(when->as_string());
      read_call_body(v, at + ".", var.calls, var.scratch);
      p.variants.push_back(std::move(var));
    }
  }
  return p;
}

// Which schema a plan follows when no language says: its keys tell.
bool looks_like_call_plan(const Json& j) {
  if (!j.is_object()) return false;
  if (j.contains("calls")) return true;
  if (j.contains("kernels")) return false;
  const Json* vs = j.find("variants");
  return vs && vs->is_array() && !vs->empty() && (*vs)[0].is_object() && (*vs)[0].contains("calls");
}

// ---------------------------------------------------------------------------
// Writing (the canonical form of a plan built or changed in code)

bool is_int_literal(const std::string& s) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && std::to_string(v) == s;
}

Json expr_json(const P::Expr& e) { return is_int_literal(e.text) ? Json(std::stoll(e.text)) : Json(e.text); }

Json exprs_json(const std::vector<P::Expr>& es) {
  Json out = Json::array();
  for (const auto& e : es) out.push_back(expr_json(e));
  return out;
}

Json args_json(const std::vector<P::Arg>& args) {
  Json out = Json::array();
  for (const auto& a : args) {
    if (a.type == P::Arg::Type::plain) out.push_back(expr_json(a.value));
    else out.push_back(Json::obj({{kArgTypes[static_cast<int>(a.type)], expr_json(a.value)}}));
  }
  return out;
}

Json gemm_json(const P::Gemm& g) {
  Json j = Json::obj({{"a", g.a}, {"b", g.b}});
  if (g.c) j["c"] = *g.c;
  j["d"] = g.d;
  if (g.bias) j["bias"] = *g.bias;
  j["m"] = expr_json(g.m);
  j["n"] = expr_json(g.n);
  j["k"] = expr_json(g.k);
  if (g.trans_a) j["trans_a"] = true;
  if (g.trans_b) j["trans_b"] = true;
  auto put = [&](const char* key, const std::optional<P::Expr>& e) {
    if (e) j[key] = expr_json(*e);
  };
  put("lda", g.lda), put("ldb", g.ldb), put("ldc", g.ldc), put("ldd", g.ldd), put("batch", g.batch);
  put("stride_a", g.stride_a), put("stride_b", g.stride_b), put("stride_c", g.stride_c), put("stride_d", g.stride_d);
  put("alpha", g.alpha), put("beta", g.beta);
  if (g.epilogue != P::Gemm::Epilogue::none) j["epilogue"] = to_string(g.epilogue);
  if (g.compute != P::Gemm::Compute::f32) j["compute"] = to_string(g.compute);
  put("algo", g.algo);
  return j;
}

Json kernels_json(const std::vector<P::Kernel>& kernels) {
  Json out = Json::array();
  for (const auto& k : kernels) {
    if (k.gemm) {
      Json j = Json::obj({{"gemm", gemm_json(*k.gemm)}});
      if (k.when) j["when"] = Json(k.when->text);
      out.push_back(std::move(j));
      continue;
    }
    Json j = Json::obj({{"name", k.name}, {"grid", exprs_json(k.grid)}, {"block", exprs_json(k.block)}});
    if (k.shared_bytes) j["shared_bytes"] = expr_json(*k.shared_bytes);
    if (!k.cluster.empty()) j["cluster"] = exprs_json(k.cluster);
    j["args"] = args_json(k.args);
    if (k.when) j["when"] = Json(k.when->text);
    out.push_back(std::move(j));
  }
  return out;
}

Json calls_json(const std::vector<P::Call>& calls) {
  Json out = Json::array();
  for (const auto& c : calls) out.push_back(Json::obj({{"fn", c.fn}, {"args", args_json(c.args)}}));
  return out;
}

Json scratch_json(const std::vector<P::Scratch>& scratch) {
  Json out = Json::array();
  for (const auto& s : scratch) {
    Json j = Json::obj({{"name", s.name}});
    if (s.dtype) j["dtype"] = to_string(*s.dtype);
    if (!s.shape.empty() || (s.dtype && !s.bytes)) j["shape"] = exprs_json(s.shape);
    if (s.bytes) j["bytes"] = expr_json(*s.bytes);
    out.push_back(std::move(j));
  }
  return out;
}

void body_json(Json& j, const std::vector<P::Kernel>& kernels, const std::vector<P::Call>& calls) {
  if (!kernels.empty()) j["kernels"] = kernels_json(kernels);
  if (!calls.empty()) j["calls"] = calls_json(calls);
}

}  // namespace

const char* to_string(P::Arg::Type t) { return kArgTypes[static_cast<int>(t)]; }
const char* to_string(P::Gemm::Epilogue e) { return kEpilogues[static_cast<int>(e)]; }
const char* to_string(P::Gemm::Compute c) { return kComputes[static_cast<int>(c)]; }

bool LaunchPlan::empty() const {
  return kernels.empty() && calls.empty() && scratch.empty() && variants.empty() && readable();
}

bool LaunchPlan::is_call_plan() const {
  if (!calls.empty()) return true;
  for (const auto& v : variants)
    if (!v.calls.empty()) return true;
  return false;
}

LaunchPlan LaunchPlan::from_json(const Json& j) {
  return from_json(j, looks_like_call_plan(j) ? Language::cpp : Language::cuda);
}

LaunchPlan LaunchPlan::from_json(const Json& j, Language lang) {
  if (j.is_null()) return {};
  LaunchPlan plan = lang == Language::cpp ? read_call_plan(j) : read_launch_plan(j);
  plan.written_ = std::make_shared<const Written>(Written{j, plan, {}});
  return plan;
}

LaunchPlan LaunchPlan::as_written(const Json& j, Language lang) {
  try {
    return from_json(j, lang);
  } catch (const Error& e) {
    LaunchPlan plan;
    plan.written_ = std::make_shared<const Written>(Written{j, {}, e.what()});
    return plan;
  }
}

const std::string& LaunchPlan::problem() const {
  static const std::string none;
  return written_ ? written_->problem : none;
}

bool LaunchPlan::operator==(const LaunchPlan& o) const {
  return kernels == o.kernels && calls == o.calls && scratch == o.scratch && variants == o.variants &&
         problem() == o.problem();
}

Json LaunchPlan::to_json() const {
  if (written_ && (!written_->problem.empty() || *this == written_->fields)) return written_->json;
  if (empty()) return Json();
  Json j = Json::object();
  body_json(j, kernels, calls);
  if (!scratch.empty()) j["scratch"] = scratch_json(scratch);
  if (!variants.empty()) {
    Json vs = Json::array();
    for (const auto& v : variants) {
      Json vj = Json::obj({{"when", Json(v.when.text)}});  // a string: both readers take one
      body_json(vj, v.kernels, v.calls);
      if (v.scratch) vj["scratch"] = scratch_json(*v.scratch);
      vs.push_back(std::move(vj));
    }
    j["variants"] = std::move(vs);
  }
  return j;
}

std::vector<std::string> LaunchPlan::names() const {
  std::vector<std::string> out;
  auto add = [&](const std::string& n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  auto add_body = [&](const std::vector<P::Kernel>& ks, const std::vector<P::Call>& cs) {
    for (const auto& k : ks)
      if (!k.gemm) add(k.name);
    for (const auto& c : cs) add(c.fn);
  };
  add_body(kernels, calls);
  for (const auto& v : variants) add_body(v.kernels, v.calls);
  return out;
}

KS_NAMESPACE_END
