// The openai policy: OpenAI-compatible HTTP with retries, concurrency,
// accounting and a cost budget. The API key lives only in this object and in
// the Authorization header; every message that leaves it is scrubbed.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>

#include "ksearch/error.hpp"
#include "ksearch/log.hpp"
#include "ksearch/llm_policies.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "llm/http.hpp"
#include "llm/openai_wire.hpp"
#include "util/json_fields.hpp"
#include "util/secrets.hpp"
#include "util/text.hpp"

KS_NAMESPACE_BEGIN

const char* to_string(OpenAiApi api) { return api == OpenAiApi::chat ? "chat" : "responses"; }

std::optional<OpenAiApi> openai_api_from_string(std::string_view s) {
  if (s == "chat") return OpenAiApi::chat;
  if (s == "responses") return OpenAiApi::responses;
  return std::nullopt;
}

namespace {

// "http://user:pass@proxy:8080" -> "http://***@proxy:8080".
std::string mask_userinfo(const std::string& url) {
  auto at = url.find('@');
  if (at == std::string::npos) return url;
  auto scheme = url.find("://");
  std::size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  if (at < start) return url;
  return url.substr(0, start) + "***" + url.substr(at);
}

}  // namespace

Json OpenAiConfig::to_json() const {
  Json headers = Json::object();
  for (const auto& [name, value] : extra_headers) {
    (void)value;
    headers[name] = "***";
  }
  Json price_overrides = Json::object();
  for (const auto& [name, p] : prices) price_overrides[name] = p.to_json();
  Json j = Json::obj({{"base_url", mask_userinfo(base_url)},
                      {"model", model},
                      {"api", to_string(api)},
                      {"reasoning_effort", reasoning_effort}});
  if (temperature) j["temperature"] = *temperature;
  j["max_output_tokens"] = max_output_tokens;
  j["api_key_env"] = api_key_env;
  j["extra_headers"] = std::move(headers);
  if (!extra_body.is_null()) j["extra_body"] = extra_body;
  j["request_timeout_s"] = request_timeout_s;
  j["max_response_bytes"] = static_cast<std::int64_t>(max_response_bytes);
  j["connect_timeout_s"] = connect_timeout_s;
  j["proxy"] = mask_userinfo(proxy);
  j["max_retries"] = max_retries;
  j["backoff_base_s"] = backoff_base_s;
  j["backoff_cap_s"] = backoff_cap_s;
  j["retry_after_cap_s"] = retry_after_cap_s;
  j["max_concurrency"] = max_concurrency;
  j["max_cost_usd"] = max_cost_usd;
  j["price_file"] = price_file;
  if (!prices.empty()) j["prices"] = std::move(price_overrides);
  return j;
}

OpenAiConfig OpenAiConfig::from_json(const Json& j) {
  util::FieldReader r(j, "openai config");
  r.allow({"base_url", "model", "api", "reasoning_effort", "temperature", "max_output_tokens", "api_key_env",
           "extra_headers", "extra_body", "request_timeout_s", "connect_timeout_s", "proxy", "max_retries",
           "max_response_bytes",
           "backoff_base_s", "backoff_cap_s", "retry_after_cap_s", "max_concurrency", "max_cost_usd",
           "price_file", "prices"});
  OpenAiConfig c;
  c.model = r.required_string("model");
  c.base_url = j.get_string("base_url", c.base_url);
  std::string api = j.get_string("api", "chat");
  auto a = openai_api_from_string(api);
  if (!a)
    throw Error(Status::invalid_argument,
                fmt::format("openai config: \"api\" must be \"chat\" or \"responses\", found \"{}\"", api));
  c.api = *a;
  c.reasoning_effort = j.get_string("reasoning_effort");
  if (const Json* t = j.find("temperature"); t && !t->is_null()) c.temperature = r.required_number("temperature");
  c.max_output_tokens = r.optional_int("max_output_tokens", 0);
  c.api_key_env = j.get_string("api_key_env", c.api_key_env);
  if (const Json* h = j.find("extra_headers"); h && !h->is_null()) {
    if (!h->is_object())
      throw Error(Status::invalid_argument, "openai config: \"extra_headers\" must map header names to values");
    for (const auto& [name, value] : h->as_object()) {
      if (!value.is_string())
        throw Error(Status::invalid_argument,
                    fmt::format("openai config: extra header \"{}\" must be a string", name));
      // A manifest holds "***" for values it must not record: sending that
      // would be wrong, so the header is left out and must be given again.
      if (value.as_string() != "***") c.extra_headers[name] = value.as_string();
    }
  }
  if (const Json* b = j.find("extra_body")) c.extra_body = *b;
  c.request_timeout_s = r.optional_number("request_timeout_s", c.request_timeout_s);
  c.max_response_bytes = static_cast<std::size_t>(
      std::max<std::int64_t>(1, r.optional_int("max_response_bytes", static_cast<std::int64_t>(c.max_response_bytes))));
  c.connect_timeout_s = r.optional_number("connect_timeout_s", c.connect_timeout_s);
  c.proxy = j.get_string("proxy");
  c.max_retries = static_cast<int>(r.optional_int("max_retries", c.max_retries));
  c.backoff_base_s = r.optional_number("backoff_base_s", c.backoff_base_s);
  c.backoff_cap_s = r.optional_number("backoff_cap_s", c.backoff_cap_s);
  c.retry_after_cap_s = r.optional_number("retry_after_cap_s", c.retry_after_cap_s);
  c.max_concurrency = static_cast<int>(r.optional_int("max_concurrency", c.max_concurrency));
  c.max_cost_usd = r.optional_number("max_cost_usd", 0);
  c.price_file = j.get_string("price_file");
  if (const Json* p = j.find("prices"); p && !p->is_null()) {
    if (!p->is_object())
      throw Error(Status::invalid_argument, "openai config: \"prices\" must map model names to prices");
    for (const auto& [name, price] : p->as_object()) c.prices[name] = ModelPrice::from_json(price);
  }
  return c;
}

