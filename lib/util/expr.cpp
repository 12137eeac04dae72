#include "util/expr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <climits>
#include <cmath>

#include "ksearch/error.hpp"

namespace ks::util {

class ExprParser {
 public:
  ExprParser(std::string_view text, Expr& out) : s_(text), out_(out) {}

  void run() {
    if (s_.size() > kMaxLength) fail(fmt::format("longer than {} characters", kMaxLength));
    skip();
    if (pos_ >= s_.size()) fail("empty expression");
    out_.root_ = ternary();
    skip();
    if (pos_ < s_.size()) fail(fmt::format("unexpected '{}'", s_[pos_]));
  }

 private:
  using Op = Expr::Node::Op;
  // Expressions come from LLM answers: bound them so a pathological one
  // cannot exhaust the stack of the parser or the evaluator.
  static constexpr std::size_t kMaxLength = 4096;
  static constexpr int kMaxDepth = 200;

  // Counts nesting while a recursive rule runs.
  struct Depth {
    ExprParser& p;
    explicit Depth(ExprParser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail(fmt::format("nested more than {} levels deep", kMaxDepth));
    }
    ~Depth() { --p.depth_; }
  };

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(Status::invalid_argument,
                fmt::format("expression \"{}\": {} at column {}", s_, what, pos_ + 1));
  }

  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }

  bool eat(std::string_view tok) {
    skip();
    if (s_.substr(pos_, tok.size()) == tok) {
      // Do not split "<=" into "<" "=" or "||" into "|".
      if (tok.size() == 1 && pos_ + 1 < s_.size()) {
        char n = s_[pos_ + 1];
        if ((tok == "<" || tok == ">" || tok == "!" || tok == "=") && n == '=') return false;
        if (tok == "*" && n == '*') return false;
      }
      pos_ += tok.size();
      return true;
    }
    return false;
  }

  int add(Expr::Node n) {
    // A long chain "1+1+...+1" is shallow to parse but deep to evaluate.
    if (out_.nodes_.size() >= 2 * static_cast<std::size_t>(kMaxDepth)) fail("too many terms");
    out_.nodes_.push_back(std::move(n));
    return static_cast<int>(out_.nodes_.size()) - 1;
  }

  int binary(Op op, int a, int b) { return add({op, 0, 0, {}, {a, b}}); }

  int ternary() {
    Depth guard(*this);
    int c = lor();
    if (eat("?")) {
      int a = ternary();
      if (!eat(":")) fail("expected ':' in conditional");
      int b = ternary();
      return add({Op::cond, 0, 0, {}, {c, a, b}});
    }
    return c;
  }

  int lor() {
    int a = land();
    while (eat("||")) a = binary(Op::lor, a, land());
    return a;
  }

  int land() {
    int a = cmp();
    while (eat("&&")) a = binary(Op::land, a, cmp());
    return a;
  }

  int cmp() {
    int a = sum();
    if (eat("==")) return binary(Op::eq, a, sum());
    if (eat("!=")) return binary(Op::ne, a, sum());
    if (eat("<=")) return binary(Op::le, a, sum());
    if (eat(">=")) return binary(Op::ge, a, sum());
    if (eat("<")) return binary(Op::lt, a, sum());
    if (eat(">")) return binary(Op::gt, a, sum());
    return a;
  }

  int sum() {
    int a = product();
    for (;;) {
      if (eat("+")) a = binary(Op::add, a, product());
      else if (eat("-")) a = binary(Op::sub, a, product());
      else return a;
    }
  }

  int product() {
    int a = unary();
    for (;;) {
      if (eat("*")) a = binary(Op::mul, a, unary());
      else if (eat("/")) a = binary(Op::div, a, unary());
      else if (eat("%")) a = binary(Op::mod, a, unary());
      else return a;
    }
  }

  int unary() {
    Depth guard(*this);
    if (eat("-")) return add({Op::neg, 0, 0, {}, {unary()}});
    if (eat("+")) return unary();
    if (eat("!")) return add({Op::lnot, 0, 0, {}, {unary()}});
    return primary();
  }

  int primary() {
    skip();
    if (pos_ >= s_.size()) fail("unexpected end");
    char c = s_[pos_];
    if (eat("(")) {
      int e = ternary();
      if (!eat(")")) fail("expected ')'");
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t start = pos_;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
        ++pos_;
      std::string name(s_.substr(start, pos_ - start));
      if (eat("(")) {
        Expr::Node n{Op::call, 0, 0, name, {}};
        if (!eat(")")) {
          do n.kids.push_back(ternary());
          while (eat(","));
          if (!eat(")")) fail(fmt::format("expected ')' after arguments of {}()", name));
        }
        check_call(n);
        return add(std::move(n));
      }
      return add({Op::var, 0, 0, name, {}});
    }
    fail(fmt::format("unexpected '{}'", c));
  }

  void check_call(const Expr::Node& n) {
    static const std::map<std::string_view, int> arity = {
        {"min", -2}, {"max", -2}, {"cdiv", 2}, {"ceil_div", 2}, {"round_up", 2}, {"abs", 1},
        {"sqrt", 1}, {"pow", 2},  {"log", 1},  {"log2", 1},     {"exp", 1},      {"floor", 1},
        {"ceil", 1}};
    auto it = arity.find(n.name);
    if (it == arity.end())
      fail(fmt::format("unknown function {}() (known: min, max, cdiv, round_up, abs, sqrt, pow, "
                       "log, log2, exp, floor, ceil)", n.name));
    int want = it->second;
    int got = static_cast<int>(n.kids.size());
    if (want < 0 ? got < -want : got != want)
      fail(fmt::format("{}() takes {}{} argument(s), got {}", n.name, want < 0 ? "at least " : "",
                       want < 0 ? -want : want, got));
  }

  int number() {
    std::size_t start = pos_;
    bool is_double = false;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_double = true;
      ++pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_double = true;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_])))
        fail("malformed exponent");
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    std::string tok(s_.substr(start, pos_ - start));
    if (tok.front() == '.' && (tok.size() == 1 || !std::isdigit(static_cast<unsigned char>(tok[1]))))
      fail("malformed number");
    errno = 0;
    char* end = nullptr;
    if (is_double) {
      double d = std::strtod(tok.c_str(), &end);
      if (errno == ERANGE || end != tok.c_str() + tok.size() || !std::isfinite(d)) fail("number out of range or malformed");
      return add({Op::num_double, 0, d, {}, {}});
    }
    long long v = std::strtoll(tok.c_str(), &end, 10);
    if (errno == ERANGE) fail("integer literal out of range");
    return add({Op::num_int, v, 0, {}, {}});
  }

  std::string_view s_;
  Expr& out_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

