// LLM choice: LlmChoice's CLI form and JSON codec, and the policy each
// choice makes (the offline one that answers nothing included).
#include "engine/llm_choice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "ksearch/error.hpp"
#include "ksearch/log.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "util/text.hpp"

KS_NAMESPACE_BEGIN

namespace fs = std::filesystem;

namespace {

// Answers nothing: the tune strategy needs no model, and any other strategy
// learns at its first prompt that none is configured.
class OfflinePolicy final : public LlmPolicy {
 public:
  LlmResponse complete(const LlmRequest& req) override {
    LlmResponse r;
    r.ok = false;
    r.error = fmt::format("no LLM is configured (--llm offline) but the strategy asked for a {} answer; "
                          "use --strategy tune or configure a model", to_string(req.kind));
    return r;
  }
  std::string describe() const override { return "offline"; }
};

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

}  // namespace

LlmChoice LlmChoice::parse(const std::string& spec) {
  LlmChoice c;
  if (spec == "openai" || spec.empty()) {
    c.kind = LlmSource::openai;
  } else if (spec == "offline") {
    c.kind = LlmSource::offline;
  } else if (spec.rfind("replay:", 0) == 0) {
    c.kind = LlmSource::replay;
    c.replay_path = spec.substr(7);
    if (c.replay_path.empty()) throw Error(Status::invalid_argument, "--llm replay: needs a transcript path (replay:PATH)");
  } else if (spec.rfind("command:", 0) == 0) {
    c.kind = LlmSource::command;
    c.command.argv = split_words(spec.substr(8));
    if (c.command.argv.empty())
      throw Error(Status::invalid_argument, "--llm command: needs a program (command:PROGRAM ARGS)");
  } else {
    throw Error(Status::invalid_argument,
                fmt::format("unknown --llm \"{}\" (expected openai, offline, replay:PATH or command:PROGRAM ARGS)", spec));
  }
  return c;
}

Json LlmChoice::to_json() const {
  Json j = Json::obj({{"kind", to_string(kind)}});
  if (kind == LlmSource::openai) j["openai"] = openai.to_json();
  if (kind == LlmSource::replay) {
    j["replay_path"] = fs::absolute(replay_path).string();
    j["on_divergence"] = to_string(on_divergence);
  }
  if (kind == LlmSource::command) {
    Json argv = Json::array();
    for (const auto& a : command.argv) argv.push_back(a);
    j["command"] = Json::obj({{"argv", argv}, {"timeout_s", command.timeout_s},
                              {"input", command.input == CommandConfig::Input::json ? "json" : "plain"},
                              {"max_concurrency", command.max_concurrency}});
  }
  if (kind == LlmSource::custom && custom) j["describe"] = custom->describe();
  return j;
}

LlmChoice LlmChoice::from_json(const Json& j) {
  LlmChoice c;
  c.kind = parse_llm_source(j.get_string("kind", "openai"), "LLM kind");
  if (c.kind == LlmSource::openai && j.contains("openai")) c.openai = OpenAiConfig::from_json(j["openai"]);
  if (c.kind == LlmSource::replay) {
    c.replay_path = j.get_string("replay_path");
    c.on_divergence = parse_replay_divergence(j.get_string("on_divergence", "stop"));
  }
  if (c.kind == LlmSource::command) {
    const Json& cmd = j["command"];
    for (const auto& a : cmd["argv"].is_array() ? cmd["argv"].as_array() : Json::Array{})
      c.command.argv.push_back(a.as_string());
    c.command.timeout_s = cmd.get_number("timeout_s", 600);
    c.command.input = cmd.get_string("input", "plain") == "json" ? CommandConfig::Input::json
                                                                 : CommandConfig::Input::plain;
    c.command.max_concurrency = static_cast<int>(cmd.get_number("max_concurrency", 1));
  }
  return c;
}

std::unique_ptr<LlmPolicy> make_llm_policy(const LlmChoice& choice) {
  switch (choice.kind) {
    case LlmSource::openai: return make_openai_policy(choice.openai);
    case LlmSource::replay: return make_replay_policy(choice.replay_path);
    case LlmSource::command: return make_command_policy(choice.command);
    case LlmSource::offline: return std::make_unique<OfflinePolicy>();
    case LlmSource::custom:
      throw Error(Status::invalid_argument, "a custom LLM policy must be passed as an object, not made by name");
  }
  throw Error(Status::invalid_argument, fmt::format("LLM kind {} is not an LlmSource", static_cast<int>(choice.kind)));
}

KS_NAMESPACE_END

namespace ks::engine {

LlmChoice with_transport_caps(LlmChoice c, std::size_t max_answer_bytes) {
  c.openai.max_response_bytes = std::max(c.openai.max_response_bytes, 2 * max_answer_bytes + (std::size_t{1} << 20));
  c.command.max_output_bytes = std::max(c.command.max_output_bytes, max_answer_bytes + 1);
  return c;
}

void check_llm(LlmPolicy& llm) {
  std::string warning = llm.check_ready();
  if (!warning.empty())  // it may quote what the endpoint answered
    log_message(LogLevel::warning, util::terminal_safe(warning));
}

}  // namespace ks::engine
