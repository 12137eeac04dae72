// The openai policy against the local test server: both API shapes, every
// failure with its retry behaviour and final status, concurrency,
// accounting, the cost budget, and the key kept out of everything.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ksearch/error.hpp"
#include "ksearch/llm_policies.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "llm/openai_wire.hpp"
#include "support/openai_server.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
using ks::test::Behaviour;
using ks::test::OpenAiTestServer;

namespace {

const std::string kKey = "sk-test-9f8e7d6c5b4a3210-SECRET";

// A configuration for the local server with fast retries and a known price.
OpenAiConfig local_config(const OpenAiTestServer& server) {
  OpenAiConfig c;
  c.base_url = server.base_url();
  c.model = "test-model";
  c.api_key = kKey;
  c.request_timeout_s = 60;  // never reached by an answer the test expects, however busy the machine
  c.connect_timeout_s = 30;
  c.max_retries = 3;
  c.backoff_base_s = 0.01;
  c.backoff_cap_s = 0.05;
  c.prices["test-model"] = ModelPrice{1.0, 2.0, 0.5};
  return c;
}

LlmRequest ask(std::string prompt, PromptKind kind = PromptKind::generate) {
  return LlmRequest{kind, "You write CUDA kernels.", std::move(prompt)};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// An answer that never comes while the test runs (the server lets it go when
// it stops): a request timeout is then certain, whatever the machine's speed.
Behaviour never_answered() {
  Behaviour b = Behaviour::answer("late");
  b.wait_file = "/nonexistent/ks-test-never-created";
  return b;
}

// The ks::Error a call throws.
template <typename F>
Error thrown_by(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected a ks::Error");
  return Error(Status::ok, "");
}

}  // namespace

TEST_CASE("openai: a chat answer with usage and cost, and the request it sent") {
  OpenAiTestServer server;
  OpenAiConfig c = local_config(server);
  c.temperature = 0.2;
  c.max_output_tokens = 1000;
  c.reasoning_effort = "low";
  c.extra_headers["X-Trace"] = "trace-42";
  c.extra_body = Json::obj({{"seed", 7}});
  auto policy = make_openai_policy(c);
  CHECK(policy->describe() == "openai:test-model");
  server.push(Behaviour::answer("hello", {100, 50, 10, 40}));

  LlmResponse r = policy->complete(ask("write a softmax"));
  CHECK(r.ok);
  CHECK(r.text == "hello");
  CHECK(r.finish_reason == "stop");
  CHECK(r.model == "test-model");
  CHECK(r.error.empty());
  CHECK(r.usage.input_tokens == 100);
  CHECK(r.usage.output_tokens == 50);
  CHECK(r.usage.reasoning_tokens == 10);
  CHECK(r.usage.attempts == 1);
  CHECK(r.usage.wall_s > 0);
  // 60 fresh input tokens at $1, 40 cached at $0.5, 50 output at $2 per million.
  CHECK(r.usage.cost_usd == doctest::Approx((60 * 1.0 + 40 * 0.5 + 50 * 2.0) / 1e6));
  CHECK(policy->total_usage().cost_usd == doctest::Approx(r.usage.cost_usd));

  auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].path == "/v1/chat/completions");
  CHECK(reqs[0].header("authorization") == "Bearer " + kKey);
  CHECK(reqs[0].header("x-trace") == "trace-42");
  CHECK(reqs[0].header("content-type") == "application/json");
  Json body = reqs[0].json();
  CHECK(body.get_string("model") == "test-model");
  REQUIRE(body.at("messages").size() == 2);
  CHECK(body.at("messages")[0].get_string("role") == "system");
  CHECK(body.at("messages")[0].get_string("content") == "You write CUDA kernels.");
  CHECK(body.at("messages")[1].get_string("role") == "user");
  CHECK(body.at("messages")[1].get_string("content") == "write a softmax");
  CHECK(body.get_number("temperature") == doctest::Approx(0.2));
  CHECK(body.get_int("max_completion_tokens") == 1000);
  CHECK(body.get_string("reasoning_effort") == "low");
  CHECK(body.get_int("seed") == 7);
  CHECK_FALSE(contains(reqs[0].body, kKey));
}

