#include <doctest/doctest.h>

#include <fmt/format.h>

#include <fstream>

#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

Solution sol(const std::string& code, const std::string& path = "kernel.cpp") {
  Solution s;
  s.language = Language::cpp;
  s.sources = {{path, code}};
  s.launch_plan = LaunchPlan::from_json(Json::parse(R"({"calls": [{"fn": "f", "args": []}]})"));
  return s.finalize();
}

}  // namespace

TEST_CASE("run store: create refuses an existing run; open needs a manifest") {
  auto dir = test::scratch_dir("rs_create");
  RunStore::create(dir / "run", Json::obj({{"task", "t"}}));
  CHECK_THROWS_WITH(RunStore::create(dir / "run", Json::object()), doctest::Contains("already holds a run"));
  try {
    RunStore::open(dir / "nothing");
    FAIL("should throw");
  } catch (const Error& e) {
    CHECK(e.status() == Status::not_found);
  }
  CHECK(RunStore::open(dir / "run").manifest()["task"].as_string() == "t");
}

TEST_CASE("run store: events and transcript append with sequence numbers") {
  auto dir = test::scratch_dir("rs_events");
  {
    RunStore s = RunStore::create(dir, Json::object());
    CHECK(s.append_event("a", Json::obj({{"x", 1}})) == 0);
    CHECK(s.append_event("b", Json()) == 1);
    s.append_transcript(Json::obj({{"seq", 0}, {"kind", "generate"}}));
  }
  RunStore s = RunStore::open(dir);
  CHECK(s.append_event("c", Json::object()) == 2);
  // A second writer is refused while this one holds the run.
  CHECK_THROWS_WITH(RunStore::open(dir), doctest::Contains("in use by another ksearch process"));
  CHECK(RunStore::open_read_only(dir).events().size() == 3);
  auto ev = s.events();
  REQUIRE(ev.size() == 3);
  CHECK(ev[0]["type"].as_string() == "a");
  CHECK(ev[0]["x"].as_int() == 1);
  CHECK(ev[2]["seq"].as_int() == 2);
  CHECK(s.transcript().size() == 1);
}

TEST_CASE("run store: a torn last line is cut on open so later appends stay whole") {
  auto dir = test::scratch_dir("rs_torn");
  {
    RunStore s = RunStore::create(dir, Json::object());
    s.append_event("a", Json::object());
  }
  {
    std::ofstream out(dir / "events.jsonl", std::ios::app);
    out << "{\"seq\":1,\"type\":\"b";  // killed mid-write
  }
  RunStore s = RunStore::open(dir);
  CHECK(s.append_event("c", Json::object()) == 1);
  auto ev = s.events();
  REQUIRE(ev.size() == 2);
  CHECK(ev[1]["type"].as_string() == "c");
}

TEST_CASE("run store: open removes the temporary files a kill left, and nothing else") {
  auto dir = test::scratch_dir("rs_stale_tmp");
  AttemptRecord a;
  a.solution = sol("int a;");
  // A source an answer named like a temporary file is stored under another name.
  AttemptRecord b;
  b.seq = 1;
  b.solution = sol("int b;", "kernel.cpp.tmp.1.2.3");
  {
    RunStore s = RunStore::create(dir / "run", Json::object());
    s.record_attempt(a);
    s.record_attempt(b);
    s.write_world_model(1, Json::object());
  }
  const fs::path run = dir / "run";
  const fs::path folder = run / "attempts" / fmt::format("0000-{}", a.solution.id);
  CHECK(fs::exists(run / "attempts" / fmt::format("0001-{}", b.solution.id) / "source_0.txt"));
  // Killed between a write and its rename, in each folder the store writes.
  const std::vector<fs::path> stale = {run / "manifest.json.tmp.77.78.0", run / "state.json.tmp.77.78.1",
                                       folder / "eval.json.tmp.77.79.2", run / "world_model" / "v000002.json.tmp.77.78.3",
                                       run / "best" / "eval.json.tmp.77.78.4"};
  fs::create_directories(run / "best");
  for (const auto& p : stale) std::ofstream(p) << "{";
  // Look-alikes, a link named like one, and what it leads to stay.
  const std::vector<fs::path> kept = {run / "notes.tmp", run / "x.tmp.1.2", run / "x.tmp.1.2.3.4", run / "x.tmp.a.2.3",
                                      folder / "kernel.cpp"};
  for (const auto& p : kept)
    if (!fs::exists(p)) std::ofstream(p) << "mine";
  std::ofstream(dir / "private.txt") << "private";
  fs::create_symlink(dir / "private.txt", run / "link.tmp.1.2.3");
  RunStore s = RunStore::open(run);
  for (const auto& p : stale) CHECK_MESSAGE(!fs::exists(p), p.string());
  for (const auto& p : kept) CHECK_MESSAGE(fs::exists(p), p.string());
  CHECK(fs::is_symlink(run / "link.tmp.1.2.3"));
  CHECK(util::read_file(dir / "private.txt") == "private");
  CHECK(util::is_atomic_write_temporary("manifest.json.tmp.1.22.333"));
  CHECK_FALSE(util::is_atomic_write_temporary(".tmp.1.2.3"));
  CHECK_FALSE(util::is_atomic_write_temporary("a.tmp.1.2."));
}

