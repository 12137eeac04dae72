// The built-in LLM policies and the transcript format (docs/llm.md):
//   openai   any OpenAI-compatible server over HTTP (OpenAI, Gemini's
//            OpenAI endpoint, vLLM, llama.cpp's server, Ollama), with
//            retries, concurrency, accounting and a cost budget;
//   replay   answers from a recorded transcript, for offline and exact reruns;
//   command  an external program that reads the prompt on stdin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"
#include "ksearch/llm.hpp"

KS_NAMESPACE_BEGIN

// ---------------------------------------------------------------------------
// Prices

// A model's price in USD per million tokens. Reasoning tokens are billed as
// output tokens (they are part of the output count the servers report).
struct KS_API ModelPrice {
  double input_per_mtok = 0;
  double output_per_mtok = 0;
  double cached_input_per_mtok = -1;  // < 0: cached input costs the same as input

  // input_tokens includes cached_tokens, as the servers report them.
  double cost(std::int64_t input_tokens, std::int64_t output_tokens, std::int64_t cached_tokens = 0) const;
  Json to_json() const;
  static ModelPrice from_json(const Json& j);  // throws ks::Error naming the bad field
};

// The built-in table: providers' list prices as of builtin_prices_date().
// They change; override them with a price file or OpenAiConfig::prices.
KS_API const std::map<std::string, ModelPrice>& builtin_prices();
KS_API const char* builtin_prices_date();

// Reads {"model-name": {"input_per_mtok": 1.25, "output_per_mtok": 10,
// "cached_input_per_mtok": 0.125}, ...}; throws ks::Error naming the file and entry.
KS_API std::map<std::string, ModelPrice> read_price_file(const std::filesystem::path& path);

// The price of `model`: `overrides` first, then the built-in table; an exact
// name first, then the longest known prefix ("gpt-5.2-2025-12-11" is priced
// as "gpt-5.2"). A "models/" prefix (Gemini) is ignored.
KS_API std::optional<ModelPrice> find_price(std::string_view model,
                                            const std::map<std::string, ModelPrice>& overrides = {});

// ---------------------------------------------------------------------------
// openai: OpenAI-compatible HTTP

// Which endpoint to call. `chat` (/chat/completions) works with every
// OpenAI-compatible server; `responses` (/responses) is OpenAI's API for
// reasoning models (gpt-5*, o3). Chosen by configuration, never guessed.
enum class OpenAiApi { chat, responses };

KS_API const char* to_string(OpenAiApi api);
KS_API std::optional<OpenAiApi> openai_api_from_string(std::string_view s);

struct KS_API OpenAiConfig {
  std::string base_url = "https://api.openai.com/v1";  // the endpoint path is appended
  std::string model;
  OpenAiApi api = OpenAiApi::chat;
  std::string reasoning_effort;        // "low", "medium", "high", ...; empty: the server's default
  std::optional<double> temperature;   // unset: not sent (reasoning models reject it)
  std::int64_t max_output_tokens = 0;  // 0: the server's default
  // Where the API key comes from: this variable, else KSEARCH_API_KEY. No key
  // is fine for local servers: then no Authorization header is sent.
  std::string api_key_env = "OPENAI_API_KEY";
  std::string api_key;  // for embedders; wins over the environment; never serialized
  std::map<std::string, std::string> extra_headers;  // values are treated as secrets
  Json extra_body;  // an object merged into every request body (provider-specific fields)
  double request_timeout_s = 900;  // per HTTP attempt, whole transfer
  double connect_timeout_s = 15;
  std::string proxy;  // empty: libcurl's default, which honours https_proxy/http_proxy/no_proxy
  // Retries on 408/409/429/5xx, timeouts and dropped connections.
  int max_retries = 8;
  double backoff_base_s = 1;  // delay before retry k: min(cap, base * 2^(k-1)), half of it jittered
  double backoff_cap_s = 60;
  double retry_after_cap_s = 600;  // a longer Retry-After gives the request up instead
  int max_concurrency = 4;         // requests in flight at once in complete_batch
  std::size_t max_response_bytes = std::size_t{16} << 20;  // a longer HTTP body is a failed attempt
  double max_cost_usd = 0;         // 0: unlimited; once reached, no new request is sent
  std::string price_file;          // JSON price overrides (see read_price_file)
  std::map<std::string, ModelPrice> prices;  // overrides that win over the price file