TEST_CASE("openai: the Responses API shape, with reasoning effort and reasoning tokens") {
  OpenAiTestServer server;
  OpenAiConfig c = local_config(server);
  c.api = OpenAiApi::responses;
  c.reasoning_effort = "high";
  c.max_output_tokens = 2000;
  auto policy = make_openai_policy(c);
  server.push(Behaviour::answer("reasoned answer", {200, 300, 250, 0}));

  LlmResponse r = policy->complete(ask("optimise it"));
  CHECK(r.ok);
  CHECK(r.text == "reasoned answer");
  CHECK(r.usage.reasoning_tokens == 250);
  CHECK(r.usage.output_tokens == 300);
  auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].path == "/v1/responses");
  Json body = reqs[0].json();
  CHECK(body.get_string("input") == "optimise it");
  CHECK(body.get_string("instructions") == "You write CUDA kernels.");
  CHECK(body.at("reasoning").get_string("effort") == "high");
  CHECK(body.get_int("max_output_tokens") == 2000);
  CHECK(body.get_bool("store", true) == false);
  CHECK_FALSE(body.contains("messages"));
  CHECK_FALSE(body.contains("temperature"));  // unset settings are not sent
}

TEST_CASE("openai: where the key comes from, and no Authorization header without one") {
  OpenAiTestServer server;
  OpenAiConfig c = local_config(server);
  c.api_key.clear();
  c.api_key_env = "KS_TEST_LLM_KEY_VAR";
  ::unsetenv("KSEARCH_API_KEY");
  ::unsetenv("KS_TEST_LLM_KEY_VAR");
  server.set_default(Behaviour::answer("ok"));

  SUBCASE("no key at all: a local server needs none") {
    CHECK(make_openai_policy(c)->complete(ask("p")).ok);
    CHECK(server.requests().back().header("authorization").empty());
  }
  SUBCASE("the named variable, trimmed") {
    ::setenv("KS_TEST_LLM_KEY_VAR", (kKey + "\n").c_str(), 1);
    make_openai_policy(c)->complete(ask("p"));
    CHECK(server.requests().back().header("authorization") == "Bearer " + kKey);
  }
  SUBCASE("KSEARCH_API_KEY when the named variable is unset") {
    ::setenv("KSEARCH_API_KEY", "sk-from-ksearch-variable", 1);
    make_openai_policy(c)->complete(ask("p"));
    CHECK(server.requests().back().header("authorization") == "Bearer sk-from-ksearch-variable");
  }
  SUBCASE("a hosted API without a key is a configuration error before any request") {
    c.base_url = "https://api.openai.com/v1";
    Error e = thrown_by([&] { make_openai_policy(c); });
    CHECK(e.status() == Status::invalid_argument);
    CHECK(contains(e.what(), "needs an API key"));
    CHECK(contains(e.what(), "$KS_TEST_LLM_KEY_VAR"));
    CHECK(contains(e.what(), "$KSEARCH_API_KEY"));
  }
  ::unsetenv("KSEARCH_API_KEY");
  ::unsetenv("KS_TEST_LLM_KEY_VAR");
}

TEST_CASE("openai: a configured proxy carries the requests") {
  // The test server understands the absolute-URI requests a proxy receives.
  OpenAiTestServer proxy;
  OpenAiConfig c = local_config(proxy);
  c.base_url = "http://llm.example.invalid/v1";  // never resolved: the proxy is asked
  c.proxy = "http://127.0.0.1:" + std::to_string(proxy.port());
  proxy.push(Behaviour::answer("via proxy"));
  LlmResponse r = make_openai_policy(c)->complete(ask("p"));
  CHECK(r.ok);
  CHECK(r.text == "via proxy");
  REQUIRE(proxy.request_count() == 1);
  CHECK(proxy.requests()[0].path == "http://llm.example.invalid/v1/chat/completions");
}

