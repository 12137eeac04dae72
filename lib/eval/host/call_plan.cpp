#include "eval/host/call_plan.hpp"

#include <fmt/format.h>

#include <cctype>
#include <set>

#include "ksearch/error.hpp"

namespace ks::eval::host {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw Error(Status::invalid_argument, "call plan: " + what);
}

util::Expr parse_expr(const std::string& text, const std::string& where) {
  try {
    return util::Expr::parse(text);
  } catch (const Error& e) {
    bad(fmt::format("{}: {}", where, e.what()));
  }
}

// A function reference the shim can spell: identifiers, "::", and a simple
// template argument list. Anything else (";", "{", quotes) is refused so a
// plan cannot smuggle statements into the generated code.
bool is_callable_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_' || s[0] == ':'))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '<' || c == '>' ||
          c == ',' || c == ' ' || c == '*' || c == '+' || c == '-'))
      return false;
  return true;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

const char* scalar_c_type(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i32: return "std::int32_t";
    case DType::i16: return "std::int16_t";
    case DType::i8: return "std::int8_t";
    case DType::u8: return "std::uint8_t";
    case DType::boolean: return "bool";
    default: return "std::int64_t";
  }
}

// The codec (ks::LaunchPlan::from_json) checked the JSON's shape; here names
// are classified, expressions parsed and the shims' names checked.
std::vector<HostScratch> compile_scratch(const std::vector<LaunchPlan::Scratch>& in,
                                         const std::vector<TensorSpec>& tensors) {
  std::vector<HostScratch> out;
  std::set<std::string> names;
  for (const auto& s : in) {
    if (!is_identifier(s.name)) bad(fmt::format("scratch \"{}\" needs a \"name\" that is an identifier", s.name));
    std::string at = fmt::format("scratch \"{}\"", s.name);
    if (!names.insert(s.name).second) bad(fmt::format("{} is declared twice", at));
    for (const auto& t : tensors)
      if (t.name == s.name) bad(fmt::format("{} has the name of a task tensor", at));
    HostScratch sc;
    sc.name = s.name;
    if (s.bytes) {
      sc.bytes = parse_expr(s.bytes->text, at + " bytes");
      if (s.dtype) sc.dtype = *s.dtype;
    } else {
      if (!s.dtype) bad(fmt::format("{} needs \"dtype\" and \"shape\", or \"bytes\"", at));
      sc.dtype = *s.dtype;
      for (const auto& e : s.shape) sc.shape.push_back(parse_expr(e.text, at + " shape"));
    }
    out.push_back(std::move(sc));
  }
  return out;
}

HostArg compile_arg(const LaunchPlan::Arg& arg, const std::string& aat, const std::vector<TensorSpec>& tensors,
                    const std::vector<HostScratch>& scratch) {
  HostArg ha;
  ha.text = arg.value.text;
  if (arg.type != LaunchPlan::Arg::Type::plain) {
    ha.kind = HostArg::Kind::value;
    ha.dtype = arg.type == LaunchPlan::Arg::Type::f32   ? DType::f32
               : arg.type == LaunchPlan::Arg::Type::f64 ? DType::f64
               : arg.type == LaunchPlan::Arg::Type::i32 ? DType::i32
                                                        : DType::i64;
    ha.expr = parse_expr(ha.text, aat);
    return ha;
  }
  const TensorSpec* t = nullptr;
  for (const auto& ts : tensors)
    if (ts.name == ha.text) t = &ts;
  const HostScratch* sc = nullptr;
  for (const auto& s : scratch)
    if (s.name == ha.text) sc = &s;
  if (t && t->scalar) {
    // A scalar input: its value, in its own type.
    ha.kind = HostArg::Kind::value;
    ha.dtype = t->dtype;
    ha.expr = parse_expr(ha.text, aat);
  } else if (t) {
    ha.kind = HostArg::Kind::tensor;
    ha.dtype = t->dtype;
    ha.is_const = !t->is_output;
  } else if (sc) {
    ha.kind = HostArg::Kind::scratch;
    ha.dtype = sc->dtype;
  } else {
    ha.kind = HostArg::Kind::value;
    ha.dtype = DType::i64;
    ha.expr = parse_expr(ha.text, aat);
  }
  return ha;
}

