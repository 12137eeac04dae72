// The evolve strategy: its population (islands, migration, the elite
// archive, parent and inspiration choice, the saved state) on its own, and
// the strategy in a session with a scripted model (islands in turn,
// migration events, prompts, resume to the identical state, and a changed
// state.json refused).
#include <doctest/doctest.h>

#include <functional>
#include <set>

#include "search/evolve.hpp"
#include "search/session.hpp"
#include "search/strategies.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "search/fakes.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
using ks::core::EvolveMember;
using ks::core::EvolveParams;
using ks::core::EvolvePopulation;

namespace {

EvolveMember member(const std::string& id, double score, int origin = 0, const std::string& cell = "plain/0") {
  EvolveMember m;
  m.solution_id = id;
  m.score = score;
  m.latency_ms = 1.0 / score;
  m.origin = origin;
  m.cell = cell;
  return m;
}

std::vector<std::string> ids(const std::vector<EvolveMember>& v) {
  std::vector<std::string> out;
  for (const auto& m : v) out.push_back(m.solution_id);
  return out;
}

EvolveParams params(int islands, int island_size = 4, int archive = 3) {
  EvolveParams p;
  p.islands = islands;
  p.island_size = island_size;
  p.archive_size = archive;
  p.migration_size = 1;
  p.inspirations = 2;
  return p;
}

Solution code(const std::string& text) {
  Solution s;
  s.language = Language::cpp;
  s.sources = {{"kernel.cpp", text}};
  return s;
}

}  // namespace

TEST_CASE("evolve: a kernel's cell is its techniques and its size bucket") {
  CHECK(core::evolve_cell(code("void f() {}")) == "plain/0");
  CHECK(core::evolve_cell(code("#pragma GCC unroll 4\nstd::thread t;")) == "unroll+threads/0");
  CHECK(core::evolve_cell(code("__shared__ float s[32]; float4 v; " + std::string(1500, ' '))) == "shared+vector/1");
  CHECK(core::evolve_cell(code(std::string(100000, ' '))) == "plain/5");  // the last bucket holds every larger one
}

TEST_CASE("evolve: an island keeps its best kernels, best first, each once") {
  EvolvePopulation pop(params(1, 3));
  CHECK(pop.add(0, member("aa", 1.0)).island_added);
  CHECK(pop.add(0, member("bb", 3.0)).island_added);
  CHECK_FALSE(pop.add(0, member("bb", 3.0)).island_added);  // already there
  CHECK(pop.add(0, member("cc", 2.0)).island_added);
  CHECK(ids(pop.islands()[0]) == std::vector<std::string>{"bb", "cc", "aa"});
  auto a = pop.add(0, member("dd", 2.5));  // full: the worst makes room
  CHECK(a.island_added);
  CHECK(a.island_dropped == "aa");
  CHECK(ids(pop.islands()[0]) == std::vector<std::string>{"bb", "dd", "cc"});
  CHECK_FALSE(pop.add(0, member("ee", 0.5)).island_added);  // worse than all of a full island
  // Equal scores are ordered by id, so the order never rests on insertion.
  EvolvePopulation tie(params(1, 3));
  tie.add(0, member("b2", 1.0));
  tie.add(0, member("a1", 1.0));
  CHECK(ids(tie.islands()[0]) == std::vector<std::string>{"a1", "b2"});
}

TEST_CASE("evolve: the archive keeps one elite per cell, and evicts the worst when full") {
  EvolvePopulation pop(params(2, 4, 2));
  CHECK(pop.add(0, member("aa", 1.0, 0, "plain/0")).archive == "new_cell");
  CHECK(pop.add(1, member("bb", 2.0, 1, "unroll/0")).archive == "new_cell");
  CHECK(pop.add(0, member("aa", 1.0, 0, "plain/0")).archive == "already");
  CHECK(pop.add(1, member("cc", 0.5, 1, "plain/0")).archive == "kept");  // the cell's elite is better
  auto r = pop.add(1, member("dd", 1.5, 1, "plain/0"));
  CHECK(r.archive == "replaced");
  CHECK(r.archive_replaced == "aa");
  CHECK(ids(pop.archive()) == std::vector<std::string>{"bb", "dd"});
  CHECK(pop.add(0, member("ee", 0.1, 0, "threads/0")).archive == "rejected");  // full, worse than every elite
  auto e = pop.add(0, member("ff", 5.0, 0, "threads/0"));
  CHECK(e.archive == "evicted");
  CHECK(e.archive_replaced == "dd");
  CHECK(ids(pop.archive()) == std::vector<std::string>{"ff", "bb"});
  // The islands are not the archive: "aa" stays on island 0.
  CHECK(ids(pop.islands()[0]) == std::vector<std::string>{"ff", "aa", "ee"});
}