TEST_CASE("openai: 429 is retried after Retry-After (seconds or retry-after-ms)") {
  OpenAiTestServer server;
  auto policy = make_openai_policy(local_config(server));

  SUBCASE("Retry-After in seconds") {
    server.push({Behaviour::rate_limited("1"), Behaviour::answer("ok")});
    LlmResponse r = policy->complete(ask("p"));
    CHECK(r.ok);
    CHECK(r.usage.attempts == 2);
    auto reqs = server.requests();
    REQUIRE(reqs.size() == 2);
    CHECK(reqs[1].t_s - reqs[0].t_s >= 0.95);  // waited as asked, not the 10 ms backoff
  }
  SUBCASE("retry-after-ms wins over the coarser Retry-After") {
    Behaviour limited = Behaviour::rate_limited("30");
    limited.retry_after_ms = "200";
    server.push({limited, Behaviour::answer("ok")});
    LlmResponse r = policy->complete(ask("p"));
    CHECK(r.ok);
    auto reqs = server.requests();
    REQUIRE(reqs.size() == 2);
    CHECK(reqs[1].t_s - reqs[0].t_s >= 0.19);
    CHECK(reqs[1].t_s - reqs[0].t_s < 25);  // not the 30 s of Retry-After
  }
  SUBCASE("a Retry-After beyond the cap gives the request up") {
    OpenAiConfig c = local_config(server);
    c.retry_after_cap_s = 10;
    server.push(Behaviour::rate_limited("3600"));
    LlmResponse r = make_openai_policy(c)->complete(ask("p"));
    CHECK_FALSE(r.ok);
    CHECK(r.usage.attempts == 1);
    CHECK(contains(r.error, "retry after 3600 s"));
  }
}

TEST_CASE("openai: 5xx, timeouts and dropped connections are retried; then a clear failure") {
  OpenAiTestServer server;
  OpenAiConfig c = local_config(server);

  SUBCASE("500 and 503, then an answer") {
    server.push({Behaviour::server_error(500), Behaviour::server_error(503, "overloaded"), Behaviour::answer("ok")});
    LlmResponse r = make_openai_policy(c)->complete(ask("p"));
    CHECK(r.ok);
    CHECK(r.usage.attempts == 3);
  }
  SUBCASE("retries used up") {
    c.max_retries = 2;
    server.set_default(Behaviour::server_error(502, "upstream connect error"));
    LlmResponse r = make_openai_policy(c)->complete(ask("p"));
    CHECK_FALSE(r.ok);
    CHECK(r.usage.attempts == 3);
    CHECK(server.request_count() == 3);
    CHECK(contains(r.error, "gave up after 3 attempts"));
    CHECK(contains(r.error, "HTTP 502"));
    CHECK(contains(r.error, "upstream connect error"));
    CHECK(contains(r.error, "request id req_test_"));
  }
  // The timeout is long enough for the answer that does come, on a loaded machine.
  SUBCASE("an answer slower than the request timeout, then a fast one") {
    c.request_timeout_s = 3;
    server.push({never_answered(), Behaviour::answer("ok")});
    LlmResponse r = make_openai_policy(c)->complete(ask("p"));
    CHECK(r.ok);
    CHECK(r.text == "ok");
    CHECK(r.usage.attempts == 2);
  }
  SUBCASE("always too slow") {
    c.request_timeout_s = 1;
    c.max_retries = 1;
    server.push({never_answered(), never_answered()});
    LlmResponse r = make_openai_policy(c)->complete(ask("p"));
    CHECK_FALSE(r.ok);
    CHECK(r.usage.attempts == 2);
    CHECK(contains(r.error, "timed out (request timeout 1 s"));
  }
  SUBCASE("a dropped connection") {
    server.push({Behaviour::drop(), Behaviour::answer("ok")});
    LlmResponse r = make_openai_policy(c)->complete(ask("p"));
    CHECK(r.ok);
    CHECK(r.usage.attempts == 2);
  }
  SUBCASE("nobody listening") {
    std::string url;
    {
      OpenAiTestServer gone;
      url = gone.base_url();
    }
    c.base_url = url;
    c.max_retries = 1;
    LlmResponse r = make_openai_policy(c)->complete(ask("p"));
    CHECK_FALSE(r.ok);
    CHECK(r.usage.attempts == 2);
    CHECK(contains(r.error, "connection to 127.0.0.1 failed"));
  }
}

