// Transcripts and the replay policy.
#include <doctest/doctest.h>

#include <fstream>

#include "ksearch/error.hpp"
#include "ksearch/llm_policies.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TranscriptEntry entry(std::int64_t seq, PromptKind kind, std::string text, bool ok = true) {
  TranscriptEntry e;
  e.seq = seq;
  e.policy = "openai:test-model";
  e.request = {kind, "system text", "prompt " + std::to_string(seq)};
  e.response.ok = ok;
  e.response.text = std::move(text);
  if (!ok) e.response.error = "openai:test-model: HTTP 500 Internal Server Error: boom";
  e.response.finish_reason = "stop";
  e.response.model = "test-model";
  e.response.usage.input_tokens = 10 * seq;
  e.response.usage.output_tokens = 5;
  e.response.usage.cost_usd = 0.01;
  e.response.usage.attempts = 1;
  e.time = utc_timestamp();
  return e;
}

std::filesystem::path write_transcript(const std::string& name, const std::vector<TranscriptEntry>& entries) {
  auto path = ks::test::scratch_dir(name) / "transcript.jsonl";
  util::AppendLog log(path);
  for (const auto& e : entries) log.append(e.to_json().dump());
  return path;
}

std::string error_of(LlmPolicy& p, PromptKind kind) {
  try {
    p.complete({kind, "", "p"});
  } catch (const Error& e) {
    CHECK(e.status() == Status::llm);
    return e.what();
  }
  FAIL("expected ks::Error(llm)");
  return {};
}

}  // namespace

TEST_CASE("transcript: entries write and read back in the documented format") {
  TranscriptEntry e = entry(3, PromptKind::wm_refine, "an answer");
  Json j = e.to_json();
  CHECK(j.get_int("seq") == 3);
  CHECK(j.get_string("kind") == "wm_refine");
  CHECK(j.get_string("policy") == "openai:test-model");
  CHECK(j.at("request").get_string("system") == "system text");
  CHECK(j.at("request").get_string("prompt") == "prompt 3");
  CHECK(j.at("response").get_string("text") == "an answer");
  CHECK(j.at("response").at("usage").get_int("input_tokens") == 30);
  std::string t = j.get_string("time");
  CHECK(t.size() == 24);  // 2026-01-15T10:04:05.123Z
  CHECK(t[10] == 'T');
  CHECK(t.back() == 'Z');

  TranscriptEntry back = TranscriptEntry::from_json(j);
  CHECK(back.seq == 3);
  CHECK(back.request.kind == PromptKind::wm_refine);
  CHECK(back.request.prompt == "prompt 3");
  CHECK(back.response.text == "an answer");
  CHECK(back.response.usage.cost_usd == doctest::Approx(0.01));
  CHECK(back.to_json() == j);
}

TEST_CASE("transcript: an answer that is not valid UTF-8 reads back byte for byte") {
  // JSON holds only UTF-8: "text" shows such an answer with U+FFFD, and
  // "text_base64" keeps its bytes, so a resume parses the code the run evaluated.
  const std::string answer = "```cpp kernel.cpp\n// caf\xE9 \xFF\xFE\nint a;\n```\n";
  TranscriptEntry e = entry(0, PromptKind::generate, answer);
  const std::string line = e.to_json().dump();
  Json j = Json::parse(line);
  CHECK(j.at("response").get_string("text") == "```cpp kernel.cpp\n// caf\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\nint a;\n```\n");
  CHECK(TranscriptEntry::from_json(j).response.text == answer);
  // Valid text carries no second copy.
  CHECK_FALSE(entry(0, PromptKind::generate, "caf\xC3\xA9").to_json().at("response").contains("text_base64"));
  j["response"]["text_base64"] = "not base64!";
  CHECK_THROWS_WITH(TranscriptEntry::from_json(j), doctest::Contains("text_base64"));
}

