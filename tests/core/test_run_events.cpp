#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <variant>

#include "core/run_events.hpp"
#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
namespace ev = ks::core::events;

namespace {

ev::Divergence divergence() {
  ev::Divergence d;
  d.source = "/runs/a";
  d.what = "kind";
  d.after_round = 4;
  d.asked = "improve";
  d.recorded = "wm_refine";
  d.on_divergence = "stop";
  d.evaluations = "recorded";
  d.llm_call = 5;
  d.recording_answer = 6;
  d.detail = "line 3";
  d.decision = Json::obj({{"index", 3}, {"now", Json::obj({{"why", "a"}})}, {"recorded", Json()}});
  d.message = "After round 4 ...";
  d.skipped = Json::arr({Json::obj({{"answer", 7}, {"kind", "improve"}})});
  d.stopped = false;
  return d;
}

// One event of every type, with something in every field.
std::vector<ev::Payload> samples() {
  LlmUsage u;
  u.input_tokens = 10;
  u.output_tokens = 20;
  u.wall_s = 1.5;
  u.cost_usd = 0.25;
  u.attempts = 1;
  ev::RecordingEnd end{"/runs/a", 12, "the search asked for more", 30, 12};
  ev::Divergence plain = divergence();
  plain.llm_call.reset();
  plain.recording_answer.reset();
  plain.detail.reset();
  plain.decision = Json();
  plain.skipped = Json();
  plain.stopped.reset();
  plain.what = "evaluation";
  plain.attempt = 3;
  return {ev::RunStarted{"world_model", 3, 2},
          ev::RunFinished{"max_rounds", Json::obj({{"rounds", 12}, {"llm_usage", u.to_json()}})},
          ev::CancelRequested{"llm policy", 4, std::nullopt},
          ev::CancelRequested{std::nullopt, std::nullopt, 7},
          ev::JournalPromptMismatch{2, "a note"},
          ev::LlmCall{0, "generate", true, u, std::nullopt},
          ev::LlmCall{1, "improve", false, u, "the server said no"},
          ev::RoundStarted{1, "wm_propose", "abc"},
          ev::Evaluated{1, true, "wm_propose", "abc", "", "passed", 0.5, 2.0,
                        {{"w0", "passed", 0.5}, {"w1", "incorrect", std::nullopt}}, std::nullopt},
          ev::Evaluated{0, false, "debug", "def", "abc", "compile_error", 0.0, 0.0, {}, "does not compile"},
          ev::BestImproved{1, "abc", 0.5, 2.0},
          ev::WorldModelSnapshot{3},
          ev::Decision{Json::obj({{"decision", "stagnation"}, {"why", "no gain in 3 attempts"}, {"window", 3}})},
          ev::CycleStarted{1, "n1", "tile it", 3, 0.75, ""},
          ev::CycleFinished{1, "n1", 4, true, "abc"},
          ev::SearchExhausted{"no executable open action in the world model"},
          ev::WorldModelEdited{{"wm_propose", 1, 3, 2, {}, Json::obj({{"ops", Json::arr({"add"})}})}},
          ev::WorldModelEditRejected{{"wm_refine", 2, 0, 0, {"node x has no parent"}, Json::object()}},
          ev::WorldModelEditFailed{"wm_init", 1, {"timed out"}},
          ev::WorldModelFallback{"wm_too_hard"},
          ev::TuneSkipped{"abc", "no rounds left to tune in"},
          ev::TuneStart{"abc", "tiled", "gp", {{"BLOCK", 4}, {"UNROLL", 3}}, 1, Json(12), Json(), 5,
                        -1234567890123, 4, std::nullopt, 2.5},
          ev::TuneStart{"abc", "tiled", "grid", {}, 0, Json(1e20), Json(7), 0, 7, 4, "BLOCK=64", std::nullopt},
          ev::TuneRound{"BLOCK=64", "def", "seed", 8, "passed", 1.25, true, std::nullopt},
          ev::TuneRound{"BLOCK=128", "ghi", "model", 300, "incorrect", std::nullopt, false,
                        ev::TuneRound::Model{0.1, 0.9, std::nullopt, 0.2, Json::obj({{"points", 5}})}},
          ev::TuneStop{"stalled", 9, 1, "BLOCK=64", 1.25, 2.5},
          ev::TuneStop{"run stopped: max_rounds", 0, 0, std::nullopt, std::nullopt, std::nullopt},
          ev::TuneVariants{"BLOCK=64", Json::obj({{"big", "BLOCK=128"}}), std::nullopt, "no round left"},
          ev::TuneVariants{"BLOCK=64", Json::obj({{"big", "BLOCK=128"}}),
                           ev::TuneVariants::Evaluation{"jkl", "passed", 1.0, std::nullopt}, ""},
          ev::FinalEvaluationStarted{"abc", 9},
          ev::FinalEvaluation{"abc", "passed", 0.5, 2.0, 1.25, "passed"},
          ev::ReplayStarted{"/runs/a", 30, "recorded", 12, "stop", true, "answers and evaluations ..."},
          ev::ReplayDiverged{plain},
          ev::ReplaySkipped{divergence()},
          ev::ReplayWentLive{divergence()},
          ev::ReplayWentLive{end},
          ev::ReplayRecordingEnded{end},
          ev::ReplayPromptChanged{5, 6, "line 3", "a note"},
          ev::StrategyEvent{"tune_round", Json::obj({{"round", 2}, {"best", "x"}})},
          // Tune batches (the fields runs made before them lack).
          ev::TuneStart{"abc", "tiled", "gp-ei", {{"BLOCK", 4}}, 0, Json(4), Json(4), 2, 7, 16, "BLOCK=64", 1.5, 4},
          ev::TuneRound{"BLOCK=32", "mno", "model", 12, "passed", 0.75, false,
                        ev::TuneRound::Model{0.01, 1.0, 0.8, 0.1, Json()}, ev::TuneRound::Batch{3, 4, 2}},
          ev::TuneRound{"BLOCK=16", "pqr", "seed", 4, "compile_error", std::nullopt, false, std::nullopt,
                        ev::TuneRound::Batch{1, 1, 0}}};
}

}  // namespace

