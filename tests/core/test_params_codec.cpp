// ks::Params, the typed Solution::params: one reader of the schema, JSON
// written back byte for byte while unchanged, and the ids of solutions with
// params pinned before params were typed (tests/fixtures/params_ids).
#include <doctest/doctest.h>

#include <map>
#include <sstream>

#include "ksearch/error.hpp"
#include "ksearch/types.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using ks::Json;
using ks::Params;
using ks::Solution;

namespace {

std::string error_of(const Json& j) {
  try {
    Params::from_json(j);
  } catch (const ks::Error& e) {
    CHECK(e.status() == ks::Status::invalid_argument);
    return e.what();
  }
  FAIL("expected an error for " << j.dump());
  return "";
}

}  // namespace

TEST_CASE("params codec: typed fields from the JSON, in declaration order") {
  const Params p = Params::from_json(Json::parse(R"({
      "space": {"VEC": {"min": 1, "max": 7, "step": 2, "default": 3},
                "BLOCK": {"values": [256, 64], "plan_only": true}},
      "constraints": ["BLOCK % (VEC * 32) == 0"],
      "values": {"VEC": 5},
      "per_workload": {"big": {"BLOCK": 64}, "empty": null}})"));
  REQUIRE(p.space.size() == 2);
  CHECK(p.space[0] == Params::Decl{"VEC", {1, 3, 5, 7}, 3, false});
  CHECK(p.space[1] == Params::Decl{"BLOCK", {256, 64}, 256, true});
  CHECK(p.constraints == std::vector<std::string>{"BLOCK % (VEC * 32) == 0"});
  CHECK(p.values == Params::Values{{"VEC", 5}});
  CHECK(p.per_workload.at("big") == Params::Values{{"BLOCK", 64}});
  CHECK(p.per_workload.at("empty").empty());
  CHECK(p.find("BLOCK") == &p.space[1]);
  CHECK(p.find("NONE") == nullptr);
  CHECK_FALSE(p.empty());
  CHECK(p.readable());

  CHECK(Params::from_json(Json()).empty());
  CHECK(Params::from_json(Json()).to_json().is_null());
  CHECK(Params::from_json(Json::object()).empty());
  CHECK(Params().to_json().is_null());
}

TEST_CASE("params codec: every mistake is named") {
  auto check = [](const char* text, const char* part) {
    CAPTURE(text);
    const std::string msg = error_of(Json::parse(text));
    CHECK_MESSAGE(msg.find(part) != std::string::npos, msg);
    CHECK(msg.rfind("params: ", 0) == 0);
  };
  check(R"({"spaces": {}})", "spaces");
  check(R"({"space": {"1B": {"values": [1]}}})", "not a valid parameter name");
  check(R"({"space": {"B": {"values": []}}})", "non-empty array");
  check(R"({"space": {"B": {"min": 4, "max": 1}}})", "max (1) is below min (4)");
  check(R"({"space": {"B": {"values": [1], "default": 2}}})", "default 2 is not one of its values");
  check(R"({"space": {"B": {"values": [1]}}, "constraints": ["B +"]})", "constraint");
  check(R"({"space": {"B": {"values": [1]}}, "constraints": [1]})", "expression string");
  check(R"({"space": {"B": {"values": [1]}}, "values": {"X": 1}})", "\"values\" sets undeclared parameter \"X\"");
  check(R"({"space": {"B": {"values": [1]}}, "values": {"B": "1"}})", "\"B\" must be an integer");
  check(R"({"space": {"B": {"values": [1]}}, "values": [1]})", "must map parameter names to integers");
  check(R"({"space": {"B": {"values": [1]}}, "per_workload": [1]})", "\"per_workload\" must map workload names");
  check(R"({"space": {"B": {"values": [1]}}, "per_workload": {"w": {"C": 1}}})",
        "\"per_workload\".\"w\" sets undeclared parameter \"C\"");
}

TEST_CASE("params codec: written back as read while unchanged, canonical once changed") {
  const Json as_read = Json::parse(
      R"({"values": {"VEC": 2, "BLOCK": 256}, "space": {"VEC": {"min": 1, "max": 4}, "BLOCK": {"values": [256, 64]}}})");
  Params p = Params::from_json(as_read);
  CHECK(p.to_json().dump() == as_read.dump());  // key order, ranges and all
  Params copy = p;
  CHECK(copy.to_json().dump() == as_read.dump());

  p.values["VEC"] = 4;
  CHECK(p.to_json().dump() ==
        R"({"space":{"VEC":{"values":[1,2,3,4]},"BLOCK":{"values":[256,64]}},"values":{"VEC":4,"BLOCK":256}})");
  // The canonical form reads back to the same fields.
  CHECK(Params::from_json(p.to_json()) == p);

  Params built;
  built.space = {{"T", {8, 16}, 16, true}};
  built.values = {{"T", 8}};
  built.per_workload["w"] = {{"T", 16}};
  CHECK(built.to_json().dump() ==
        R"({"space":{"T":{"values":[8,16],"default":16,"plan_only":true}},"values":{"T":8},"per_workload":{"w":{"T":16}}})");
  CHECK(Params::from_json(built.to_json()) == built);
}

TEST_CASE("params codec: unreadable stored params are kept as written, with the problem") {
  const Json stored = Json::parse(R"({"space": {"B": {"values": [1]}}, "values": {"X": 1}})");
  const Params p = Params::as_written(stored);
  CHECK_FALSE(p.readable());
  CHECK(p.problem() == "params: \"values\" sets undeclared parameter \"X\"");
  CHECK(p.space.empty());
  CHECK_FALSE(p.empty());  // it holds something, if nothing usable
  CHECK(p.to_json().dump() == stored.dump());
  const Params ok = Params::as_written(Json::parse(R"({"space": {"B": {"values": [1]}}})"));
  CHECK(ok.readable());
  CHECK(ok.space.size() == 1);
}

TEST_CASE("params codec: ids of solution files with params are those pinned before params were typed") {
  const auto dir = ks::test::source_dir() / "tests/fixtures/params_ids";
  std::map<std::string, std::string> pins;
  std::istringstream lines(ks::util::read_file(dir / "ids.tsv"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    pins[line.substr(0, tab)] = line.substr(tab + 1);
  }
  REQUIRE(pins.size() == 5);
  for (const auto& [file, id] : pins) {
    CAPTURE(file);
    const Json j = Json::parse(ks::util::read_file(dir / file));
    const Solution s = Solution::from_json(j);
    CHECK(s.id == id);
    // Written back, the params are the file's, byte for byte, and read again keep the id.
    if (const Json* p = j.find("params")) CHECK(s.to_json().at("params").dump() == p->dump());
    else CHECK_FALSE(s.to_json().contains("params"));
    CHECK(Solution::from_json(s.to_json()).id == id);
  }
  // The pinned set covers what it claims: typed fields, an empty object, and a stored mistake.
  const Solution ranges = Solution::from_json(Json::parse(ks::util::read_file(dir / "ranges_and_order.json")));
  CHECK(ranges.params.find("VEC")->values.size() == 8);
  CHECK(ranges.params.per_workload.size() == 2);
  const Solution unreadable = Solution::from_json(Json::parse(ks::util::read_file(dir / "unreadable.json")));
  CHECK(unreadable.params.problem().find("undeclared parameter \"WIDTH\"") != std::string::npos);
}