TEST_CASE("evolve: migration copies each island's elites to the next island of the ring") {
  EvolveParams p = params(3, 3);
  p.migration_size = 2;
  EvolvePopulation pop(p);
  pop.add(0, member("a1", 3.0, 0));
  pop.add(0, member("a2", 2.0, 0));
  pop.add(0, member("a3", 1.0, 0));
  pop.add(1, member("b1", 0.5, 1));
  auto moves = pop.migrate();
  // Island 0 sends its two best to island 1; island 1 sends b1 (as it was before this migration) to island 2;
  // island 2 is empty and sends nothing.
  REQUIRE(moves.size() == 3);
  CHECK(moves[0].from == 0);
  CHECK(moves[0].to == 1);
  CHECK(moves[0].solution_id == "a1");
  CHECK(moves[1].solution_id == "a2");
  CHECK(moves[2].from == 1);
  CHECK(moves[2].to == 2);
  CHECK(moves[2].solution_id == "b1");
  CHECK(ids(pop.islands()[1]) == std::vector<std::string>{"a1", "a2", "b1"});
  CHECK(ids(pop.islands()[2]) == std::vector<std::string>{"b1"});
  CHECK(pop.islands()[1][0].origin == 0);  // a migrant keeps where it was written
  // Again: copies already on the next island are not taken twice.
  auto again = pop.migrate();
  for (const auto& m : again) CHECK_FALSE((m.to == 1 && (m.solution_id == "a1" || m.solution_id == "a2")));
  // One island, or no migrants: nothing moves.
  EvolvePopulation one(params(1));
  one.add(0, member("a1", 1.0));
  CHECK(one.migrate().empty());
}

TEST_CASE("evolve: parents mix exploitation and exploration; inspirations are the best and random others") {
  EvolveParams p = params(2, 8, 8);
  p.inspirations = 3;
  EvolvePopulation pop(p);
  for (int i = 0; i < 6; ++i) pop.add(0, member(fmt::format("a{}", i), 1.0 + i, 0, fmt::format("c{}/0", i)));
  pop.add(1, member("bb", 100.0, 1, "other/0"));
  std::mt19937_64 rng(1);
  // Always exploit: the island's best, and the best other kernel (the archive's "bb") first among the inspirations.
  p.exploit_ratio = 1.0;
  EvolvePopulation exploit = EvolvePopulation::from_json(pop.to_json(), p, "test");
  auto c = exploit.choose(0, rng);
  CHECK(c.mode == "exploit");
  REQUIRE(c.parent);
  CHECK(c.parent->solution_id == "a5");
  REQUIRE(c.inspirations.size() == 3);
  CHECK(c.inspirations[0].solution_id == "bb");
  for (const auto& m : c.inspirations) CHECK(m.solution_id != "a5");
  CHECK(c.inspirations[1].solution_id != c.inspirations[2].solution_id);
  // Never exploit: random members of the island, every one of them in time.
  p.exploit_ratio = 0.0;
  EvolvePopulation explore = EvolvePopulation::from_json(pop.to_json(), p, "test");
  std::set<std::string> parents;
  for (int i = 0; i < 200; ++i) {
    auto e = explore.choose(0, rng);
    CHECK(e.mode == "explore");
    parents.insert(e.parent->solution_id);
  }
  CHECK(parents.size() == 6);
  // The same seed, the same choices.
  std::mt19937_64 r1(42), r2(42);
  for (int i = 0; i < 20; ++i) {
    auto x = pop.choose(i % 2, r1), y = pop.choose(i % 2, r2);
    CHECK(x.mode == y.mode);
    CHECK(ids(x.inspirations) == ids(y.inspirations));
  }
  // An empty island has no parent, and still sees the archive.
  EvolvePopulation sparse(params(2));
  sparse.add(0, member("aa", 1.0));
  auto empty = sparse.choose(1, rng);
  CHECK(empty.mode == "empty");
  CHECK_FALSE(empty.parent);
  CHECK(ids(empty.inspirations) == std::vector<std::string>{"aa"});
}