TEST_CASE("run events: every type survives its codec, byte for byte") {
  std::set<std::size_t> kinds;
  std::int64_t seq = 0;
  for (const auto& p : samples()) {
    kinds.insert(p.index());
    ev::RunEvent e{seq++, "2026-11-26T12:00:00Z", p, seq % 2 ? std::optional<std::int64_t>(seq) : std::nullopt};
    const std::string line = e.to_json().dump();
    CAPTURE(line);
    const ev::RunEvent back = ev::RunEvent::from_json(Json::parse(line));
    CHECK(back.payload.index() == p.index());
    CHECK(back.type() == e.type());
    CHECK(back.seq == e.seq);
    CHECK(back.journal_seq == e.journal_seq);
    CHECK(back.to_json().dump() == line);
  }
  CHECK(kinds.size() == std::variant_size_v<ev::Payload>);

  // The fields come back as values.
  auto e = ev::RunEvent::from_json(ev::RunEvent{0, "t", samples()[8], 4}.to_json());
  REQUIRE(std::holds_alternative<ev::Evaluated>(e.payload));
  const auto& x = std::get<ev::Evaluated>(e.payload);
  CHECK(x.workloads.at(0).mean_ms == 0.5);
  CHECK_FALSE(x.workloads.at(1).mean_ms.has_value());
  CHECK(std::get<ev::Decision>(ev::payload_from("decision", ev::fields_of(samples()[12]))).why() ==
        "no gain in 3 attempts");
  auto live = std::get<ev::ReplayWentLive>(ev::payload_from("replay_went_live", ev::fields_of(samples()[35])));
  CHECK(std::holds_alternative<ev::RecordingEnd>(live.why));
}