Expr Expr::parse(std::string_view text) {
  Expr e;
  e.text_ = std::string(text);
  ExprParser p(e.text_, e);
  p.run();
  return e;
}

namespace {

ExprValue make_int(std::int64_t v) { return {true, v, 0}; }
ExprValue make_double(double v) { return {false, 0, v}; }

}  // namespace

ExprValue Expr::eval_node(int idx, const Vars& vars, const RealVars* reals) const {
  const Node& n = nodes_[static_cast<std::size_t>(idx)];
  auto fail = [&](const std::string& what) -> ExprValue {
    throw Error(Status::invalid_argument, fmt::format("expression \"{}\": {}", text_, what));
  };
  auto kid = [&](std::size_t k) { return eval_node(n.kids[k], vars, reals); };
  using Op = Node::Op;
  switch (n.op) {
    case Op::num_int: return make_int(n.i);
    case Op::num_double: return make_double(n.d);
    case Op::var: {
      auto it = vars.find(n.name);
      if (it == vars.end() && reals) {
        if (auto r = reals->find(n.name); r != reals->end()) return make_double(r->second);
      }
      if (it == vars.end()) {
        std::string known;
        for (const auto& [k, v] : vars) known += (known.empty() ? "" : ", ") + k;
        if (reals)
          for (const auto& [k, v] : *reals) known += (known.empty() ? "" : ", ") + k;
        return fail(fmt::format("unknown name \"{}\" (known: {})", n.name,
                                known.empty() ? "none" : known));
      }
      return make_int(it->second);
    }
    case Op::neg: {
      auto a = kid(0);
      if (a.is_int && a.i == INT64_MIN) fail("integer overflow");
      return a.is_int ? make_int(-a.i) : make_double(-a.d);
    }
    case Op::lnot: return make_int(kid(0).as_double() == 0.0 ? 1 : 0);
    case Op::land: return make_int(kid(0).as_double() != 0.0 && kid(1).as_double() != 0.0);
    case Op::lor: return make_int(kid(0).as_double() != 0.0 || kid(1).as_double() != 0.0);
    case Op::cond: return kid(0).as_double() != 0.0 ? kid(1) : kid(2);
    case Op::add: case Op::sub: case Op::mul: case Op::div: case Op::mod:
    case Op::lt: case Op::le: case Op::gt: case Op::ge: case Op::eq: case Op::ne: {
      auto a = kid(0), b = kid(1);
      if (a.is_int && b.is_int) {
        std::int64_t r = 0;
        switch (n.op) {
          case Op::add: if (__builtin_add_overflow(a.i, b.i, &r)) fail("integer overflow"); return make_int(r);
          case Op::sub: if (__builtin_sub_overflow(a.i, b.i, &r)) fail("integer overflow"); return make_int(r);
          case Op::mul: if (__builtin_mul_overflow(a.i, b.i, &r)) fail("integer overflow"); return make_int(r);
          case Op::div: if (b.i == 0) fail("division by zero"); if (a.i == INT64_MIN && b.i == -1) fail("integer overflow"); return make_int(a.i / b.i);
          case Op::mod: if (b.i == 0) fail("modulo by zero"); if (b.i == -1) return make_int(0); return make_int(a.i % b.i);
          case Op::lt: return make_int(a.i < b.i);
          case Op::le: return make_int(a.i <= b.i);
          case Op::gt: return make_int(a.i > b.i);
          case Op::ge: return make_int(a.i >= b.i);
          case Op::eq: return make_int(a.i == b.i);
          case Op::ne: return make_int(a.i != b.i);
          default: break;
        }
      }
      double x = a.as_double(), y = b.as_double();
      switch (n.op) {
        case Op::add: return make_double(x + y);
        case Op::sub: return make_double(x - y);
        case Op::mul: return make_double(x * y);
        case Op::div: if (y == 0) fail("division by zero"); return make_double(x / y);
        case Op::mod: if (y == 0) fail("modulo by zero"); return make_double(std::fmod(x, y));
        case Op::lt: return make_int(x < y);
        case Op::le: return make_int(x <= y);
        case Op::gt: return make_int(x > y);
        case Op::ge: return make_int(x >= y);
        case Op::eq: return make_int(x == y);
        case Op::ne: return make_int(x != y);
        default: break;
      }
      break;
    }
    case Op::call: {
      std::vector<ExprValue> args;
      for (std::size_t k = 0; k < n.kids.size(); ++k) args.push_back(kid(k));
      bool all_int = std::all_of(args.begin(), args.end(), [](const ExprValue& v) { return v.is_int; });
      const std::string& f = n.name;
      if (f == "min" || f == "max") {
        ExprValue best = args[0];
        for (std::size_t k = 1; k < args.size(); ++k) {
          bool less = args[k].as_double() < best.as_double();
          if ((f == "min") == less) best = args[k];
        }
        if (!all_int) return make_double(best.as_double());
        return best;
      }
      if (f == "cdiv" || f == "ceil_div" || f == "round_up") {
        if (!all_int) fail(fmt::format("{}() needs integer arguments", f));
        if (args[1].i <= 0) fail(fmt::format("{}() needs a positive divisor", f));
        // ceil(a / b) without forming a + b - 1, which can overflow.
        std::int64_t q = args[0].i / args[1].i + ((args[0].i % args[1].i) > 0 ? 1 : 0);
        if (f == "cdiv" || f == "ceil_div") return make_int(q);
        std::int64_t r = 0;
        if (__builtin_mul_overflow(q, args[1].i, &r)) fail("integer overflow");
        return make_int(r);
      }
      if (f == "abs") {
        if (args[0].is_int && args[0].i == INT64_MIN) fail("integer overflow");
        return args[0].is_int ? make_int(std::llabs(args[0].i)) : make_double(std::fabs(args[0].d));
      }
      double x = args[0].as_double();
      if (f == "sqrt") { if (x < 0) fail("sqrt of a negative number"); return make_double(std::sqrt(x)); }
      if (f == "pow") return make_double(std::pow(x, args[1].as_double()));
      if (f == "log") { if (x <= 0) fail("log of a non-positive number"); return make_double(std::log(x)); }
      if (f == "log2") { if (x <= 0) fail("log2 of a non-positive number"); return make_double(std::log2(x)); }
      if (f == "exp") return make_double(std::exp(x));
      if (f == "floor") return args[0].is_int ? args[0] : make_double(std::floor(x));
      if (f == "ceil") return args[0].is_int ? args[0] : make_double(std::ceil(x));
      break;
    }
  }
  return fail("internal error: unknown node");
}

