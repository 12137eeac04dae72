// Secret values this process knows (the LLM API key, header values marked
// secret) and their redaction: defence in depth behind the scrubbed
// environments of candidate processes (docs/security.md). Whatever reaches a
// prompt, a run-folder file, an event or an evaluation result passes through
// redact() first, wherever it came from.
#pragma once

#include <string>
#include <string_view>

#include "ksearch/json.hpp"

namespace ks::util {

inline constexpr std::string_view kRedacted = "[redacted]";

// Values shorter than this are not registered: redacting "abc" everywhere
// would mangle ordinary text, and a key that short protects nothing anyway.
inline constexpr std::size_t kMinSecretLength = 8;

// Adds a value to the process-wide set; surrounding whitespace is ignored.
void register_secret(std::string_view value);

// `text` with every registered secret replaced by "[redacted]".
std::string redact(std::string_view text);
// The same over every string (keys included) of a JSON value.
Json redact_json(const Json& value);
// True when `text` holds a registered secret.
bool contains_secret(std::string_view text);

// Registers the value of `key_env` (the variable the API key comes from) and
// of every environment variable whose name looks like a credential: a run
// redacts them even when its own policy never reads them.
void register_environment_secrets(std::string_view key_env);

// Environment variable names that look like credentials (KEY, TOKEN, SECRET,
// PASSWORD, ...): never passed to a candidate's process, allowlisted or not.
bool looks_like_credential_name(std::string_view name);

}  // namespace ks::util
