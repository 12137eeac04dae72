#include <doctest/doctest.h>

#include <cmath>

#include "ksearch/error.hpp"
#include "ksearch/json.hpp"

using ks::Json;

TEST_CASE("json: parse and dump round-trip keeps order and types") {
  auto j = Json::parse(R"({"b": 1, "a": [true, null, 2.5, "x\ny"], "c": {"d": -3}})");
  CHECK(j.is_object());
  CHECK(j.size() == 3);
  CHECK(j.as_object()[0].first == "b");
  CHECK(j["b"].as_int() == 1);
  CHECK(j["a"][0].as_bool());
  CHECK(j["a"][1].is_null());
  CHECK(j["a"][2].as_number() == 2.5);
  CHECK(j["a"][3].as_string() == "x\ny");
  CHECK(j["c"]["d"].as_int() == -3);
  std::string compact = j.dump();
  CHECK(compact == R"({"b":1,"a":[true,null,2.5,"x\ny"],"c":{"d":-3}})");
  CHECK(Json::parse(compact) == j);
  CHECK(Json::parse(j.dump(2)) == j);
}

TEST_CASE("json: doubles keep their kind and precision") {
  Json j = Json(3.0);
  CHECK(j.dump() == "3.0");
  CHECK(Json::parse("3.0").is_number());
  CHECK_FALSE(Json::parse("3.0").is_int());
  double v = 0.1 + 0.2;
  CHECK(Json::parse(Json(v).dump()).as_number() == v);
  CHECK(Json(std::nan("")).dump() == "null");
}

TEST_CASE("json: control characters are escaped") {
  Json j = std::string("a\x01" "b\"\\");
  CHECK(j.dump() == "\"a\\u0001b\\\"\\\\\"");
  CHECK(Json::parse(j.dump()).as_string() == "a\x01" "b\"\\");
}

TEST_CASE("json: malformed text gives a parse error") {
  CHECK_THROWS_AS(Json::parse("{\"a\": }"), ks::Error);
  std::string err;
  CHECK_FALSE(Json::try_parse("[1, 2", &err).has_value());
  CHECK_FALSE(err.empty());
  try {
    Json::parse("nope");
    FAIL("should throw");
  } catch (const ks::Error& e) {
    CHECK(e.status() == ks::Status::parse);
  }
}

TEST_CASE("json: typed getters reject the wrong type and name the field") {
  auto j = Json::parse(R"({"n": "five", "i": 2.5, "ok": 1})");
  CHECK(j.get_number("missing", 7.0) == 7.0);
  try {
    j.get_number("n");
    FAIL("should throw");
  } catch (const ks::Error& e) {
    CHECK(std::string(e.what()).find("\"n\"") != std::string::npos);
  }
  CHECK_THROWS(j.get_int("i"));
  CHECK_THROWS(j.get_bool("ok"));
  CHECK_THROWS(j.at("absent"));
}

TEST_CASE("json: building and editing objects") {
  Json j;
  j["x"] = 1;
  j["list"].push_back("a");
  j["list"].push_back(Json::obj({{"k", false}}));
  CHECK(j.dump() == R"({"x":1,"list":["a",{"k":false}]})");
  CHECK(j.erase("x"));
  CHECK_FALSE(j.erase("x"));
  CHECK(j.size() == 1);
  CHECK(Json::parse(R"({"a":1,"a":2})")["a"].as_int() == 2);
}

TEST_CASE("json: large unsigned integers degrade to doubles, not wrap") {
  auto j = Json::parse("18446744073709551615");
  CHECK(j.is_number());
  CHECK(j.as_number() > 1.8e19);
}

TEST_CASE("json: invalid UTF-8 is written as U+FFFD so every line reads back") {
  std::string cut = "quote \xE2\x80";  // a curly quote cut in half
  std::string junk = "a\xFF" "b\xC0\xAF" "c";  // invalid byte, overlong encoding
  std::string good = "\xE2\x80\x98ok\xE2\x80\x99 \xF0\x9F\x98\x80";
  for (const std::string& s : {cut, junk, good}) {
    std::string line = Json(s).dump();
    auto back = Json::try_parse(line);
    REQUIRE(back.has_value());
    if (s == good) CHECK(back->as_string() == good);
  }
  CHECK(Json::parse(Json(junk).dump()).as_string() == "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD" "c");
}

TEST_CASE("json: DEL and C1 controls are escaped, so JSON on a terminal cannot drive it") {
  const std::string csi_c1 = "a\xC2\x9B" "31mb\x7F";  // U+009B (CSI) and DEL
  const std::string line = Json(csi_c1).dump();
  CHECK(line == "\"a\\u009b31mb\\u007f\"");
  CHECK(Json::parse(line).as_string() == csi_c1);
}