TEST_CASE("evolve: the population reads back from its JSON, and a changed one is refused naming the field") {
  EvolvePopulation pop(params(2));
  pop.add(0, member("aa", 2.0, 0, "plain/0"));
  pop.add(1, member("bb", 1.0, 1, "unroll/0"));
  Json j = pop.to_json();
  CHECK(EvolvePopulation::from_json(j, params(2), "state.json").to_json() == j);
  auto refused = [&](const std::function<void(Json&)>& edit, const std::string& message) {
    Json bad = j;
    edit(bad);
    try {
      EvolvePopulation::from_json(bad, params(2), "state.json");
      FAIL("accepted: " << bad.dump());
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK_MESSAGE(std::string(e.what()).find(message) != std::string::npos, e.what());
    }
  };
  refused([](Json& b) { b["islands"][0]["members"][0]["score"] = -1.0; },
          "state.json: islands[0].members[0]: score must be a number > 0");
  refused([](Json& b) { b["islands"][0]["members"][0]["solution_id"] = "../x"; }, "solution_id must be a solution id");
  refused([](Json& b) { b["islands"][1]["members"][0]["origin"] = 7; }, "origin must be an island between 0 and 1");
  refused([](Json& b) { b["islands"].as_array().pop_back(); }, "holds 1 islands, and the run has 2");
  refused([](Json& b) { b["islands"][0]["members"].push_back(b["islands"][0]["members"][0]); }, "twice");
  refused([](Json& b) { b["archive"][1]["cell"] = "plain/0"; }, "a second elite of the cell \"plain/0\"");
  refused([](Json& b) { b["archive"][0]["extra"] = 1; }, "extra");
  CHECK(core::json_first_difference(j, j).empty());
  Json other = j;
  other["islands"][1]["members"][0]["solution_id"] = "cc";
  CHECK(core::json_first_difference(j, other) == "islands[1].members[0].solution_id: \"bb\" vs \"cc\"");
}

// ---------------------------------------------------------------------------
// The strategy in a session

namespace {

struct Fixture {
  SpecTask task{test::tiny_task_spec()};
  test::MarkerEvaluator evaluator;
  test::NoWorldModel wm;
};

SearchConfig evolve_config(int rounds) {
  SearchConfig c = test::search_config("evolve", Language::cpp, rounds);
  c.evolve.islands = 2;
  c.evolve.migration_interval = 4;
  c.evolve.inspirations = 1;
  c.seed = 5;
  return c;
}

// Passing kernels of distinct speeds and techniques, and failures.
std::vector<std::string> evolve_script() {
  return {test::answer("passed 4.0", "a"),
          test::answer("compile_error", "b"),
          test::answer("passed 3.0", "c #pragma GCC unroll 4"),
          test::answer("passed 2.0", "d"),
          "no code here",
          test::answer("passed 1.0", "e std::thread"),
          test::answer("incorrect", "f"),
          test::answer("passed 0.5", "g"),
          test::answer("passed 0.8", "h")};
}

std::vector<Json> events_of(const RunStore& store, const std::string& type) {
  std::vector<Json> out;
  for (const auto& e : store.events())
    if (e.get_string("type") == type) out.push_back(e);
  return out;
}

std::string run_evolve(const std::filesystem::path& dir, int rounds, std::size_t answers_from, bool create) {
  Fixture f;
  auto all = evolve_script();
  test::ScriptedLlm llm(std::vector<std::string>(all.begin() + static_cast<std::ptrdiff_t>(answers_from), all.end()));
  RunStore store = create ? RunStore::create(dir, Json::object()) : RunStore::open(dir);
  core::Session s(f.task, f.evaluator, llm, f.wm, store, evolve_config(rounds));
  auto strategy = make_strategy("evolve");
  return to_string(s.run(*strategy));
}

}  // namespace

TEST_CASE("evolve strategy: islands in turn, fixes, migrations, and the population in state.json") {
  auto dir = test::scratch_dir("evolve_run");
  Fixture f;
  test::ScriptedLlm llm(evolve_script());
  RunStore store = RunStore::create(dir, Json::object());
  core::Session s(f.task, f.evaluator, llm, f.wm, store, evolve_config(9));
  auto strategy = make_strategy("evolve");
  CHECK(s.run(*strategy) == StopReason::max_rounds);
  CHECK(s.rounds_used() == 9);
  REQUIRE(s.best());
  CHECK(s.best()->eval.latency_ms == doctest::Approx(0.5));
  auto decisions = events_of(store, "decision");
  REQUIRE(decisions.size() == 9);
  for (std::size_t i = 0; i < decisions.size(); ++i) CHECK(decisions[i].get_int("island") == static_cast<int>(i % 2));
  CHECK(decisions[0].get_string("mode") == "new");
  CHECK(decisions[1].get_string("mode") == "new");
  CHECK(decisions[2].get_string("mode") == "exploit");  // island 0 has "a"
  CHECK(decisions[3].get_string("mode") == "fix");      // island 1's first kernel did not compile
  CHECK(decisions[3].get_string("next") == "debug");
  // The prompts: the fix shows the compiler's complaint; an improve shows the parent and an inspiration.
  CHECK(llm.requests[3].kind == PromptKind::debug);
  CHECK(llm.requests[3].prompt.find("Last attempt on this island (failing)") != std::string::npos);
  CHECK(llm.requests[3].prompt.find("marker says compile_error") != std::string::npos);
  bool shown = false;
  for (const auto& r : llm.requests)
    shown = shown || (r.kind == PromptKind::improve && r.prompt.find("## Parent kernel") != std::string::npos &&
                      r.prompt.find("### Inspiration 1") != std::string::npos &&
                      r.prompt.find("| big | bench | passed |") != std::string::npos);
  CHECK(shown);
  // Migrations after generations 4 and 8 (one sample per generation).
  auto migrations = events_of(store, "evolve_migration");
  REQUIRE(migrations.size() == 2);
  CHECK(migrations[0].get_int("generation") == 4);
  CHECK(decisions[5].get_string("mode") == "exploit");  // island 1 got island 0's best
  bool moved = false;
  for (const auto& m : migrations) moved = moved || !m["moves"].empty();
  CHECK(moved);
  auto state = store.state();
  REQUIRE(state);
  CHECK(state->get_string("strategy") == "evolve");
  CHECK(state->get_int("generation") == 9);
  CHECK(state->get_int("rounds_used") == 9);
  const Json& archive = (*state)["population"]["archive"];
  std::set<std::string> cells;
  for (std::size_t i = 0; i < archive.size(); ++i) cells.insert(archive[i].get_string("cell"));
  CHECK(cells.size() == archive.size());
  CHECK(cells.count("unroll/0") == 1);
  CHECK(cells.count("threads/0") == 1);
}