TEST_CASE("run store: attempts keep every solution with its evaluation and raw answer") {
  auto dir = test::scratch_dir("rs_attempts");
  RunStore s = RunStore::create(dir, Json::object());
  AttemptRecord a;
  a.seq = 0;
  a.round = 1;
  a.action = "generate";
  a.solution = sol("int a;");
  a.solution.parent_id = "p0";
  a.eval.status = EvalStatus::passed;
  a.eval.latency_ms = 2.0;
  s.record_attempt(a);
  AttemptRecord b;
  b.seq = 1;
  b.round = 2;
  b.eval.status = EvalStatus::generation_failed;
  b.eval.log = "no source block";
  b.raw_answer = "I cannot do that.";
  s.record_attempt(b);
  auto all = RunStore::open_read_only(dir).attempts();
  REQUIRE(all.size() == 2);
  CHECK(all[0].solution.id == a.solution.id);
  CHECK(all[0].solution.parent_id == "p0");
  CHECK(all[0].solution.sources[0].content == "int a;");
  CHECK(all[0].eval.latency_ms == 2.0);
  CHECK(fs::exists(dir / "attempts" / fmt::format("0000-{}", a.solution.id) / "kernel.cpp"));
  CHECK(all[1].eval.status == EvalStatus::generation_failed);
  CHECK(all[1].raw_answer == "I cannot do that.");
  CHECK(all[1].solution.sources.empty());
}

TEST_CASE("run store: file names from answers cannot escape the run folder") {
  auto dir = test::scratch_dir("rs_names");
  RunStore s = RunStore::create(dir / "run", Json::object());
  AttemptRecord a;
  a.solution = sol("evil", "../../escape.txt");
  s.record_attempt(a);
  CHECK_FALSE(fs::exists(dir / "escape.txt"));
  CHECK(fs::exists(dir / "run" / "attempts" / fmt::format("0000-{}", a.solution.id) / "escape.txt"));
}

TEST_CASE("run store: world-model snapshots are versioned and never rewritten") {
  auto dir = test::scratch_dir("rs_wm");
  RunStore s = RunStore::create(dir, Json::object());
  CHECK_FALSE(s.latest_world_model().has_value());
  s.write_world_model(1, Json::obj({{"v", 1}}));
  s.write_world_model(3, Json::obj({{"v", 3}}));
  s.write_world_model(3, Json::obj({{"v", 999}}));  // a replay writes the same version again
  CHECK(s.world_model_versions() == std::vector<std::uint64_t>{1, 3});
  CHECK((*s.latest_world_model())["v"].as_int() == 3);
}

TEST_CASE("run store: best solution replaces the previous one completely") {
  auto dir = test::scratch_dir("rs_best");
  RunStore s = RunStore::create(dir, Json::object());
  BestSolution b1{sol("one", "a.cpp"), EvalResult{}, 1};
  s.write_best(b1);
  CHECK(fs::exists(dir / "best" / "a.cpp"));
  BestSolution b2{sol("two", "b.cpp"), EvalResult{}, 4};
  b2.eval.latency_ms = 0.5;
  s.write_best(b2);
  CHECK_FALSE(fs::exists(dir / "best" / "a.cpp"));
  auto back = s.best();
  REQUIRE(back.has_value());
  CHECK(back->round == 4);
  CHECK(back->solution.id == b2.solution.id);
  CHECK(back->eval.latency_ms == 0.5);
}

// Checks that f throws a ks::Error whose message holds `needle`.
template <class F>
void check_error(F f, const std::string& needle) {
  std::string what = "(no error)";
  try {
    f();
  } catch (const Error& e) {
    what = e.what();
  }
  CHECK_MESSAGE(what.find(needle) != std::string::npos, what);
}