TEST_CASE("openai: unusable answers are failed generations, not retried, and the next call works") {
  OpenAiTestServer server;
  for (OpenAiApi api : {OpenAiApi::chat, OpenAiApi::responses}) {
    CAPTURE(to_string(api));
    OpenAiConfig c = local_config(server);
    c.api = api;
    c.max_output_tokens = 64;
    auto policy = make_openai_policy(c);
    std::size_t before = server.request_count();

    server.push(Behaviour::malformed());
    LlmResponse r = policy->complete(ask("p"));
    CHECK_FALSE(r.ok);
    CHECK(r.usage.attempts == 1);
    CHECK(contains(r.error, "not valid JSON"));

    server.push(Behaviour::truncated("```cuda\n__global__ void k("));
    r = policy->complete(ask("p"));
    CHECK_FALSE(r.ok);
    CHECK(r.finish_reason == "length");
    CHECK(contains(r.error, "cut off"));
    CHECK(contains(r.error, "max_output_tokens = 64"));
    CHECK(r.text == "```cuda\n__global__ void k(");  // kept for the record
    CHECK(r.usage.output_tokens == 20);                // the tokens were billed
    CHECK(r.usage.cost_usd > 0);

    server.push(Behaviour::content_filter());
    r = policy->complete(ask("p"));
    CHECK_FALSE(r.ok);
    CHECK(r.finish_reason == "content_filter");
    CHECK(contains(r.error, "content filter"));

    server.push(Behaviour::empty_answer());
    r = policy->complete(ask("p"));
    CHECK_FALSE(r.ok);
    CHECK(contains(r.error, "empty answer"));

    server.push(Behaviour::http_error(400, "This model's maximum context length is 128000 tokens"));
    r = policy->complete(ask("p"));
    CHECK_FALSE(r.ok);
    CHECK(r.usage.attempts == 1);
    CHECK(contains(r.error, "HTTP 400"));
    CHECK(contains(r.error, "maximum context length is 128000 tokens"));

    server.push(Behaviour::answer("fine again"));
    r = policy->complete(ask("p"));
    CHECK(r.ok);
    CHECK(r.text == "fine again");
    CHECK(server.request_count() - before == 6);  // one request each: nothing was retried
  }
}

TEST_CASE("openai: a body or headers over their caps fail that answer, error bodies too, and the next call works") {
  OpenAiTestServer server;
  OpenAiConfig c = local_config(server);
  c.max_response_bytes = 4000;
  c.max_retries = 2;  // a cap is not retried
  auto policy = make_openai_policy(c);

  server.push(Behaviour::answer(std::string(5000, 'a')));
  LlmResponse r = policy->complete(ask("p"));
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "larger than the limit of 4000 bytes"));
  CHECK(r.usage.attempts == 1);

  // An error status's body is capped the same way.
  server.push(Behaviour::http_error(400, std::string(5000, 'e')));
  r = policy->complete(ask("p"));
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "larger than the limit of 4000 bytes"));
  CHECK(r.usage.attempts == 1);

  // Headers without end (a misbehaving server or proxy): cut at 256 KiB, not retried.
  Behaviour flood = Behaviour::answer("never read");
  flood.filler_header_bytes = std::size_t{2} << 20;
  server.push(flood);
  r = policy->complete(ask("p"));
  CHECK_FALSE(r.ok);
  INFO(r.error);
  CHECK(contains(r.error, "headers are larger than the limit of 262144 bytes"));
  CHECK(r.usage.attempts == 1);

  server.push(Behaviour::answer("fits"));
  r = policy->complete(ask("p"));
  CHECK(r.ok);
  CHECK(r.text == "fits");
}

