// The settings table (ksearch/search_settings.hpp): SearchConfig's codec and
// validation read it, setting by name checks types and bounds, and
// docs/options.md is what the table gives.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "ksearch/error.hpp"
#include "ksearch/search_settings.hpp"

using namespace ks;

TEST_CASE("every row has a unique key, a field and, when settable, help") {
  std::set<std::string> keys, flags;
  for (const auto& s : search_settings()) {
    CHECK_MESSAGE(keys.insert(s.key).second, s.key);
    if (!s.flag.empty()) CHECK_MESSAGE(flags.insert(s.flag).second, s.flag);
    if (s.settable) CHECK_MESSAGE(!s.help.empty(), s.key);
    CHECK(s.type != SettingType::deduce);
    // The default is inside the bounds.
    CHECK_NOTHROW(check_setting_bounds(s, s.default_value()));
  }
  // The manifest writes every row, and nothing else.
  Json j = SearchConfig{}.to_json();
  CHECK(j.size() == search_settings().size());
}

TEST_CASE("the codec is the table: to_json and from_json round-trip each settable row") {
  SearchConfig c;
  set_search_setting(c, "wm_stagnation_window", Json(7));
  set_search_setting(c, "evolve_exploit_ratio", Json(0.25));
  set_search_setting(c, "wm_lenient_edits", Json(true));
  set_search_setting(c, "seed", Json(42));
  set_search_setting(c, "max_answer_bytes", Json(1000));
  SearchConfig back = SearchConfig::from_json(c.to_json());
  CHECK(back.world_model.stagnation_window == 7);
  CHECK(back.evolve.exploit_ratio == 0.25);
  CHECK(back.world_model.lenient_edits);
  CHECK(back.seed == 42);
  CHECK(back.max_answer_bytes == 1000);
  CHECK(back.to_json() == c.to_json());
}

TEST_CASE("a manifest without a row's key reads as that row says (older run folders)") {
  SearchConfig c = SearchConfig::from_json(Json::obj({{"strategy", "world_model"}}));
  CHECK(c.world_model.loop_rules == 1);     // before issue 43's loop
  CHECK(c.world_model.propose_every == 0);  // follows loop_rules 1
  CHECK(c.tune.batch == 1);                 // before batches
  CHECK_FALSE(c.start_from_starting_point);
  CHECK(c.world_model.stagnation_window == WorldModelOptions{}.stagnation_window);
}

TEST_CASE("setting by name names the problem") {
  SearchConfig c;
  CHECK_THROWS_WITH_AS(set_search_setting(c, "wm_stagnation_windw", Json(3)),
                       doctest::Contains("\"wm_stagnation_windw\" is not a search setting (known: "), Error);
  CHECK_THROWS_WITH_AS(set_search_setting(c, "wm_loop_rules", Json(2)), doctest::Contains("not a search setting"),
                       Error);
  CHECK_THROWS_WITH_AS(set_search_setting(c, "wm_max_difficulty", Json(9)),
                       doctest::Contains("wm_max_difficulty must be between 1 and 5, is 9"), Error);
  CHECK_THROWS_WITH_AS(set_search_setting(c, "evolve_exploit_ratio", Json(1.5)),
                       doctest::Contains("evolve_exploit_ratio must be a number between 0 and 1, is 1.5"), Error);
  CHECK_THROWS_WITH_AS(set_search_setting(c, "tune_batch", Json(-1)),
                       doctest::Contains("tune_batch must be between 0 (automatic) and 64, is -1"), Error);
  CHECK_THROWS_WITH_AS(set_search_setting(c, "parallel", Json("two")),
                       doctest::Contains("parallel must be an integer, is \"two\""), Error);
  CHECK_THROWS_WITH_AS(set_search_setting(c, "wm_lenient_edits", Json(1)),
                       doctest::Contains("wm_lenient_edits must be true or false"), Error);
  CHECK_THROWS_WITH_AS(SearchConfig::from_json(Json::obj({{"parallel", 0}})),
                       doctest::Contains("parallel must be >= 1, is 0"), Error);
  CHECK_THROWS_WITH_AS(SearchConfig::from_json(Json::obj({{"max_cost_usd", "x"}})),
                       doctest::Contains("search configuration: max_cost_usd must be a number"), Error);
  // A refused value leaves the bounds check to say so; the table says nothing of a good one.
  CHECK(c.world_model.max_difficulty == WorldModelOptions{}.max_difficulty);
}

TEST_CASE("the table as JSON lists the settable rows with their bounds") {
  Json t = search_settings_json();
  bool found = false;
  for (const auto& r : t.as_array()) {
    CHECK(r.get_string("key") != "wm_loop_rules");
    if (r.get_string("key") == "evolve_islands") {
      found = true;
      CHECK(r["min"].as_number() == 1);
      CHECK(r["max"].as_number() == 64);
      CHECK(r["default"].as_int() == 3);
      CHECK(r.get_string("flag") == "--evolve-islands");
      CHECK(r.get_string("type") == "integer");
    }
  }
  CHECK(found);
}

TEST_CASE("docs/options.md is what the table gives") {
  const std::string path = std::string(KS_SOURCE_DIR) + "/docs/options.md";
  const std::string want = search_settings_markdown();
  if (const char* u = std::getenv("KS_UPDATE_DOCS"); u && std::string(u) == "1") {
    std::ofstream(path, std::ios::binary) << want;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream have;
  have << in.rdbuf();
  CHECK_MESSAGE(have.str() == want, "docs/options.md is stale: run KS_UPDATE_DOCS=1 ctest -R test_settings");
}