HostPlanBody compile_body(const std::vector<LaunchPlan::Call>& calls, const std::vector<HostScratch>& scratch,
                          const std::string& where, const std::vector<TensorSpec>& tensors, int variant_index) {
  HostPlanBody body;
  body.scratch = scratch;
  if (calls.empty())
    bad(fmt::format("{}\"calls\" must be a non-empty array of {{\"fn\": ..., \"args\": [...]}}", where));
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const LaunchPlan::Call& c = calls[i];
    std::string at = fmt::format("{}calls[{}]", where, i);
    if (!is_callable_name(c.fn))
      bad(fmt::format("{}: \"{}\" is not a function name (use an identifier, optionally qualified or "
                      "with template arguments)",
                      at, c.fn));
    at = fmt::format("{} (\"{}\")", at, c.fn);
    HostCall call;
    call.fn = c.fn;
    for (std::size_t a = 0; a < c.args.size(); ++a)
      call.args.push_back(compile_arg(c.args[a], fmt::format("{} argument {}", at, a), tensors, body.scratch));
    call.shim = fmt::format("ks_call_{}_{}", variant_index, i);
    body.calls.push_back(std::move(call));
  }
  return body;
}

}  // namespace

HostPlan HostPlan::parse(const Json& plan, const std::vector<TensorSpec>& tensors) {
  return parse(LaunchPlan::from_json(plan, Language::cpp), tensors);
}

HostPlan HostPlan::parse(const LaunchPlan& plan, const std::vector<TensorSpec>& tensors) {
  if (!plan.readable()) throw Error(Status::invalid_argument, plan.problem());
  bool has_kernels = !plan.kernels.empty();
  for (const auto& v : plan.variants) has_kernels = has_kernels || !v.kernels.empty();
  if (has_kernels)
    bad("this is a CUDA launch plan (\"kernels\"); a host (cpp) candidate needs a call plan with \"calls\"");
  HostPlan p;
  p.main = compile_body(plan.calls, compile_scratch(plan.scratch, tensors), "", tensors, 0);
  for (std::size_t i = 0; i < plan.variants.size(); ++i) {
    const LaunchPlan::Variant& v = plan.variants[i];
    std::string at = fmt::format("variants[{}]", i);
    Variant var;
    var.when = parse_expr(v.when.text, at + " when");
    var.body = compile_body(v.calls, v.scratch ? compile_scratch(*v.scratch, tensors) : p.main.scratch, at + ".",
                            tensors, static_cast<int>(i) + 1);
    p.variants.push_back(std::move(var));
  }
  return p;
}

const HostPlanBody& HostPlan::select(const util::Vars& vars) const {
  for (std::size_t i = 0; i < variants.size(); ++i) {
    try {
      if (variants[i].when.eval_bool(vars)) return variants[i].body;
    } catch (const Error& e) {
      bad(fmt::format("variants[{}] when \"{}\": {}", i, variants[i].when.text(), e.what()));
    }
  }
  return main;
}

std::vector<const HostCall*> HostPlan::all_calls() const {
  std::vector<const HostCall*> out;
  for (const auto& c : main.calls) out.push_back(&c);
  for (const auto& v : variants)
    for (const auto& c : v.body.calls) out.push_back(&c);
  return out;
}

namespace {

std::string param_type(const HostArg& a) {
  if (a.kind == HostArg::Kind::value) return scalar_c_type(a.dtype);
  std::string elem = dtype_c_type(a.dtype, Language::cpp);
  if (elem.rfind("int", 0) == 0 || elem.rfind("uint", 0) == 0) elem = "std::" + elem;
  return (a.is_const ? "const " : "") + elem + "*";
}

}  // namespace

std::string generate_shims(const HostPlan& plan) {
  std::string out =
      "\n// ---- generated by libksearch: one shim per call of the call plan ----\n"
      "// args[i] is the address of argument i's value.\n";
  for (const HostCall* c : plan.all_calls()) {
    out += fmt::format("// {}\n", describe_call(*c));
    out += fmt::format("extern \"C\" __attribute__((visibility(\"default\"))) void {}(void* const* args) {{\n",
                       c->shim);
    out += fmt::format("  {}(", c->fn);
    for (std::size_t i = 0; i < c->args.size(); ++i) {
      const HostArg& a = c->args[i];
      std::string type = param_type(a);
      if (i) out += ",\n    ";
      if (a.kind == HostArg::Kind::value)
        out += fmt::format("*static_cast<const {}*>(args[{}])", type, i);
      else
        out += fmt::format("static_cast<{}>(*static_cast<void* const*>(args[{}]))", type, i);
    }
    out += ");\n}\n";
  }
  return out;
}

std::string describe_call(const HostCall& call) {
  std::string s = call.fn + "(";
  for (std::size_t i = 0; i < call.args.size(); ++i) {
    const HostArg& a = call.args[i];
    if (i) s += ", ";
    std::string type = param_type(a);
    if (type.rfind("std::", 0) == 0) type = type.substr(5);
    if (type.rfind("const std::", 0) == 0) type = "const " + type.substr(11);
    s += type + " " + (a.kind == HostArg::Kind::value ? (a.text.size() > 24 ? "expr" : a.text) : a.text);
  }
  return s + ")";
}

}  // namespace ks::eval::host