ExprValue Expr::eval(const Vars& vars) const {
  if (root_ < 0) throw Error(Status::invalid_argument, "empty expression");
  return eval_node(root_, vars, nullptr);
}

ExprValue Expr::eval(const Vars& vars, const RealVars& reals) const {
  if (root_ < 0) throw Error(Status::invalid_argument, "empty expression");
  return eval_node(root_, vars, &reals);
}

std::int64_t Expr::eval_int(const Vars& vars) const { return eval_int(vars, RealVars{}); }

std::int64_t Expr::eval_int(const Vars& vars, const RealVars& reals) const {
  ExprValue v = eval(vars, reals);
  if (v.is_int) return v.i;
  if (std::isfinite(v.d) && std::floor(v.d) == v.d && std::fabs(v.d) < 9.2e18)
    return static_cast<std::int64_t>(v.d);
  throw Error(Status::invalid_argument,
              fmt::format("expression \"{}\" must give an integer, gave {}", text_, v.d));
}

double Expr::eval_double(const Vars& vars) const { return eval(vars).as_double(); }

double Expr::eval_double(const Vars& vars, const RealVars& reals) const { return eval(vars, reals).as_double(); }

std::vector<std::string> Expr::variables() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_)
    if (n.op == Node::Op::var) out.push_back(n.name);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::int64_t eval_int_expr(std::string_view text, const Vars& vars) {
  return Expr::parse(text).eval_int(vars);
}

double eval_double_expr(std::string_view text, const Vars& vars) {
  return Expr::parse(text).eval_double(vars);
}

}  // namespace ks::util