TEST_CASE("evolve strategy: a resume replays to the identical state; a changed state.json is refused") {
  auto full = test::scratch_dir("evolve_full");
  run_evolve(full, 9, 0, true);
  auto part = test::scratch_dir("evolve_part");
  run_evolve(part, 5, 0, true);
  // The resume: the first 5 answers come from the journal, the rest from the model.
  run_evolve(part, 9, 5, false);
  auto a = RunStore::open_read_only(full), b = RunStore::open_read_only(part);
  CHECK(a.state()->dump() == b.state()->dump());
  REQUIRE(a.attempts().size() == b.attempts().size());
  for (std::size_t i = 0; i < a.attempts().size(); ++i)
    CHECK(a.attempts()[i].solution.id == b.attempts()[i].solution.id);
  CHECK(events_of(a, "decision").size() == events_of(b, "decision").size());

  // A state the journal does not replay to: the resume stops, naming the first difference.
  auto changed = test::scratch_dir("evolve_changed");
  run_evolve(changed, 5, 0, true);
  {
    RunStore store = RunStore::open(changed);
    Json st = *store.state();
    st["next_island"] = 1 - st.get_int("next_island");
    store.write_state(st);
  }
  try {
    run_evolve(changed, 9, 5, false);
    FAIL("a changed state.json was accepted");
  } catch (const Error& e) {
    CHECK(e.status() == Status::state);
    CHECK_MESSAGE(std::string(e.what()).find("state.json records generation 5 after 5 rounds") != std::string::npos,
                  e.what());
    CHECK_MESSAGE(std::string(e.what()).find("next_island") != std::string::npos, e.what());
  }
  // A field out of range is named.
  auto broken = test::scratch_dir("evolve_broken");
  run_evolve(broken, 5, 0, true);
  {
    RunStore store = RunStore::open(broken);
    Json st = *store.state();
    st["population"]["islands"][1]["members"][0]["born"] = -3;
    store.write_state(st);
  }
  try {
    run_evolve(broken, 9, 5, false);
    FAIL("a broken state.json was accepted");
  } catch (const Error& e) {
    CHECK(e.status() == Status::parse);
    CHECK_MESSAGE(std::string(e.what()).find("state.json: population: islands[1].members[0]: born must be a "
                                             "generation >= 0, is -3") != std::string::npos,
                  e.what());
  }
}

TEST_CASE("evolve: options are validated") {
  SearchConfig c = evolve_config(5);
  c.validate();
  c.evolve.islands = 0;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("evolve_islands must be between 1 and 64"), Error);
  c = evolve_config(5);
  c.evolve.exploit_ratio = 1.5;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("evolve_exploit_ratio"), Error);
  c = evolve_config(5);
  c.evolve.migration_size = 100;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("evolve_migration_size"), Error);
  // The manifest's form round-trips; a manifest without the fields reads the defaults.
  c = evolve_config(5);
  c.evolve.archive_size = 7;
  CHECK(SearchConfig::from_json(c.to_json()).evolve.archive_size == 7);
  Json old = c.to_json();
  old.erase("evolve_archive_size");
  CHECK(SearchConfig::from_json(old).evolve.archive_size == SearchConfig{}.evolve.archive_size);
}