TEST_CASE("openai: 401, 403, 404 and an exhausted quota stop the run with the provider's message") {
  OpenAiTestServer server;
  OpenAiConfig c = local_config(server);
  auto policy = make_openai_policy(c);

  SUBCASE("401, with the key echoed back by the provider") {
    server.push(Behaviour::http_error(401, "Incorrect API key provided: {authorization}", "invalid_api_key"));
    Error e = thrown_by([&] { policy->complete(ask("p")); });
    CHECK(e.status() == Status::llm);
    std::string msg = e.what();
    CHECK(contains(msg, "HTTP 401"));
    CHECK(contains(msg, "Incorrect API key provided"));
    CHECK(contains(msg, "[redacted]"));
    CHECK(contains(msg, "check the API key in the configured api_key"));
    CHECK_FALSE(contains(msg, kKey));
    CHECK(server.request_count() == 1);
  }
  SUBCASE("401 without a key says how to give one") {
    OpenAiConfig nokey = c;
    nokey.api_key.clear();
    nokey.api_key_env = "KS_TEST_LLM_KEY_VAR";
    ::unsetenv("KS_TEST_LLM_KEY_VAR");
    ::unsetenv("KSEARCH_API_KEY");
    server.push(Behaviour::http_error(401, "You didn't provide an API key."));
    Error e = thrown_by([&] { make_openai_policy(nokey)->complete(ask("p")); });
    CHECK(contains(e.what(), "no API key was sent: set $KS_TEST_LLM_KEY_VAR or $KSEARCH_API_KEY"));
  }
  SUBCASE("404 names the base URL and model") {
    server.push(Behaviour::http_error(404, "The model `test-model` does not exist", "model_not_found"));
    Error e = thrown_by([&] { policy->complete(ask("p")); });
    CHECK(e.status() == Status::llm);
    CHECK(contains(e.what(), "does not exist"));
    CHECK(contains(e.what(), "check the base URL " + server.base_url()));
  }
  SUBCASE("403") {
    server.push(Behaviour::http_error(403, "Project does not have access to model"));
    CHECK(thrown_by([&] { policy->complete(ask("p")); }).status() == Status::llm);
    CHECK(server.request_count() == 1);
  }
  SUBCASE("429 insufficient_quota is billing, not load: no retry") {
    server.push(Behaviour::http_error(429, "You exceeded your current quota", "insufficient_quota"));
    Error e = thrown_by([&] { policy->complete(ask("p")); });
    CHECK(contains(e.what(), "exceeded your current quota"));
    CHECK(server.request_count() == 1);
  }
  SUBCASE("in a batch, the others finish and the call throws") {
    server.push(Behaviour::http_error(401, "bad key", "invalid_api_key"));
    server.set_default(Behaviour::answer("ok"));
    CHECK(thrown_by([&] { policy->complete_batch({ask("a"), ask("b"), ask("c")}); }).status() == Status::llm);
  }
}

TEST_CASE("openai: complete_batch runs requests concurrently, capped, answers in request order") {
  OpenAiTestServer server;
  OpenAiConfig c = local_config(server);
  // Queued in reverse, so answers in order cannot come from queue order.
  // Each answer waits until max_concurrency requests are in flight together;
  // a delay then gives a client over its cap time to send more (it only
  // makes an excess likelier to be seen: an honest client never has one).
  auto queue = [&](int together, double delay_s) {
    for (int i = 3; i >= 0; --i) {
      Behaviour b = Behaviour::answer("answer-" + std::to_string(i));
      b.match = "prompt-" + std::to_string(i);
      b.wait_in_flight = together;
      b.delay_s = delay_s;
      server.push(b);
    }
  };
  std::vector<LlmRequest> batch;
  for (int i = 0; i < 4; ++i) batch.push_back(ask("prompt-" + std::to_string(i)));

  SUBCASE("all in flight at once") {
    c.max_concurrency = 4;
    queue(4, 0);
    auto out = make_openai_policy(c)->complete_batch(batch);
    REQUIRE(out.size() == 4);
    for (int i = 0; i < 4; ++i) {
      CHECK(out[i].ok);
      CHECK(out[i].text == "answer-" + std::to_string(i));
    }
    CHECK(server.max_in_flight() == 4);
  }
  SUBCASE("at most max_concurrency in flight") {
    c.max_concurrency = 2;
    queue(2, 0.3);
    auto out = make_openai_policy(c)->complete_batch(batch);
    for (const auto& r : out) CHECK(r.ok);
    CHECK(server.max_in_flight() == 2);
  }
}