TEST_CASE("run store: a damaged record is an error that names its file") {
  auto dir = test::scratch_dir("rs_damaged");
  RunStore s = RunStore::create(dir, Json::object());
  AttemptRecord a;
  a.round = 1;
  a.solution = sol("int a;");
  s.record_attempt(a);
  s.write_best(BestSolution{sol("int a;"), EvalResult{}, 1});
  s.write_state(Json::obj({{"cycle", 1}}));
  s.write_world_model(1, Json::object());
  fs::path attempt = dir / "attempts" / fmt::format("0000-{}", a.solution.id);
  auto damage = [](const fs::path& p, const std::string& text) { util::write_file_atomic(p, text); };
  RunStore r = RunStore::open_read_only(dir);
  auto attempts = [&] { r.attempts(); };

  damage(attempt / "eval.json", R"({"status": "pass)");
  check_error(attempts, (attempt / "eval.json").string() + ": invalid JSON");
  damage(attempt / "eval.json", R"({"status": 5})");
  check_error(attempts, (attempt / "eval.json").string() + ": field \"status\"");
  damage(attempt / "eval.json", "{}");
  damage(attempt / "solution.json", "[");
  check_error(attempts, (attempt / "solution.json").string() + ": invalid JSON");
  damage(dir / "attempts.jsonl", R"({"seq": 0, "round": "one"})" "\n");
  check_error(attempts, (dir / "attempts.jsonl").string() + ": field \"round\"");
  damage(dir / "best.json", R"({"round": "x"})");
  check_error([&] { r.best(); }, (dir / "best.json").string() + ": field \"round\"");
  damage(dir / "state.json", "{");
  check_error([&] { r.state(); }, (dir / "state.json").string() + ": invalid JSON");
  damage(dir / "world_model" / "v000001.json", "");
  check_error([&] { r.latest_world_model(); }, "v000001.json: invalid JSON");
  damage(dir / "manifest.json", "{\"task\": ");
  check_error([&] { r.manifest(); }, (dir / "manifest.json").string() + ": invalid JSON");
}

// A run folder may come from someone else (attached to a bug report): links
// in it lead to the user's private files.
namespace {

struct Secret {
  fs::path dir, file;
  explicit Secret(const fs::path& root) : dir(root / "dot-ssh"), file(dir / "id_ed25519") {
    fs::create_directories(dir);
    util::write_file_atomic(file, "FAKE-PRIVATE-KEY");
  }
  bool intact() const {
    return fs::is_regular_file(file) && util::read_file(file) == "FAKE-PRIVATE-KEY" &&
           std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1;
  }
};

}  // namespace

TEST_CASE("run store: best/ linked to a private folder: open refuses, nothing there is deleted") {
  auto root = test::scratch_dir("rs_best_link");
  Secret secret(root);
  const fs::path dir = root / "run";
  {
    RunStore s = RunStore::create(dir, Json::object());
    AttemptRecord a;
    a.round = 1;
    a.solution = sol("int a;");
    s.record_attempt(a);
    s.write_best(BestSolution{a.solution, EvalResult{}, 1});
  }
  fs::remove_all(dir / "best");
  fs::create_directory_symlink(secret.dir, dir / "best");
  check_error([&] { RunStore::open(dir); }, (dir / "best").string() + " is a symbolic link");
  CHECK(secret.intact());
}

TEST_CASE("run store: a linked log, world_model/ or attempts/ is refused, never written through") {
  auto root = test::scratch_dir("rs_log_links");
  Secret secret(root);
  for (const char* name : {"events.jsonl", "transcript.jsonl", "attempts.jsonl", "manifest.json", "world_model",
                           "attempts", "state.json", "lock"}) {
    const fs::path dir = root / (std::string("run-") + name);
    RunStore::create(dir, Json::object());
    fs::remove_all(dir / name);
    if (std::string(name).find('.') == std::string::npos && std::string(name) != "lock")
      fs::create_directory_symlink(secret.dir, dir / name);
    else
      fs::create_symlink(secret.file, dir / name);
    check_error([&] { RunStore::open(dir); }, (dir / name).string() + " is a symbolic link");
    CHECK_MESSAGE(secret.intact(), name);
  }
}

TEST_CASE("run store: a linked source file of an attempt is refused and its target not read") {
  auto root = test::scratch_dir("rs_source_link");
  Secret secret(root);
  const fs::path dir = root / "run";
  AttemptRecord a;
  a.round = 1;
  a.solution = sol("int a;");
  {
    RunStore s = RunStore::create(dir, Json::object());
    s.record_attempt(a);
    s.write_best(BestSolution{a.solution, EvalResult{}, 1});
  }
  const fs::path kernel = dir / "attempts" / fmt::format("0000-{}", a.solution.id) / "kernel.cpp";
  fs::remove(kernel);
  fs::create_symlink(secret.file, kernel);
  RunStore r = RunStore::open_read_only(dir);
  std::string what;
  try {
    r.attempts();
  } catch (const Error& e) {
    what = e.what();
  }
  CHECK(what.find(kernel.string() + " is a symbolic link") != std::string::npos);
  CHECK(what.find("FAKE-PRIVATE-KEY") == std::string::npos);
  check_error([&] { r.best(); }, kernel.string() + " is a symbolic link");
  // An attempt folder that is itself a link is refused the same way.
  fs::remove_all(kernel.parent_path());
  fs::create_directory_symlink(secret.dir, kernel.parent_path());
  check_error([&] { r.attempts(); }, kernel.parent_path().string() + " is a symbolic link");
  CHECK(secret.intact());
}
