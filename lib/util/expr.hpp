// Arithmetic expressions over named integer variables (workload dimensions,
// tunable parameters): shapes, grid sizes, FLOP formulas, constraints.
//
//   operators:  ?:  ||  &&  == != < <= > >=  + -  * / %  unary - + !
//   functions:  min max cdiv(a,b) round_up(a,m) abs sqrt pow log log2 exp floor ceil
//
// Integer arithmetic stays integral (C division, overflow is an error); any
// double operand or function result makes the value a double.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ks::util {

using Vars = std::map<std::string, std::int64_t, std::less<>>;
// Named floating-point values (scalar inputs such as sm_scale), read where a
// name is not among the integer variables.
using RealVars = std::map<std::string, double, std::less<>>;

struct ExprValue {
  bool is_int = true;
  std::int64_t i = 0;
  double d = 0;
  double as_double() const { return is_int ? static_cast<double>(i) : d; }
};

class Expr {
 public:
  Expr() = default;
  // Throws ks::Error(Status::invalid_argument) naming the column of the problem.
  static Expr parse(std::string_view text);

  ExprValue eval(const Vars& vars) const;
  ExprValue eval(const Vars& vars, const RealVars& reals) const;
  // Throws unless the value is an integer (a double with an integral value is accepted).
  std::int64_t eval_int(const Vars& vars) const;
  std::int64_t eval_int(const Vars& vars, const RealVars& reals) const;
  double eval_double(const Vars& vars) const;
  double eval_double(const Vars& vars, const RealVars& reals) const;
  bool eval_bool(const Vars& vars) const { return eval_double(vars) != 0.0; }

  // The identifiers the expression reads, sorted and unique.
  std::vector<std::string> variables() const;
  const std::string& text() const { return text_; }
  bool empty() const { return nodes_.empty(); }

  struct Node {
    enum class Op {
      num_int, num_double, var, neg, lnot, add, sub, mul, div, mod, lt, le, gt, ge, eq, ne, land,
      lor, cond, call
    };
    Op op;
    std::int64_t i = 0;
    double d = 0;
    std::string name;          // var or function name
    std::vector<int> kids;     // indices into nodes_
  };

 private:
  ExprValue eval_node(int idx, const Vars& vars, const RealVars* reals) const;
  std::string text_;
  std::vector<Node> nodes_;
  int root_ = -1;
  friend class ExprParser;
};

// Convenience: parse and evaluate once.
std::int64_t eval_int_expr(std::string_view text, const Vars& vars);
double eval_double_expr(std::string_view text, const Vars& vars);

}  // namespace ks::util