TEST_CASE("openai: a retry inside a batch does not hold up the others") {
  OpenAiTestServer server;
  auto policy = make_openai_policy(local_config(server));
  Behaviour limited = Behaviour::rate_limited("0");
  limited.match = "prompt-b";
  server.push(limited);
  server.set_default(Behaviour::answer("ok"));
  auto out = policy->complete_batch({ask("prompt-a"), ask("prompt-b"), ask("prompt-c")});
  CHECK(out[0].usage.attempts == 1);
  CHECK(out[1].usage.attempts == 2);
  CHECK(out[2].usage.attempts == 1);
  for (const auto& r : out) CHECK(r.ok);
  LlmUsage total = policy->total_usage();
  CHECK(total.attempts == 4);
  CHECK(total.input_tokens == 30);
  CHECK(total.output_tokens == 60);
}

TEST_CASE("openai: the cost budget stops new requests cleanly") {
  OpenAiTestServer server;
  OpenAiConfig c = local_config(server);
  c.prices["test-model"] = ModelPrice{1000.0, 1000.0};  // 10 + 20 tokens cost $0.03
  c.max_cost_usd = 0.05;
  c.max_concurrency = 1;
  server.set_default(Behaviour::answer("ok"));
  auto policy = make_openai_policy(c);

  CHECK(policy->complete(ask("1")).ok);
  CHECK_FALSE(policy->exhausted());
  // Three more in one batch: the first is sent ($0.06 in all), then the budget holds.
  auto out = policy->complete_batch({ask("2"), ask("3"), ask("4")});
  CHECK(out[0].ok);
  CHECK(policy->exhausted());
  for (int i : {1, 2}) {
    CHECK_FALSE(out[i].ok);
    CHECK(out[i].usage.attempts == 0);
    CHECK(contains(out[i].error, "cost budget reached"));
  }
  CHECK(server.request_count() == 2);
  CHECK(policy->total_usage().cost_usd == doctest::Approx(0.06));
  LlmResponse late = policy->complete(ask("5"));
  CHECK_FALSE(late.ok);
  CHECK(server.request_count() == 2);
}

TEST_CASE("openai: configuration errors are clear") {
  OpenAiTestServer server;
  auto error_of = [&](auto edit) {
    OpenAiConfig c = local_config(server);
    edit(c);
    Error e = thrown_by([&] { make_openai_policy(c); });
    CHECK(e.status() == Status::invalid_argument);
    return std::string(e.what());
  };
  CHECK(contains(error_of([](OpenAiConfig& c) { c.model.clear(); }), "no model"));
  CHECK(contains(error_of([](OpenAiConfig& c) { c.base_url = "ftp://example.com"; }), "http:// or https://"));
  CHECK(contains(error_of([](OpenAiConfig& c) {
                   c.model = "some-unpriced-model";
                   c.max_cost_usd = 1;
                 }),
                 "price of model \"some-unpriced-model\" is unknown"));
  CHECK(contains(error_of([](OpenAiConfig& c) { c.extra_headers["X-Bad"] = "a\r\nInjected: 1"; }), "X-Bad"));
  CHECK(contains(error_of([](OpenAiConfig& c) { c.max_concurrency = 0; }), "max_concurrency"));
  CHECK(contains(error_of([](OpenAiConfig& c) { c.extra_body = Json::arr({1}); }), "extra_body"));
}