KS_NAMESPACE_END

namespace ks::llm {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void bad_config(const std::string& msg) {
  throw Error(Status::invalid_argument, "openai policy: " + msg);
}

std::string host_of(std::string_view url) {
  constexpr auto npos = std::string_view::npos;
  if (auto s = url.find("://"); s != npos) url.remove_prefix(s + 3);
  url = url.substr(0, url.find_first_of("/?#"));
  if (auto at = url.rfind('@'); at != npos) url.remove_prefix(at + 1);
  if (!url.empty() && url.front() == '[') return std::string(url.substr(0, url.find(']') + 1));  // IPv6
  return std::string(url.substr(0, url.find(':')));
}

// Hosted APIs that always need a key: a missing one is a configuration
// error before any request. Other servers (local ones) decide for themselves.
bool needs_key(const std::string& host) {
  for (std::string_view h : {"api.openai.com", "generativelanguage.googleapis.com", "openrouter.ai",
                             "api.anthropic.com", "api.deepseek.com", "api.groq.com", "api.together.xyz",
                             "api.mistral.ai", "api.fireworks.ai"})
    if (host == h || (host.size() > h.size() && host.ends_with(h) && host[host.size() - h.size() - 1] == '.'))
      return true;
  return false;
}

std::string trim_ws(std::string s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool has_line_break(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

// Replaces every occurrence of a secret, so no message can carry one.
class Redactor {
 public:
  void add(const std::string& secret) {
    // Short values ("EMPTY", "ollama") are placeholders, not secrets, and
    // scrubbing them would mangle ordinary words.
    if (secret.size() >= 8) secrets_.push_back(secret);
  }
  std::string operator()(std::string text) const {
    constexpr std::string_view mark = "[redacted]";
    for (const auto& s : secrets_)
      for (auto p = text.find(s); p != std::string::npos; p = text.find(s, p + mark.size()))
        text.replace(p, s.size(), mark);
    return text;
  }

 private:
  std::vector<std::string> secrets_;
};

enum class Verdict { ok, failed, retry, fatal };

struct Outcome {
  Verdict verdict = Verdict::failed;
  std::string message;
  WireAnswer answer;
};

class OpenAiPolicy final : public LlmPolicy {
 public:
  explicit OpenAiPolicy(OpenAiConfig cfg) : cfg_(std::move(cfg)), rng_(std::random_device{}()) {
    if (cfg_.model.empty()) bad_config("no model given");
    if (!(cfg_.base_url.starts_with("http://") || cfg_.base_url.starts_with("https://")))
      bad_config(fmt::format("base URL \"{}\" must start with http:// or https://", mask_userinfo(cfg_.base_url)));
    if (cfg_.max_concurrency < 1) bad_config("max_concurrency must be at least 1");
    if (cfg_.max_retries < 0) bad_config("max_retries must not be negative");
    if (!(cfg_.request_timeout_s > 0) || !(cfg_.connect_timeout_s > 0)) bad_config("timeouts must be positive");
    if (cfg_.backoff_base_s < 0 || cfg_.backoff_cap_s < 0 || cfg_.retry_after_cap_s < 0)
      bad_config("backoff and retry-after limits must not be negative");
    if (cfg_.max_cost_usd < 0) bad_config("max_cost_usd must not be negative");
    if (cfg_.max_output_tokens < 0) bad_config("max_output_tokens must not be negative");
    if (!cfg_.extra_body.is_null() && !cfg_.extra_body.is_object())
      bad_config("extra_body must be a JSON object");

    // The key: configured, else the named variable, else KSEARCH_API_KEY.
    key_ = trim_ws(cfg_.api_key);
    key_source_ = "the configured api_key";
    for (const std::string& var : {cfg_.api_key_env, std::string("KSEARCH_API_KEY")}) {
      if (!key_.empty() || var.empty()) continue;
      if (const char* v = std::getenv(var.c_str()); v && *v) {
        key_ = trim_ws(v);
        key_source_ = "$" + var;
      }
    }
    if (has_line_break(key_)) bad_config(fmt::format("the API key in {} contains a line break", key_source_));
    redact_.add(key_);
    util::register_secret(key_);  // and everywhere else the process writes (util/secrets.hpp)
    std::string host = host_of(cfg_.base_url);
    if (key_.empty() && needs_key(host))
      bad_config(fmt::format("{} needs an API key, but {}", host,
                             cfg_.api_key_env.empty()
                                 ? std::string("$KSEARCH_API_KEY is unset")
                                 : fmt::format("${} and $KSEARCH_API_KEY are unset", cfg_.api_key_env)));

    headers_ = {"Content-Type: application/json", "Accept: application/json",
                "Expect:"};  // no 100-continue round trip for large prompts
    if (!key_.empty()) headers_.push_back("Authorization: Bearer " + key_);
    for (const auto& [name, value] : cfg_.extra_headers) {
      if (name.empty() || has_line_break(name) || name.find(':') != std::string::npos || has_line_break(value))
        bad_config(fmt::format("extra header \"{}\" is not a valid header", name));
      headers_.push_back(name + ": " + value);
      util::register_secret(value);
      redact_.add(value);
    }
    if (cfg_.proxy.find('@') != std::string::npos) redact_.add(cfg_.proxy);  // credentials inside

    std::map<std::string, ModelPrice> overrides;
    if (!cfg_.price_file.empty()) overrides = read_price_file(cfg_.price_file);
    for (const auto& [name, p] : cfg_.prices) overrides[name] = p;
    price_ = find_price(cfg_.model, overrides);
    if (cfg_.max_cost_usd > 0 && !price_)
      bad_config(fmt::format("max_cost_usd is set, but the price of model \"{}\" is unknown; give it in a "
                             "price file or OpenAiConfig::prices",
                             cfg_.model));
    url_ = endpoint_url(cfg_);
  }

  LlmResponse complete(const LlmRequest& request) override { return std::move(complete_batch({request}).front()); }

  std::vector<LlmResponse> complete_batch(const std::vector<LlmRequest>& requests) override {
    struct Job {
      std::string body;
      int attempts = 0;
      Clock::time_point start;
      LlmResponse response;
    };
    std::vector<Job> jobs(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      jobs[i].body = request_body(cfg_, requests[i]).dump();
      jobs[i].response.model = cfg_.model;
    }
    std::optional<std::string> fatal;

    HttpClient::Hooks hooks;
    hooks.next_attempt = [&](std::size_t i) -> std::optional<HttpRequest> {
      Job& job = jobs[i];
      std::optional<std::string> stop = budget_reached();
      if (fatal) stop = "not sent, because an earlier request failed for good";
      if (stop) {
        job.response.error = prefix(*stop);
        job.response.usage.attempts = job.attempts;
        if (job.attempts > 0)
          job.response.usage.wall_s = std::chrono::duration<double>(Clock::now() - job.start).count();
        return std::nullopt;
      }
      if (job.attempts++ == 0) job.start = Clock::now();
      return HttpRequest{url_,
                         headers_,
                         job.body,
                         cfg_.request_timeout_s,
                         cfg_.connect_timeout_s,
                         cfg_.proxy,
                         cfg_.max_response_bytes};
    };
    hooks.finished = [&](std::size_t i, HttpResult&& r) -> std::optional<double> {
      Job& job = jobs[i];
      Outcome o = judge(r);
      if (o.verdict == Verdict::retry) {
        if (job.attempts > cfg_.max_retries) {
          o.verdict = Verdict::failed;
          o.message = fmt::format("gave up after {} attempts; the last: {}", job.attempts, o.message);
        } else if (r.retry_after_s && *r.retry_after_s > cfg_.retry_after_cap_s) {
          o.verdict = Verdict::failed;
          o.message = fmt::format("{}; the server asks to retry after {:.0f} s, more than retry_after_cap_s ({:.0f} s)",
                                  o.message, *r.retry_after_s, cfg_.retry_after_cap_s);
        } else {
          double delay = r.retry_after_s ? *r.retry_after_s : backoff(job.attempts);
          // One line per retry, so an outage is never waited out in silence;
          // it quotes the endpoint, so without control sequences.
          log_message(LogLevel::warning,
                      util::terminal_safe(redact_(fmt::format("{} {} request failed: {}; retry {} of {} in {:.1f} s",
                                                              describe(), to_string(requests[i].kind), o.message,
                                                              job.attempts, cfg_.max_retries, delay))));
          return delay;
        }
      }
      finish(job.response, o, job.attempts, job.start);
      if (o.verdict == Verdict::fatal && !fatal) fatal = job.response.error;
      return std::nullopt;
    };
    if (!http_.run(jobs.size(), cfg_.max_concurrency, hooks))
      throw Error(Status::cancelled, prefix("the request was cancelled; its transfer was aborted"));

    if (fatal) throw Error(Status::llm, *fatal);
    std::vector<LlmResponse> out;
    out.reserve(jobs.size());
    for (auto& j : jobs) out.push_back(std::move(j.response));
    return out;
  }

  std::string describe() const override { return "openai:" + cfg_.model; }

  void cancel() override { http_.abort(); }

  // GET {base_url}/models: cheap, sends no prompt and costs nothing, and
  // tells an endpoint that is down or refuses the key from one that answers.
  std::string check_ready() override {
    std::string base = cfg_.base_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    HttpRequest req{base + "/models", headers_, "", std::min(10.0, cfg_.request_timeout_s),
                    std::min(10.0, cfg_.connect_timeout_s), cfg_.proxy, std::size_t{8} << 20};
    req.get = true;
    HttpResult res;
    bool sent = false;
    HttpClient::Hooks hooks;
    hooks.next_attempt = [&](std::size_t) -> std::optional<HttpRequest> {
      if (sent) return std::nullopt;
      sent = true;
      return req;
    };
    hooks.finished = [&](std::size_t, HttpResult&& r) -> std::optional<double> {
      res = std::move(r);
      return std::nullopt;
    };
    http_.run(1, 1, hooks);
    const std::string where = mask_userinfo(base);
    if (res.curl_code != 0 && !res.body_too_large && !res.headers_too_large)
      throw Error(Status::llm, redact_(fmt::format("{}: the endpoint {} does not answer ({}); nothing was sent to the "
                                                   "model. Check --base-url and that the server is running",
                                                   describe(), where, res.transport_error)));
    if (res.status == 401 || res.status == 403)
      throw Error(Status::llm, redact_(fmt::format("{}: the endpoint {} refused GET /models: {}; nothing was sent to "
                                                   "the model", describe(), where,
                                                   http_failure(res, provider_error(res.body)))));
    if (res.status >= 200 && res.status < 300) {
      // A listed model set that lacks ours is worth a word, not a stop:
      // aliases and dated snapshots are often served without being listed.
      auto j = Json::try_parse(res.body);
      const Json* data = j && j->is_object() ? j->find("data") : nullptr;
      if (data && data->is_array() && !data->empty()) {
        for (const auto& m : data->as_array())
          if (m.is_object() && m.get_string("id") == cfg_.model) return {};
        return redact_(fmt::format("{}: {} lists {} models, not \"{}\"; the first request will tell whether it "
                                   "serves it", describe(), where, data->size(), cfg_.model));
      }
      return {};
    }
    return redact_(fmt::format("{}: {} answered HTTP {} to GET /models (a server without that route?); the endpoint "
                               "is up, and whether it serves \"{}\" shows at the first request",
                               describe(), where, res.status, cfg_.model));
  }

  bool exhausted() const override { return budget_reached().has_value(); }

  LlmUsage total_usage() const override {
    std::lock_guard lock(mu_);
    return total_;
  }

 private:
  std::string prefix(const std::string& msg) const { return redact_(describe() + ": " + msg); }

  std::optional<std::string> budget_reached() const {
    if (cfg_.max_cost_usd <= 0) return std::nullopt;
    std::lock_guard lock(mu_);
    if (total_.cost_usd < cfg_.max_cost_usd) return std::nullopt;
    return fmt::format("cost budget reached: ${:.4f} spent of max_cost_usd ${:.4f}; no request sent",
                       total_.cost_usd, cfg_.max_cost_usd);
  }

  // Exponential backoff with jitter: half the delay fixed, half random, so
  // concurrent requests that failed together do not retry together.
  double backoff(int attempt) {
    double d = std::min(cfg_.backoff_cap_s, cfg_.backoff_base_s * std::pow(2.0, attempt - 1));
    std::lock_guard lock(mu_);
    return d / 2 + std::uniform_real_distribution<double>(0, d / 2)(rng_);
  }

  std::string http_failure(const HttpResult& r, const std::string& provider_msg) const {
    std::string reason = r.status_text.empty() ? http_reason(r.status) : r.status_text;
    std::string msg = fmt::format("HTTP {}{}{}: {}", r.status, reason.empty() ? "" : " ", reason, provider_msg);
    if (r.status == 401)
      msg += key_.empty() ? fmt::format(" (no API key was sent: set ${} or $KSEARCH_API_KEY)",
                                        cfg_.api_key_env.empty() ? "OPENAI_API_KEY" : cfg_.api_key_env)
                          : fmt::format(" (check the API key in {})", key_source_);
    else if (r.status == 403)
      msg += " (the key has no access to this model or endpoint)";
    else if (r.status == 404)
      msg += fmt::format(" (check the base URL {} and the model name \"{}\")", mask_userinfo(cfg_.base_url),
                         cfg_.model);
    if (!r.request_id.empty()) msg += fmt::format(" [request id {}]", r.request_id);
    return msg;
  }

  Outcome judge(const HttpResult& r) const {
    Outcome o;
    if (r.curl_code != 0) {
      switch (classify_transport(r.curl_code)) {
        case TransportFailure::timeout:
          o.verdict = Verdict::retry;
          o.message = fmt::format("timed out (request timeout {:g} s, connect timeout {:g} s): {}",
                                  cfg_.request_timeout_s, cfg_.connect_timeout_s, r.transport_error);
          break;
        case TransportFailure::transient:
          o.verdict = Verdict::retry;
          o.message = fmt::format("connection to {} failed: {}", host_of(cfg_.base_url), r.transport_error);
          break;
        case TransportFailure::permanent:
          // Over a size limit: this answer failed; the next may fit.
          o.verdict = r.body_too_large || r.headers_too_large ? Verdict::failed : Verdict::fatal;
          o.message = fmt::format("request to {} failed: {}", mask_userinfo(url_), r.transport_error);
          break;
      }
      return o;
    }
    if (r.status >= 200 && r.status < 300) {
      o.answer = parse_answer(cfg_.api, r.body, cfg_.max_output_tokens);
      o.verdict = o.answer.ok ? Verdict::ok : Verdict::failed;
      o.message = o.answer.error;
      return o;
    }
    std::string code;
    std::string provider_msg = provider_error(r.body, &code);
    o.message = http_failure(r, provider_msg);
    const long s = r.status;
    if (s == 429 && code == "insufficient_quota") o.verdict = Verdict::fatal;  // billing, not load
    else if (s == 408 || s == 409 || s == 425 || s == 429 || (s >= 500 && s != 501 && s != 505))
      o.verdict = Verdict::retry;
    else if (s == 401 || s == 403 || s == 404) o.verdict = Verdict::fatal;
    else o.verdict = Verdict::failed;
    return o;
  }

  void finish(LlmResponse& resp, const Outcome& o, int attempts, Clock::time_point start) {
    const WireAnswer& a = o.answer;
    resp.ok = o.verdict == Verdict::ok;
    resp.text = redact_(a.text);
    resp.finish_reason = a.finish_reason;
    if (!a.model.empty()) resp.model = a.model;
    if (!resp.ok) resp.error = prefix(o.message);
    LlmUsage& u = resp.usage;
    u.input_tokens = a.input_tokens;
    u.output_tokens = a.output_tokens;
    u.reasoning_tokens = a.reasoning_tokens;
    u.attempts = attempts;
    u.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    if (price_) u.cost_usd = price_->cost(a.input_tokens, a.output_tokens, a.cached_tokens);
    std::lock_guard lock(mu_);
    total_ += u;
  }

  OpenAiConfig cfg_;
  std::string key_;
  std::string key_source_;
  Redactor redact_;
  std::vector<std::string> headers_;
  std::string url_;
  std::optional<ModelPrice> price_;
  HttpClient http_;
  mutable std::mutex mu_;  // guards total_ and rng_
  LlmUsage total_;
  std::mt19937_64 rng_;
};

}  // namespace
}  // namespace ks::llm

KS_NAMESPACE_BEGIN

std::unique_ptr<LlmPolicy> make_openai_policy(const OpenAiConfig& config) {
  return std::make_unique<llm::OpenAiPolicy>(config);
}

KS_NAMESPACE_END
