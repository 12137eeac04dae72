// The test server itself: its defaults, and the standalone program that
// end-to-end tests and benchmarks start.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "ksearch/llm_policies.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "support/openai_server.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

using namespace ks;
using ks::test::Behaviour;
using ks::test::OpenAiTestServer;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

OpenAiConfig config_for(const std::string& base_url) {
  OpenAiConfig c;
  c.base_url = base_url;
  c.model = "test-model";
  c.api_key = "sk-server-test-key-0000";
  c.backoff_base_s = 0.01;
  c.backoff_cap_s = 0.02;
  c.request_timeout_s = 10;
  return c;
}

}  // namespace

TEST_CASE("test server: an unscripted request fails loudly and is not retried") {
  OpenAiTestServer server;
  auto p = make_openai_policy(config_for(server.base_url()));
  LlmResponse r = p->complete({PromptKind::generate, "", "p"});
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "no scripted behaviour left"));
  CHECK(server.request_count() == 1);
  CHECK(server.pending() == 0);
}

TEST_CASE("test server: the standalone program serves a script and logs what it received") {
  auto dir = ks::test::scratch_dir("llm_server_program");
  util::write_file_atomic(dir / "script.json", R"({
    "behaviours": [{"kind": "rate_limited", "retry_after": 0},
                   {"text": "scripted", "repeat": 2, "usage": {"input": 7, "output": 3}}],
    "default": {"text": "default answer"}
  })");
  util::SpawnOptions opts;
  opts.argv = {KS_OPENAI_TEST_SERVER, "--script", (dir / "script.json").string(), "--log",
               (dir / "requests.jsonl").string()};
  util::Subprocess server(opts);  // the destructor ends it
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (out.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline)
    util::read_some(server.stdout_fd(), out, 0, std::chrono::milliseconds(100));
  REQUIRE(out.rfind("listening on http://127.0.0.1:", 0) == 0);
  std::string url = out.substr(13, out.find('\n') - 13);

  auto p = make_openai_policy(config_for(url));
  LlmResponse first = p->complete({PromptKind::generate, "", "one"});
  CHECK(first.ok);
  CHECK(first.text == "scripted");
  CHECK(first.usage.attempts == 2);
  CHECK(first.usage.input_tokens == 7);
  CHECK(p->complete({PromptKind::generate, "", "two"}).text == "scripted");
  CHECK(p->complete({PromptKind::generate, "", "three"}).text == "default answer");

  auto lines = util::read_lines(dir / "requests.jsonl");
  REQUIRE(lines.size() == 4);
  Json last = Json::parse(lines.back());
  CHECK(last.get_string("path") == "/v1/chat/completions");
  CHECK(last.at("headers").get_string("authorization") == "Bearer sk-server-test-key-0000");
  CHECK(contains(last.get_string("body"), "three"));
}

TEST_CASE("test server: held answers wait for the test's file and for requests in flight, not for a time") {
  auto dir = ks::test::scratch_dir("llm_server_hold");
  std::filesystem::remove(dir / "go");
  OpenAiTestServer server;
  auto p = make_openai_policy(config_for(server.base_url()));
  auto arrived = [&](std::size_t n) {  // safety net only: a correct server needs no time
    for (int i = 0; i < 6000 && server.request_count() < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return server.request_count() >= n;
  };

  SUBCASE("wait_file") {
    Behaviour b = Behaviour::answer("held");
    b.wait_file = (dir / "go").string();
    server.push(b);
    auto answer = std::async(std::launch::async, [&] { return p->complete({PromptKind::generate, "", "p"}); });
    REQUIRE(arrived(1));
    // Held for as long as the file is missing (a broken hold answers now).
    CHECK(answer.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    util::write_file_atomic(dir / "go", "");
    REQUIRE(answer.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
    LlmResponse r = answer.get();
    CHECK(r.ok);
    CHECK(r.text == "held");
    CHECK(r.usage.attempts == 1);
  }
  SUBCASE("wait_in_flight") {
    Behaviour b = Behaviour::answer("together");
    b.wait_in_flight = 3;
    server.push({b, b, b});
    OpenAiConfig c = config_for(server.base_url());
    c.max_concurrency = 3;
    auto out = make_openai_policy(c)->complete_batch({{PromptKind::generate, "", "a"},
                                                      {PromptKind::generate, "", "b"},
                                                      {PromptKind::generate, "", "c"}});
    for (const auto& r : out) {
      CHECK(r.ok);
      CHECK(r.usage.attempts == 1);
    }
    CHECK(server.max_in_flight() == 3);
  }
  SUBCASE("stop lets a held request go") {
    Behaviour b = Behaviour::answer("never");
    b.wait_file = (dir / "never").string();
    server.push(b);
    OpenAiConfig c = config_for(server.base_url());
    c.max_retries = 0;
    auto answer = std::async(std::launch::async, [&] { return make_openai_policy(c)->complete({PromptKind::generate, "", "p"}); });
    REQUIRE(arrived(1));
    server.stop();  // returns: the held worker thread ends
    REQUIRE(answer.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
    CHECK_FALSE(answer.get().ok);
  }
}
