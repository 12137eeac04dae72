// The command policy: an external program answers on stdout.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "ksearch/error.hpp"
#include "ksearch/llm_policies.hpp"
#include "ksearch/sys/llm_policy.hpp"

using namespace ks;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("command: the prompt goes in on stdin, kind and system in the environment") {
  auto p = make_command_policy(
      {"sh", "-c", "printf '%s|%s|' \"$KSEARCH_PROMPT_KIND\" \"$KSEARCH_SYSTEM_PROMPT\"; cat"}, 10);
  CHECK(p->describe() == "command:sh");
  LlmResponse r = p->complete({PromptKind::debug, "be brief", "fix the kernel"});
  CHECK(r.ok);
  CHECK(r.text == "debug|be brief|fix the kernel");
  CHECK(r.finish_reason == "stop");
  CHECK(r.usage.attempts == 1);
  CHECK(r.usage.wall_s > 0);
  CHECK(p->total_usage().attempts == 1);
}

TEST_CASE("command: json input carries kind, system and prompt") {
  CommandConfig c;
  c.argv = {"cat"};
  c.timeout_s = 10;
  c.input = CommandConfig::Input::json;
  auto p = make_command_policy(c);
  LlmResponse r = p->complete({PromptKind::wm_propose, "sys \"quoted\"", "line1\nline2"});
  REQUIRE(r.ok);
  Json j = Json::parse(r.text);
  CHECK(j.get_string("kind") == "wm_propose");
  CHECK(j.get_string("system") == "sys \"quoted\"");
  CHECK(j.get_string("prompt") == "line1\nline2");
}

TEST_CASE("command: failures are failed generations with the stderr excerpt") {
  SUBCASE("nonzero exit") {
    auto p = make_command_policy({"sh", "-c", "echo 'model overloaded, try later' >&2; exit 3"}, 10);
    LlmResponse r = p->complete({PromptKind::generate, "", "p"});
    CHECK_FALSE(r.ok);
    CHECK(contains(r.error, "exit code 3"));
    CHECK(contains(r.error, "model overloaded, try later"));
  }
  SUBCASE("timeout") {
    auto p = make_command_policy({"sh", "-c", "sleep 30"}, 0.3);
    LlmResponse r = p->complete({PromptKind::generate, "", "p"});
    CHECK_FALSE(r.ok);
    CHECK(contains(r.error, "timed out"));
    CHECK(r.usage.wall_s < 20);  // killed, not waited for
  }
  SUBCASE("empty answer") {
    auto p = make_command_policy({"sh", "-c", "cat > /dev/null; echo 'no key configured' >&2"}, 10);
    LlmResponse r = p->complete({PromptKind::generate, "", "p"});
    CHECK_FALSE(r.ok);
    CHECK(contains(r.error, "printed no answer"));
    CHECK(contains(r.error, "no key configured"));
  }
  SUBCASE("the next call works after a failure") {
    auto p = make_command_policy({"sh", "-c", "read x; [ \"$x\" = fail ] && exit 1; echo \"got $x\""}, 10);
    CHECK_FALSE(p->complete({PromptKind::generate, "", "fail\n"}).ok);
    LlmResponse r = p->complete({PromptKind::generate, "", "ok\n"});
    CHECK(r.ok);
    CHECK(r.text == "got ok\n");
  }
}

TEST_CASE("command: configuration errors throw") {
  CHECK_THROWS_AS(make_command_policy(std::vector<std::string>{}, 10), Error);
  CHECK_THROWS_AS(make_command_policy({"cat"}, 0), Error);
  auto p = make_command_policy({"ksearch-no-such-llm-program"}, 10);
  try {
    p->complete({PromptKind::generate, "", "p"});
    FAIL("should throw");
  } catch (const Error& e) {
    CHECK(e.status() == Status::subprocess);
    CHECK(contains(e.what(), "ksearch-no-such-llm-program"));
  }
}

TEST_CASE("command: a batch runs max_concurrency programs at once, answers in request order") {
  // Each program checks in, then waits (up to 100 s) until three have: run one
  // at a time, the first would wait alone and answer "alone".
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("ksearch_cmd_batch_" + std::to_string(::getpid())))
                        .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  CommandConfig c;
  c.argv = {"sh", "-c",
            "touch \"$0/$$\"; i=0; while [ $(ls \"$0\" | wc -l) -lt 3 ] && [ $i -lt 1000 ]; do sleep 0.1; "
            "i=$((i+1)); done; if [ $i -lt 1000 ]; then printf 'together:'; else printf 'alone:'; fi; cat",
            dir};
  c.timeout_s = 200;
  c.max_concurrency = 3;
  auto p = make_command_policy(c);
  std::vector<LlmRequest> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back({PromptKind::generate, "", "prompt " + std::to_string(i)});
  auto out = p->complete_batch(reqs);
  REQUIRE(out.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(out[static_cast<std::size_t>(i)].text == "together:prompt " + std::to_string(i));
  CHECK(p->total_usage().attempts == 3);
  std::filesystem::remove_all(dir);

  c.max_concurrency = 0;
  CHECK_THROWS_AS(make_command_policy(c), Error);
}

TEST_CASE("command: a program that cannot start fails the whole batch with that error") {
  CommandConfig c;
  c.argv = {"ksearch-no-such-llm-program"};
  c.max_concurrency = 2;
  auto p = make_command_policy(c);
  try {
    p->complete_batch({{PromptKind::generate, "", "a"}, {PromptKind::generate, "", "b"}});
    FAIL("should throw");
  } catch (const Error& e) {
    CHECK(e.status() == Status::subprocess);
  }
}
