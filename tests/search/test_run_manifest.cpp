// manifest.json's one codec (lib/engine/run_manifest.hpp): what a run folder
// written by an earlier version holds reads and writes back unchanged, a
// later version's extra members are kept, and a manifest that cannot be
// resumed or replayed says why.
#include <doctest/doctest.h>

#include "engine/run_manifest.hpp"
#include "ksearch/error.hpp"
#include "ksearch/strategy.hpp"

using namespace ks;

namespace {

// As run_search wrote it, in its order, before weak checks, workloads and
// baselines were recorded; resumed once and finished.
const char* kOldManifest = R"({"format":"ksearch-run","format_version":1,"library_version":"0.1.0",
 "created":"2026-11-20T01:02:03.000Z","host":"box",
 "task":{"name":"examples/matmul","reference":"/x/examples/matmul","custom":false,"kernelbench_dir":"",
         "fingerprint":"abc","sources":{"dataset":""}},
 "config":{"strategy":"world_model","max_rounds":3},
 "llm":{"kind":"replay","replay_path":"/x/t.jsonl","on_divergence":"skip"},
 "evaluator":{"backend":"host","devices":[],"in_process":false,"cache_dir":"","compile_workers":0,
              "cuda_arch":"","sandbox":"off","memory_limit_bytes":0,"options":{}},
 "device":{"backend":"host","name":"cpu"},
 "status":"finished","resumed":1,"last_resumed":"2026-11-20T02:00:00.000Z",
 "stop_reason":"max_rounds","finished":"2026-11-20T03:00:00.000Z","totals":{"rounds":3}})";

}  // namespace

TEST_CASE("a manifest of an earlier version reads back to the same members and values") {
  const Json j = Json::parse(kOldManifest);
  const auto m = engine::RunManifest::from_json(j);
  CHECK(m.task.reference == "/x/examples/matmul");
  CHECK(m.evaluator.backend == EvalBackend::host);
  CHECK(m.evaluator.sandbox == SandboxMode::off);
  CHECK(m.evaluator.options.timing == TimingMode::standard);
  CHECK(m.resumed == 1);
  CHECK(m.stop_reason == "max_rounds");
  CHECK(m.weak_check.is_null());
  CHECK_FALSE(m.replay.has_value());
  const Json back = m.to_json();
  // Members the old run did not write are not added.
  CHECK_FALSE(back.contains("weak_check"));
  CHECK_FALSE(back.contains("workloads"));
  CHECK_FALSE(back.contains("baseline"));
  CHECK_FALSE(back.contains("error"));
  for (const auto& [key, value] : j.as_object()) {
    INFO(key);
    if (key == "evaluator") {
      // Written whole by this version's codec; the recorded settings stay.
      CHECK(back[key].get_string("backend") == "host");
      CHECK(back[key].get_string("sandbox") == "off");
      continue;
    }
    CHECK(back[key] == value);
  }
}

TEST_CASE("a later version's members and a replay record survive a rewrite") {
  Json j = Json::parse(kOldManifest);
  j["from_the_future"] = Json::obj({{"x", 1}});
  j["replay"] = Json::obj({{"source", "/runs/a"}, {"source_created", "t"}, {"source_config", Json::object()},
                           {"config_changes", Json::obj({{"max_rounds", 2}})}, {"on_divergence", "live"},
                           {"check_prompts", false}});
  auto m = engine::RunManifest::from_json(j);
  REQUIRE(m.replay.has_value());
  CHECK(m.replay->on_divergence == ReplayDivergence::live);
  CHECK_FALSE(m.replay->check_prompts);
  m.status = "running";
  const Json back = m.to_json();
  CHECK(back["from_the_future"] == j["from_the_future"]);
  CHECK(back["replay"] == j["replay"]);
  CHECK(back.get_string("status") == "running");
}

TEST_CASE("a manifest that cannot be resumed or replayed says why") {
  Json j = Json::parse(kOldManifest);
  CHECK_NOTHROW(engine::RunManifest::from_json(j).check_replayable("/runs/r", "resumes"));
  Json other = j;
  other["format"] = "something-else";
  CHECK_THROWS_WITH_AS(engine::RunManifest::from_json(other).check_replayable("/runs/r", "resumes"),
                       doctest::Contains("is not a ksearch run"), Error);
  Json later = j;
  later["format_version"] = 2;
  CHECK_THROWS_WITH_AS(engine::RunManifest::from_json(later).check_replayable("/runs/r", "replays"),
                       doctest::Contains("format_version 2; this libksearch replays format 1"), Error);
  Json custom = j;
  custom["task"]["custom"] = true;
  CHECK_THROWS_WITH_AS(engine::RunManifest::from_json(custom).check_replayable("/runs/r", "resumes"),
                       doctest::Contains("resume it through the same program's API"), Error);
}

