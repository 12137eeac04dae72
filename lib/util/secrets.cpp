#include "util/secrets.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <shared_mutex>
#include <vector>

extern char** environ;

namespace ks::util {
namespace {

struct Registry {
  std::shared_mutex m;
  std::vector<std::string> values;  // longest first, so a secret inside another is not half-replaced
  std::atomic<bool> any{false};
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

void register_secret(std::string_view value) {
  value = trim(value);
  if (value.size() < kMinSecretLength) return;
  Registry& r = registry();
  std::unique_lock lock(r.m);
  if (std::find(r.values.begin(), r.values.end(), value) != r.values.end()) return;
  r.values.emplace_back(value);
  std::stable_sort(r.values.begin(), r.values.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  r.any = true;
}

bool contains_secret(std::string_view text) {
  Registry& r = registry();
  if (!r.any) return false;
  std::shared_lock lock(r.m);
  for (const auto& v : r.values)
    if (text.find(v) != std::string_view::npos) return true;
  return false;
}

std::string redact(std::string_view text) {
  Registry& r = registry();
  if (!r.any) return std::string(text);
  std::shared_lock lock(r.m);
  std::string out(text);
  for (const auto& v : r.values) {
    for (std::size_t pos = out.find(v); pos != std::string::npos; pos = out.find(v, pos + kRedacted.size()))
      out.replace(pos, v.size(), kRedacted);
  }
  return out;
}

Json redact_json(const Json& value) {
  if (!registry().any) return value;
  switch (value.type()) {
    case Json::Type::string: return Json(redact(std::string_view(value.as_string())));
    case Json::Type::array: {
      Json out = Json::array();
      for (const auto& e : value.as_array()) out.push_back(redact_json(e));
      return out;
    }
    case Json::Type::object: {
      Json out = Json::object();
      for (const auto& [k, v] : value.as_object()) out[redact(k)] = redact_json(v);
      return out;
    }
    default: return value;
  }
}

void register_environment_secrets(std::string_view key_env) {
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view name = kv.substr(0, eq);
    if ((!key_env.empty() && name == key_env) || looks_like_credential_name(name)) register_secret(kv.substr(eq + 1));
  }
}

bool looks_like_credential_name(std::string_view name) {
  std::string up;
  for (char c : name) up.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  for (const char* word : {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE",
                           "SESSION", "PRIVATE"})
    if (up.find(word) != std::string::npos) return true;
  return false;
}

}  // namespace ks::util
