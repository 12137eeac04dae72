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

std::vector<HostScratch> parse_scratch(const Json& j, const std::string& where,
                                       const std::vector<TensorSpec>& tensors) {
  std::vector<HostScratch> out;
  if (!j.is_array()) bad(fmt::format("{} must be an array", where));
  std::set<std::string> names;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const Json& s = j[i];
    std::string at = fmt::format("{}[{}]", where, i);
    if (!s.is_object()) bad(fmt::format("{} must be an object", at));
    HostScratch sc;
    const Json* name = s.find("name");
    if (!name || !name->is_string() || !is_identifier(name->as_string()))
      bad(fmt::format("{} needs a \"name\" that is an identifier", at));
    sc.name = name->as_string();
    at = fmt::format("scratch \"{}\"", sc.name);
    if (!names.insert(sc.name).second) bad(fmt::format("{} is declared twice", at));
    for (const auto& t : tensors)
      if (t.name == sc.name) bad(fmt::format("{} has the name of a task tensor", at));
    if (const Json* b = s.find("bytes")) {
      std::string text = b->is_string() ? b->as_string() : b->is_int() ? std::to_string(b->as_int()) : "";
      if (text.empty()) bad(fmt::format("{}: \"bytes\" must be an integer expression", at));
      sc.bytes = parse_expr(text, at + " bytes");
      if (const Json* d = s.find("dtype"); d && d->is_string()) {
        auto dt = dtype_from_string(d->as_string());
        if (!dt) bad(fmt::format("{}: unknown dtype \"{}\"", at, d->as_string()));
        sc.dtype = *dt;
      }
    } else {
      const Json* d = s.find("dtype");
      const Json* shape = s.find("shape");
      if (!d || !d->is_string() || !shape || !shape->is_array())
        bad(fmt::format("{} needs \"dtype\" and \"shape\", or \"bytes\"", at));
      auto dt = dtype_from_string(d->as_string());
      if (!dt) bad(fmt::format("{}: unknown dtype \"{}\"", at, d->as_string()));
      sc.dtype = *dt;
      for (const auto& e : shape->as_array()) {
        std::string text = e.is_string() ? e.as_string() : e.is_int() ? std::to_string(e.as_int()) : "";
        if (text.empty()) bad(fmt::format("{}: shape entries must be integer expressions", at));
        sc.shape.push_back(parse_expr(text, at + " shape"));
      }
    }
    for (const auto& [k, v] : s.as_object())
      if (k != "name" && k != "dtype" && k != "shape" && k != "bytes")
        bad(fmt::format("{}: unknown field \"{}\" (known: name, dtype, shape, bytes)", at, k));
    out.push_back(std::move(sc));
  }
  return out;
}

HostPlanBody parse_body(const Json& j, const std::string& where, const std::vector<TensorSpec>& tensors,
                        const std::vector<HostScratch>* inherited_scratch, int variant_index) {
  HostPlanBody body;
  if (const Json* s = j.find("scratch"); s && !s->is_null()) body.scratch = parse_scratch(*s, where + "scratch", tensors);
  else if (inherited_scratch) body.scratch = *inherited_scratch;
  const Json* calls = j.find("calls");
  if (!calls || !calls->is_array() || calls->empty())
    bad(fmt::format("{}\"calls\" must be a non-empty array of {{\"fn\": ..., \"args\": [...]}}", where));
  for (std::size_t i = 0; i < calls->size(); ++i) {
    const Json& c = (*calls)[i];
    std::string at = fmt::format("{}calls[{}]", where, i);
    if (!c.is_object()) bad(fmt::format("{} must be an object", at));
    HostCall call;
    const Json* fn = c.find("fn");
    if (!fn || !fn->is_string()) bad(fmt::format("{} needs \"fn\": the name of a C++ function", at));
    call.fn = fn->as_string();
    if (!is_callable_name(call.fn))
      bad(fmt::format("{}: \"{}\" is not a function name (use an identifier, optionally qualified or "
                      "with template arguments)",
                      at, call.fn));
    at = fmt::format("{} (\"{}\")", at, call.fn);
    const Json* args = c.find("args");
    if (!args || !args->is_array()) bad(fmt::format("{} needs \"args\": an array", at));
    for (const auto& [k, v] : c.as_object())
      if (k != "fn" && k != "args") bad(fmt::format("{}: unknown field \"{}\" (known: fn, args)", at, k));
    for (std::size_t a = 0; a < args->size(); ++a) {
      const Json& arg = (*args)[a];
      std::string aat = fmt::format("{} argument {}", at, a);
      HostArg ha;
      if (arg.is_string() || arg.is_int()) {
        ha.text = arg.is_string() ? arg.as_string() : std::to_string(arg.as_int());
        const TensorSpec* t = nullptr;
        for (const auto& ts : tensors)
          if (ts.name == ha.text) t = &ts;
        const HostScratch* sc = nullptr;
        for (const auto& s : body.scratch)
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
      } else if (arg.is_object() && arg.size() == 1) {
        const auto& [type, value] = arg.as_object().front();
        auto dt = dtype_from_string(type);
        if (!dt || !(*dt == DType::f32 || *dt == DType::f64 || *dt == DType::i32 || *dt == DType::i64))
          bad(fmt::format("{}: typed scalar must be one of {{\"f32\"|\"f64\"|\"i32\"|\"i64\": expr}}, found \"{}\"",
                          aat, type));
        if (!value.is_string() && !value.is_number())
          bad(fmt::format("{}: the value of \"{}\" must be an expression", aat, type));
        ha.kind = HostArg::Kind::value;
        ha.dtype = *dt;
        ha.text = value.is_string() ? value.as_string() : value.dump();
        ha.expr = parse_expr(ha.text, aat);
      } else {
        bad(fmt::format("{} must be a tensor name, a scratch name, an integer expression or "
                        "{{\"f32\": expr}}-style typed scalar",
                        aat));
      }
      call.args.push_back(std::move(ha));
    }
    call.shim = fmt::format("ks_call_{}_{}", variant_index, i);
    body.calls.push_back(std::move(call));
  }
  return body;
}

}  // namespace

HostPlan HostPlan::parse(const Json& plan, const std::vector<TensorSpec>& tensors) {
  if (!plan.is_object())
    bad(fmt::format("the plan must be a JSON object with \"calls\", found {}", json_type_name(plan.type())));
  if (plan.contains("kernels") && !plan.contains("calls"))
    bad("this is a CUDA launch plan (\"kernels\"); a host (cpp) candidate needs \"calls\"");
  for (const auto& [k, v] : plan.as_object())
    if (k != "calls" && k != "scratch" && k != "variants" && k != "params")
      bad(fmt::format("unknown field \"{}\" (known: calls, scratch, variants)", k));
  HostPlan p;
  p.main = parse_body(plan, "", tensors, nullptr, 0);
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
      Variant var;
      var.when = parse_expr(when->as_string(), at + " when");
      var.body = parse_body(v, at + ".", tensors, &p.main.scratch, static_cast<int>(i) + 1);
      p.variants.push_back(std::move(var));
    }
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