TEST_CASE("run events: the store writes the catalogue's line") {
  auto dir = ks::test::scratch_dir("run_events_store");
  RunStore store = RunStore::create(dir / "run", Json::obj({{"task", "t"}}));
  const ev::Payload p = ev::FinalEvaluationStarted{"abc", 9};
  int seq = store.append_event(ev::type_of(p), ev::fields_of(p));
  const auto lines = store.events();
  REQUIRE(lines.size() == 1);
  const ev::RunEvent e = ev::RunEvent::from_json(lines[0]);
  CHECK(e.seq == seq);
  CHECK(std::holds_alternative<ev::FinalEvaluationStarted>(e.payload));
  CHECK(e.to_json().dump() == lines[0].dump());
  CHECK(e.to_json().dump() == ev::RunEvent{e.seq, e.time, p, std::nullopt}.to_json().dump());
}

TEST_CASE("run events: lines another version wrote, or garbage, are kept or named, never a crash") {
  // A known type whose fields do not fit is kept as it is (and re-encodes so).
  for (const char* text :
       {R"({"seq":1,"time":"t","type":"evaluated","round":"one"})",
        R"({"seq":2,"time":"t","type":"run_started","strategy":"greedy","journal_llm_calls":0,"journal_attempts":0,"extra":1})",
        R"({"seq":3,"time":"t","type":"llm_call","llm_seq":0,"kind":"generate","ok":true,"usage":[]})",
        R"({"seq":4,"time":"t","type":"best_improved","round":1,"solution_id":"a","latency_ms":1,"speedup":2.0})",
        R"({"seq":5,"time":"t","type":"some_custom_thing","data":[1,2]})"}) {
    CAPTURE(text);
    const ev::RunEvent e = ev::RunEvent::from_json(Json::parse(text));
    CHECK(std::holds_alternative<ev::StrategyEvent>(e.payload));
    CHECK(e.to_json().dump() == text);
  }
  for (const char* text : {R"({"time":"t","type":"run_started"})", R"({"seq":1,"type":"run_started"})",
                           R"({"seq":1,"time":"t"})", R"({"seq":"1","time":"t","type":"x"})", R"([1,2])"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(ev::RunEvent::from_json(Json::parse(text)), ks::Error);
  }
}

TEST_CASE("run events: a recorded events.jsonl parses into the typed events and re-encodes identically") {
  // Written by libksearch before the catalogue existed (tests/fixtures/run_events/README.md):
  // world-model runs replayed with a divergence, a skip, going live and the
  // recording's end, and a final evaluation.
  const auto file = ks::test::source_dir() / "tests/fixtures/run_events/events.jsonl";
  const auto lines = util::read_lines(file);
  REQUIRE(lines.size() > 20);
  std::map<std::string, int> typed;
  std::set<std::string> strategy_own;
  for (const auto& line : lines) {
    CAPTURE(line);
    const ev::RunEvent e = ev::RunEvent::from_json(Json::parse(line));
    CHECK(e.to_json().dump() == line);
    if (const auto* s = std::get_if<ev::StrategyEvent>(&e.payload)) strategy_own.insert(s->type);
    else ++typed[e.type()];
  }
  // Every line came back as its type's struct (the file holds no tune_* events).
  CHECK_MESSAGE(strategy_own.empty(), "kept untyped: " << strategy_own.size() << " type(s), the first "
                                                        << (strategy_own.empty() ? "" : *strategy_own.begin()));
  for (const char* t : {"run_started", "run_finished", "llm_call", "round_started", "evaluated", "best_improved",
                        "world_model_snapshot", "decision", "cycle_started", "cycle_finished", "world_model_edited",
                        "world_model_edit_rejected", "replay_started",
                        "replay_diverged", "replay_went_live", "replay_skipped", "replay_recording_ended",
                        "final_evaluation_started",
                        "final_evaluation"}) {
    CAPTURE(t);
    CHECK(typed[t] > 0);
  }
}