TEST_CASE("openai: the key never reaches a file of the run folder, an error, or the request body") {
  OpenAiTestServer server;
  auto run = ks::test::scratch_dir("llm_key_leak");
  ::setenv("KS_TEST_LLM_KEY_VAR", kKey.c_str(), 1);
  OpenAiConfig c = local_config(server);
  c.api_key.clear();
  c.api_key_env = "KS_TEST_LLM_KEY_VAR";
  c.max_retries = 1;
  c.extra_headers["X-Api-Secret"] = "header-secret-value-123";
  auto policy = make_openai_policy(c);

  util::AppendLog transcript(run / "transcript.jsonl");
  std::int64_t seq = 0;
  auto record = [&](const LlmRequest& req, const LlmResponse& resp) {
    TranscriptEntry e{++seq, policy->describe(), req, resp, utc_timestamp()};
    transcript.append(e.to_json().dump());
  };
  std::vector<std::string> errors;
  // Failures whose provider messages echo the credentials back.
  server.push({Behaviour::server_error(500, "backend saw {authorization}"),
               Behaviour::server_error(500, "backend saw {authorization}")});
  server.push(Behaviour::http_error(400, "bad request from {authorization}"));
  server.push(Behaviour::answer("a fine answer"));
  server.push(Behaviour::http_error(401, "Incorrect API key provided: {authorization}"));
  for (int i = 0; i < 3; ++i) {
    LlmRequest req = ask("prompt " + std::to_string(i));
    LlmResponse resp = policy->complete(req);
    record(req, resp);
    errors.push_back(resp.error);
  }
  try {
    policy->complete(ask("last"));
  } catch (const Error& e) {
    errors.push_back(e.what());
  }
  util::write_file_atomic(run / "manifest.json",
                            Json::obj({{"llm", c.to_json()}, {"usage", policy->total_usage().to_json()}}).dump(2));

  REQUIRE(errors.size() == 4);
  CHECK(contains(errors[0], "[redacted]"));
  for (const auto& e : errors) {
    CHECK_FALSE(contains(e, kKey));
    CHECK_FALSE(contains(e, "header-secret-value-123"));
  }
  // grep -r over the run folder.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(run)) {
    if (!entry.is_regular_file()) continue;
    std::string content = util::read_file(entry.path());
    CAPTURE(entry.path().string());
    CHECK_FALSE(contains(content, kKey));
    CHECK_FALSE(contains(content, "header-secret-value-123"));
  }
  // On the wire, the key travels only in the Authorization header.
  for (const auto& r : server.requests()) {
    CHECK_FALSE(contains(r.body, kKey));
    for (const auto& [name, value] : r.headers)
      if (name != "authorization") CHECK_FALSE(contains(value, kKey));
    CHECK(r.header("authorization") == "Bearer " + kKey);
  }
  ::unsetenv("KS_TEST_LLM_KEY_VAR");
}

TEST_CASE("openai: configuration JSON for manifests has no secrets and reads back") {
  OpenAiConfig c;
  c.base_url = "https://user:pw@proxy.example/v1";
  c.model = "gpt-5.2";
  c.api = OpenAiApi::responses;
  c.reasoning_effort = "high";
  c.temperature = 0.5;
  c.api_key = kKey;
  c.extra_headers["OpenAI-Organization"] = "org-123456789";
  c.prices["gpt-5.2"] = ModelPrice{2, 20, 0.2};
  c.max_cost_usd = 5;
  Json j = c.to_json();
  std::string text = j.dump();
  CHECK_FALSE(contains(text, kKey));
  CHECK_FALSE(contains(text, "org-123456789"));
  CHECK_FALSE(contains(text, "pw@"));
  CHECK(j.at("extra_headers").get_string("OpenAI-Organization") == "***");
  OpenAiConfig back = OpenAiConfig::from_json(j);
  CHECK(back.model == "gpt-5.2");
  CHECK(back.api == OpenAiApi::responses);
  CHECK(back.reasoning_effort == "high");
  CHECK(back.temperature.value_or(0) == doctest::Approx(0.5));
  CHECK(back.max_cost_usd == doctest::Approx(5));
  CHECK(back.prices.at("gpt-5.2").output_per_mtok == doctest::Approx(20));
  CHECK(back.api_key.empty());
  CHECK(back.extra_headers.empty());  // masked values are not sent as "***"
  CHECK_THROWS_AS(OpenAiConfig::from_json(Json::obj({{"model", "m"}, {"modle", "x"}})), Error);
  CHECK_THROWS_AS(OpenAiConfig::from_json(Json::obj({{"model", "m"}, {"api", "completions"}})), Error);
}