  // For manifests: every field except the key; extra header values masked.
  Json to_json() const;
  // Reads the fields of to_json (all optional except "model"); unknown
  // fields are an error. Never reads a key from JSON. Masked header values
  // ("***", as to_json writes them) are skipped: a configuration read back
  // from a manifest sends those headers only if they are given again.
  static OpenAiConfig from_json(const Json& j);
};

// Checks the configuration and reads the key; throws ks::Error
// (invalid_argument) for a bad configuration: no model, a base URL that is not
// http(s), a cost budget without a price for the model, no key for a hosted
// API that needs one (api.openai.com, Gemini, ...).
//
// complete() and complete_batch() return ok == false for a failed generation
// (retries used up, HTTP 400, malformed, empty, truncated or filtered answer,
// cost budget reached) and throw ks::Error(Status::llm) when no later request
// can succeed either: HTTP 401, 403, 404, quota exhausted, TLS verification
// failure. The key is never part of any message.
KS_API std::unique_ptr<LlmPolicy> make_openai_policy(const OpenAiConfig& config);

// ---------------------------------------------------------------------------
// replay: answers from a transcript

// Answers in order from a transcript (read_transcript), starting at entry
// `start` (for resuming after answers already consumed). Returns recorded
// responses as they were, failures included. Throws ks::Error(Status::llm)
// when the transcript has run out or the requested PromptKind differs from
// the recorded one, and ks::Error(not_found/parse) for a missing or broken file.
KS_API std::unique_ptr<LlmPolicy> make_replay_policy(const std::filesystem::path& transcript,
                                                     std::size_t start = 0);

// ---------------------------------------------------------------------------
// command: an external program

struct KS_API CommandConfig {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  double timeout_s = 600;
  // plain: stdin is the prompt; the system message is in $KSEARCH_SYSTEM_PROMPT.
  // json:  stdin is {"kind": ..., "system": ..., "prompt": ...}.
  // Either way $KSEARCH_PROMPT_KIND holds the kind and stdout is the answer.
  enum class Input { plain, json };
  Input input = Input::plain;
  std::size_t max_output_bytes = std::size_t{16} << 20;  // more on stdout is a failed generation
  // Programs running at once in complete_batch. 1 by default: a scripted
  // program may keep state between calls, and concurrent calls would race.
  int max_concurrency = 1;
};

// A nonzero exit, a signal, a timeout or an empty answer is a failed
// generation whose error holds the stderr excerpt. A program that cannot be
// started throws ks::Error(Status::subprocess).
KS_API std::unique_ptr<LlmPolicy> make_command_policy(const CommandConfig& config);
KS_API std::unique_ptr<LlmPolicy> make_command_policy(const std::vector<std::string>& argv,
                                                      double timeout_s = 600);

// ---------------------------------------------------------------------------
// Transcripts: one JSON object per line
//
//   {"seq": 3, "kind": "generate", "policy": "openai:gpt-5.2",
//    "request": {"system": "...", "prompt": "..."},
//    "response": <LlmResponse::to_json()>, "time": "2026-01-15T10:04:05.123Z"}
//
// Hand-written transcripts need only "kind" and "response" (or "text", a
// shorthand for a successful response with that text).

struct KS_API TranscriptEntry {
  std::int64_t seq = 0;
  std::string policy;    // LlmPolicy::describe() of what answered
  LlmRequest request;    // request.kind is the entry's "kind"
  LlmResponse response;
  std::string time;      // ISO-8601 UTC

  Json to_json() const;
  // Throws ks::Error(Status::parse) naming the missing or bad field.
  static TranscriptEntry from_json(const Json& j);
};

// Now, as ISO-8601 UTC with milliseconds: "2026-01-15T10:04:05.123Z", the
// format of "time". Also declared in run_store.hpp; defined in core.
KS_API std::string utc_timestamp();

// Reads a transcript. Blank lines are skipped; a last line that is cut off
// (a write torn by a kill) is dropped; any other bad line throws
// ks::Error(Status::parse) naming the file and line number.
KS_API std::vector<TranscriptEntry> read_transcript(const std::filesystem::path& path);

KS_NAMESPACE_END