TEST_CASE("transcript: hand-written files, torn last lines and bad lines") {
  auto dir = ks::test::scratch_dir("llm_transcript_read");
  SUBCASE("only kind and text (or response) are needed; blank lines are skipped") {
    util::write_file_atomic(dir / "t.jsonl",
                              "{\"kind\": \"generate\", \"text\": \"first\"}\n\n"
                              "{\"kind\": \"debug\", \"response\": {\"text\": \"second\"}}\n"
                              "{\"kind\": \"improve\", \"text\": \"no final newline\"}");
    auto entries = read_transcript(dir / "t.jsonl");
    REQUIRE(entries.size() == 3);
    CHECK(entries[0].response.ok);
    CHECK(entries[0].response.text == "first");
    CHECK(entries[1].request.kind == PromptKind::debug);
    CHECK(entries[1].response.ok);
    CHECK(entries[2].response.text == "no final newline");
  }
  SUBCASE("a last line cut off by a kill is dropped") {
    util::write_file_atomic(dir / "t.jsonl", "{\"kind\": \"generate\", \"text\": \"a\"}\n{\"kind\": \"gen");
    CHECK(read_transcript(dir / "t.jsonl").size() == 1);
  }
  SUBCASE("a broken line in the middle names the file and line") {
    util::write_file_atomic(dir / "t.jsonl",
                              "{\"kind\": \"generate\", \"text\": \"a\"}\n{oops}\n{\"kind\": \"generate\", \"text\": \"b\"}\n");
    try {
      read_transcript(dir / "t.jsonl");
      FAIL("should throw");
    } catch (const Error& e) {
      CHECK(e.status() == Status::parse);
      CHECK(contains(e.what(), "line 2"));
      CHECK(contains(e.what(), "t.jsonl"));
    }
  }
  SUBCASE("missing fields and unknown kinds") {
    util::write_file_atomic(dir / "a.jsonl", "{\"text\": \"no kind\"}\n");
    CHECK_THROWS_WITH_AS(read_transcript(dir / "a.jsonl"), doctest::Contains("needs \"kind\""), Error);
    util::write_file_atomic(dir / "b.jsonl", "{\"kind\": \"generate\"}\n");
    CHECK_THROWS_WITH_AS(read_transcript(dir / "b.jsonl"), doctest::Contains("needs \"response\""), Error);
    util::write_file_atomic(dir / "c.jsonl", "{\"kind\": \"write\", \"text\": \"x\"}\n");
    CHECK_THROWS_WITH_AS(read_transcript(dir / "c.jsonl"), doctest::Contains("unknown kind \"write\""), Error);
    util::write_file_atomic(dir / "d.jsonl", "{\"kind\": \"generate\", \"text\": 5}\n");
    CHECK_THROWS_WITH_AS(read_transcript(dir / "d.jsonl"), doctest::Contains("\"text\" must be a string"), Error);
  }
  SUBCASE("a missing file") {
    try {
      read_transcript(dir / "absent.jsonl");
      FAIL("should throw");
    } catch (const Error& e) {
      CHECK(e.status() == Status::not_found);
    }
  }
}

TEST_CASE("replay: answers in order, failures included, with the recorded usage") {
  auto path = write_transcript("llm_replay_order", {entry(1, PromptKind::wm_init, "tree"),
                                                    entry(2, PromptKind::generate, "", false),
                                                    entry(3, PromptKind::generate, "kernel")});
  auto p = make_replay_policy(path);
  CHECK(p->describe() == "replay:" + path.string());
  LlmResponse a = p->complete({PromptKind::wm_init, "", "anything"});
  CHECK(a.ok);
  CHECK(a.text == "tree");
  LlmResponse b = p->complete({PromptKind::generate, "", "anything"});
  CHECK_FALSE(b.ok);
  CHECK(contains(b.error, "HTTP 500"));
  auto rest = p->complete_batch({{PromptKind::generate, "", "x"}});
  CHECK(rest[0].text == "kernel");
  CHECK(p->total_usage().input_tokens == 60);
  CHECK(p->total_usage().cost_usd == doctest::Approx(0.03));
  CHECK_FALSE(p->exhausted());
}

TEST_CASE("replay: a run that diverges or outlives the transcript fails clearly") {
  auto path = write_transcript("llm_replay_fail", {entry(1, PromptKind::wm_init, "tree"),
                                                   entry(2, PromptKind::generate, "kernel")});
  SUBCASE("kind mismatch") {
    auto p = make_replay_policy(path);
    std::string msg = error_of(*p, PromptKind::generate);
    CHECK(contains(msg, "answer 1 was recorded for kind wm_init, but kind generate was asked for"));
  }
  SUBCASE("ran out") {
    auto p = make_replay_policy(path);
    p->complete({PromptKind::wm_init, "", ""});
    p->complete({PromptKind::generate, "", ""});
    std::string msg = error_of(*p, PromptKind::improve);
    CHECK(contains(msg, "has 2 answers; answer 3 (kind improve) was asked for"));
    CHECK(contains(msg, path.string()));
  }
  SUBCASE("starting at an offset, for resume") {
    auto p = make_replay_policy(path, 1);
    CHECK(p->complete({PromptKind::generate, "", ""}).text == "kernel");
    CHECK_THROWS_AS(make_replay_policy(path, 3), Error);
    CHECK(make_replay_policy(path, 2) != nullptr);  // at the end: every later call runs out
  }
}