TEST_CASE("prices: built-in table, dated snapshots, overrides and price files") {
  REQUIRE(find_price("gpt-5.2"));
  CHECK(find_price("gpt-5.2-2025-12-11")->output_per_mtok == find_price("gpt-5.2")->output_per_mtok);
  CHECK(find_price("gpt-4.1-mini-2025-04-14")->input_per_mtok == find_price("gpt-4.1-mini")->input_per_mtok);
  CHECK_FALSE(find_price("o3-pro"));  // a different model, not a snapshot of o3
  CHECK(find_price("models/gemini-2.5-pro"));
  CHECK_FALSE(find_price("my-local-llama"));
  std::map<std::string, ModelPrice> over = {{"gpt-5.2", {9, 99}}};
  CHECK(find_price("gpt-5.2", over)->output_per_mtok == 99);
  CHECK(std::string(builtin_prices_date()).size() == 10);

  ModelPrice p{2.0, 8.0, 0.5};
  CHECK(p.cost(1'000'000, 1'000'000) == doctest::Approx(10.0));
  CHECK(p.cost(1'000'000, 0, 1'000'000) == doctest::Approx(0.5));

  auto dir = ks::test::scratch_dir("llm_prices");
  util::write_file_atomic(dir / "prices.json",
                            R"({"local-model": {"input_per_mtok": 0.1, "output_per_mtok": 0.2}})");
  auto table = read_price_file(dir / "prices.json");
  CHECK(table.at("local-model").output_per_mtok == doctest::Approx(0.2));
  util::write_file_atomic(dir / "bad.json", R"({"m": {"input_per_mtok": 1}})");
  Error e = thrown_by([&] { read_price_file(dir / "bad.json"); });
  CHECK(contains(e.what(), "\"m\""));
  CHECK(contains(e.what(), "output_per_mtok"));
}

TEST_CASE("openai wire: answers and error bodies in the shapes servers send") {
  using namespace ks::llm;
  SUBCASE("chat content as parts, and a refusal") {
    auto a = parse_answer(OpenAiApi::chat,
                          R"({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}, "finish_reason": "stop"}]})",
                          0);
    CHECK(a.ok);
    CHECK(a.text == "ab");
    a = parse_answer(OpenAiApi::chat,
                     R"({"choices": [{"message": {"content": null, "refusal": "I can't help"}, "finish_reason": "stop"}]})", 0);
    CHECK_FALSE(a.ok);
    CHECK(a.finish_reason == "refusal");
  }
  SUBCASE("a leading <think> section is not the answer") {
    auto a = parse_answer(OpenAiApi::chat,
                          R"({"choices": [{"message": {"content": "<think>hmm {</think>\n\nthe answer"}, "finish_reason": "stop"}]})", 0);
    CHECK(a.text == "the answer");
    CHECK(strip_think("<think>unfinished") == "<think>unfinished");
  }
  SUBCASE("a 200 carrying an error object, no choices, a failed response") {
    CHECK_FALSE(parse_answer(OpenAiApi::chat, R"({"error": {"message": "overloaded"}})", 0).ok);
    CHECK(contains(parse_answer(OpenAiApi::chat, R"({"error": {"message": "overloaded"}})", 0).error, "overloaded"));
    CHECK(contains(parse_answer(OpenAiApi::chat, R"({"choices": []})", 0).error, "no choices"));
    CHECK(contains(parse_answer(OpenAiApi::responses, R"({"status": "failed", "error": {"message": "server_error"}})", 0).error,
                   "server_error"));
    CHECK(contains(parse_answer(OpenAiApi::chat, "", 0).error, "empty response body"));
  }
  SUBCASE("provider error bodies") {
    std::string code;
    CHECK(provider_error(R"([{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}])", &code) ==
          "API key not valid.");
    CHECK(code == "INVALID_ARGUMENT");
    CHECK(provider_error(R"({"detail": "Not Found"})") == "Not Found");
    CHECK(provider_error(R"({"error": "model not loaded"})") == "model not loaded");
    CHECK(provider_error("<html>Bad gateway</html>") == "<html>Bad gateway</html>");
  }
  SUBCASE("endpoint URLs") {
    OpenAiConfig c;
    c.base_url = "http://localhost:8000/v1/";
    CHECK(endpoint_url(c) == "http://localhost:8000/v1/chat/completions");
    c.api = OpenAiApi::responses;
    CHECK(endpoint_url(c) == "http://localhost:8000/v1/responses");
  }
}