TEST_CASE("the evaluator's backend, sandbox and timing keep their names, and a bad one is named") {
  Json j = Json::parse(kOldManifest);
  j["evaluator"]["backend"] = "cuda";
  j["evaluator"]["sandbox"] = "on";
  j["evaluator"]["options"]["timing"] = "upstream";
  auto m = engine::RunManifest::from_json(j);
  CHECK(m.evaluator.backend == EvalBackend::cuda);
  CHECK(m.evaluator.sandbox == SandboxMode::required);
  CHECK(m.evaluator.options.timing == TimingMode::upstream);
  const Json back = m.to_json()["evaluator"];
  CHECK(back.get_string("backend") == "cuda");
  CHECK(back.get_string("sandbox") == "on");
  CHECK(back["options"].get_string("timing") == "upstream");
  // Absent (a manifest written before they were recorded): the defaults.
  Json bare = Json::parse(kOldManifest);
  bare["evaluator"] = Json::obj({{"options", Json::object()}});
  m = engine::RunManifest::from_json(bare);
  CHECK(m.evaluator.backend == EvalBackend::automatic);
  CHECK(m.evaluator.sandbox == SandboxMode::automatic);
  CHECK(m.evaluator.options.timing == TimingMode::standard);
  Json bad = Json::parse(kOldManifest);
  bad["evaluator"]["backend"] = "gpu";
  CHECK_THROWS_WITH_AS(engine::RunManifest::from_json(bad),
                       doctest::Contains("unknown evaluator backend \"gpu\" (known: auto, cuda, host)"), Error);
  bad = Json::parse(kOldManifest);
  bad["evaluator"]["sandbox"] = "yes";
  CHECK_THROWS_WITH_AS(engine::RunManifest::from_json(bad),
                       doctest::Contains("unknown sandbox \"yes\" (known: auto, on, off)"), Error);
  bad = Json::parse(kOldManifest);
  bad["evaluator"]["options"]["timing"] = "gpumode";
  CHECK_THROWS_WITH_AS(engine::RunManifest::from_json(bad),
                       doctest::Contains("unknown timing \"gpumode\" (known: default, upstream)"), Error);
}

TEST_CASE("SearchConfig's nested knobs keep the manifest's flat names, both ways") {
  // A manifest's "config" as every version so far wrote it.
  const Json flat = Json::parse(R"({"strategy":"evolve","max_rounds":9,"wm_stagnation_window":3,
    "wm_max_difficulty":2,"wm_edit_retries":4,"wm_lenient_edits":true,"wm_max_chars":1234,
    "tune_rounds":6,"tune_batch":2,"evolve_islands":5,"evolve_island_size":7,"evolve_migration_interval":3,
    "evolve_migration_size":2,"evolve_archive_size":11,"evolve_inspirations":1,"evolve_exploit_ratio":0.25})");
  const SearchConfig c = SearchConfig::from_json(flat);
  CHECK(c.strategy == StrategyKind::evolve);
  CHECK(c.world_model.stagnation_window == 3);
  CHECK(c.world_model.max_difficulty == 2);
  CHECK(c.world_model.edit_retries == 4);
  CHECK(c.world_model.lenient_edits);
  CHECK(c.world_model.max_chars == 1234);
  CHECK(c.tune.rounds == 6);
  CHECK(c.tune.batch == 2);
  CHECK(c.evolve.islands == 5);
  CHECK(c.evolve.island_size == 7);
  CHECK(c.evolve.migration_interval == 3);
  CHECK(c.evolve.migration_size == 2);
  CHECK(c.evolve.archive_size == 11);
  CHECK(c.evolve.inspirations == 1);
  CHECK(c.evolve.exploit_ratio == 0.25);
  const Json back = c.to_json();
  for (const auto& [key, value] : flat.as_object()) {
    INFO(key);
    CHECK(back[key] == value);
  }
  // No nested member is written: a reader of an older version finds the flat names only.
  CHECK_FALSE(back.contains("world_model"));
  CHECK_FALSE(back.contains("tune"));
  CHECK_FALSE(back.contains("evolve"));
}
