// A solution's tunable parameters as typed values (docs/tuning.md): the
// declared space, the constraints, the chosen values and per-workload values.
// Read once from the solution's "params" JSON; the evaluator resolves each
// workload's values from these fields. Constraints stay text: they may name
// workload dimensions, so they are evaluated per workload.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"

KS_NAMESPACE_BEGIN

class KS_API Params {
 public:
  using Values = std::map<std::string, std::int64_t, std::less<>>;

  // One declared parameter: {"values": [64, 128]} or {"min": 1, "max": 4,
  // "step": 1}, with an optional "default" and "plan_only".
  struct KS_API Decl {
    std::string name;
    std::vector<std::int64_t> values;  // every allowed value, ascending for ranges
    std::int64_t default_value = 0;    // the first value unless "default" says otherwise
    bool plan_only = false;            // read by the plan's expressions only: not a macro, so no new compilation
    bool operator==(const Decl&) const = default;
  };

  std::vector<Decl> space;               // in declaration order
  std::vector<std::string> constraints;  // expressions, e.g. "C % VEC == 0"
  Values values;                         // "values": the chosen point; a missing parameter takes its default
  std::map<std::string, Values, std::less<>> per_workload;  // by workload name; overrides `values`

  // Declares nothing and sets nothing (a solution without params).
  bool empty() const;

  // Reads the "params" object: the one reader of its schema. JSON null gives
  // the empty Params. Throws ks::Error(Status::invalid_argument) naming the
  // problem, as "params: parameter \"VEC\": default 3 is not one of its
  // values" or "params: \"values\" sets undeclared parameter \"X\"". Whether
  // the values are allowed (and the constraints hold) depends on the
  // workload: the evaluator checks that when it resolves them.
  static Params from_json(const Json& j);

  // Params read from JSON write back exactly as read while their fields are
  // unchanged, since solution ids hash this JSON; Params built or changed in
  // code write their canonical form (ranges as value lists).
  Json to_json() const;

  // Params a stored solution holds that do not follow the schema: kept as
  // written (so the solution keeps its id) with what is wrong with them, and
  // no fields; evaluating the solution fails with that message, as it did
  // when params were read at evaluation. Readable ones come back as from_json
  // gives them.
  static Params as_written(const Json& j);
  bool readable() const { return problem().empty(); }
  // Why an as_written Params is unreadable; "" for every other.
  const std::string& problem() const;

  const Decl* find(std::string_view name) const;

  // Compares the fields, not how the JSON was written.
  bool operator==(const Params& other) const;

 private:
  struct Written;
  std::shared_ptr<const Written> written_;
};

KS_NAMESPACE_END
