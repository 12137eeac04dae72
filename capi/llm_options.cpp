// ks_llm_options: its init function and its translation into the C++
// LlmChoice, every field checked by name.
#include <cmath>

#include "capi_internal.hpp"
#include "ksearch/llm_policies.hpp"

namespace ks::capi {

LlmChoice llm_choice_of(const ks_llm_options& o, double max_cost_usd, const char* prefix) {
  const std::string p = prefix;
  check_version(prefix, o.version, KS_LLM_OPTIONS_VERSION);
  LlmChoice c;
  const bool callbacks = o.callback || o.batch_callback;
  if (callbacks && o.source != KS_LLM_CALLBACK && o.source != KS_LLM_BATCH_CALLBACK)
    throw Error(Status::invalid_argument,
                fmt::format("{0}.callback or {0}.batch_callback is set but {0}.source is \"{1}\"; set {0}.source to "
                            "KS_LLM_CALLBACK or KS_LLM_BATCH_CALLBACK",
                            p, ks_llm_source_name(o.source)));
  switch (o.source) {
    case KS_LLM_OPENAI: {
      c.kind = LlmSource::openai;
      OpenAiConfig& a = c.openai;
      a.model = str(o.model);
      if (a.model.empty())
        throw Error(Status::invalid_argument,
                    fmt::format("{0}.model is required with KS_LLM_OPENAI (or set {0}.source to KS_LLM_OFFLINE with "
                                "the tune strategy, KS_LLM_REPLAY or a callback)",
                                p));
      if (o.base_url) a.base_url = o.base_url;
      if (o.api != KS_API_CHAT && o.api != KS_API_RESPONSES)
        throw Error(Status::invalid_argument, fmt::format("{}.api is {}, not a ks_api_kind", p, static_cast<int>(o.api)));
      a.api = o.api == KS_API_RESPONSES ? OpenAiApi::responses : OpenAiApi::chat;
      a.reasoning_effort = str(o.reasoning_effort);
      if (std::isnan(o.temperature)) throw Error(Status::invalid_argument, p + ".temperature is NaN");
      if (o.temperature >= 0) a.temperature = o.temperature;
      if (o.max_output_tokens < 0)
        throw Error(Status::invalid_argument, fmt::format("{}.max_output_tokens must be >= 0", p));
      a.max_output_tokens = o.max_output_tokens;
      if (o.api_key_env) a.api_key_env = o.api_key_env;
      a.api_key = str(o.api_key);
      for (const std::string& h : string_array(o.headers, o.header_count, p + ".headers")) {
        auto colon = h.find(':');
        if (colon == std::string::npos || colon == 0)
          throw Error(Status::invalid_argument, fmt::format("{}.headers: \"{}\" must look like \"Name: value\"", p, h));
        std::string value = h.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        a.extra_headers[h.substr(0, colon)] = value;
      }
      a.request_timeout_s = finite_at_least(o.request_timeout_s, 0, p + ".request_timeout_s", true);
      a.connect_timeout_s = finite_at_least(o.connect_timeout_s, 0, p + ".connect_timeout_s", true);
      a.proxy = str(o.proxy);
      if (o.max_retries < 0) throw Error(Status::invalid_argument, p + ".max_retries must be >= 0");
      a.max_retries = o.max_retries;
      if (o.max_concurrency < 1) throw Error(Status::invalid_argument, p + ".max_concurrency must be >= 1");
      a.max_concurrency = o.max_concurrency;
      a.max_cost_usd = max_cost_usd;  // the CLI's --max-cost also stops requests at the source
      a.price_file = str(o.price_file);
      if (o.extra_body_json) a.extra_body = json_object_field(o.extra_body_json, p + ".extra_body_json");
      break;
    }
    case KS_LLM_OFFLINE: c.kind = LlmSource::offline; break;
    case KS_LLM_REPLAY:
      c.kind = LlmSource::replay;
      if (!o.replay_path || !*o.replay_path)
        throw Error(Status::invalid_argument, p + ".replay_path is required with KS_LLM_REPLAY");
      c.replay_path = o.replay_path;
      c.on_divergence = divergence_of(o.replay_on_divergence, (p + ".replay_on_divergence").c_str());
      break;
    case KS_LLM_COMMAND:
      c.kind = LlmSource::command;
      c.command.argv = string_array(o.command_argv, o.command_argc, p + ".command_argv");
      if (c.command.argv.empty() || c.command.argv[0].empty())
        throw Error(Status::invalid_argument, p + ".command_argv must name a program (command_argc >= 1)");
      c.command.timeout_s = finite_at_least(o.command_timeout_s, 0, p + ".command_timeout_s", true);
      if (o.command_input != KS_COMMAND_INPUT_PLAIN && o.command_input != KS_COMMAND_INPUT_JSON)
        throw Error(Status::invalid_argument, p + ".command_input is not a ks_command_input");
      c.command.input = o.command_input == KS_COMMAND_INPUT_JSON ? CommandConfig::Input::json : CommandConfig::Input::plain;
      break;
    case KS_LLM_CALLBACK:
      if (!o.callback) throw Error(Status::invalid_argument, p + ".source is KS_LLM_CALLBACK but " + p + ".callback is NULL");
      c.kind = LlmSource::custom;
      c.custom = llm_callback_policy(o.callback, o.user_data);
      break;
    case KS_LLM_BATCH_CALLBACK:
      if (!o.batch_callback)
        throw Error(Status::invalid_argument,
                    p + ".source is KS_LLM_BATCH_CALLBACK but " + p + ".batch_callback is NULL");
      c.kind = LlmSource::custom;
      c.custom = llm_batch_callback_policy(o.batch_callback, o.user_data);
      break;
    default:
      throw Error(Status::invalid_argument,
                  fmt::format("{}.source is {}, which is not a ks_llm_source", p, static_cast<int>(o.source)));
  }
  return c;
}

}  // namespace ks::capi

using namespace ks::capi;

extern "C" {

ks_status ks_llm_options_init(ks_llm_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_llm_options_init", o, version, KS_LLM_OPTIONS_VERSION); s != KS_OK) return s;
  ks::OpenAiConfig a;
  ks::CommandConfig c;
  o->source = KS_LLM_OPENAI;
  o->api = KS_API_CHAT;
  o->temperature = -1;
  o->max_output_tokens = a.max_output_tokens;
  o->request_timeout_s = a.request_timeout_s;
  o->connect_timeout_s = a.connect_timeout_s;
  o->max_retries = a.max_retries;
  o->max_concurrency = a.max_concurrency;
  o->command_timeout_s = c.timeout_s;
  o->command_input = KS_COMMAND_INPUT_PLAIN;
  return KS_OK;
}

}  // extern "C"
