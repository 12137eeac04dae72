#include "util/json_fields.hpp"

#include <fmt/format.h>

#include "ksearch/error.hpp"

namespace ks::util {

FieldReader::FieldReader(const Json& j, std::string what) : j_(j), what_(std::move(what)) {
  if (!j.is_object())
    throw Error(Status::invalid_argument,
                fmt::format("{} must be a JSON object, found {}", what_, json_type_name(j.type())));
}

namespace {
[[noreturn]] void bad(const std::string& what, std::string_view key, std::string_view wanted,
                      const Json* found) {
  if (!found || found->is_null())
    throw Error(Status::invalid_argument, fmt::format("{}: missing required field \"{}\"", what, key));
  throw Error(Status::invalid_argument, fmt::format("{}: field \"{}\" must be {}, found {}", what, key,
                                                    wanted, json_type_name(found->type())));
}
}  // namespace

const std::string& FieldReader::required_string(std::string_view key) const {
  const Json* v = j_.find(key);
  if (!v || !v->is_string()) bad(what_, key, "a string", v);
  return v->as_string();
}

const Json::Array& FieldReader::required_array(std::string_view key) const {
  const Json* v = j_.find(key);
  if (!v || !v->is_array()) bad(what_, key, "an array", v);
  return v->as_array();
}

const Json& FieldReader::required_object(std::string_view key) const {
  const Json* v = j_.find(key);
  if (!v || !v->is_object()) bad(what_, key, "an object", v);
  return *v;
}

std::int64_t FieldReader::required_int(std::string_view key) const {
  const Json* v = j_.find(key);
  if (!v || !v->is_number()) bad(what_, key, "an integer", v);
  try {
    return v->as_int();
  } catch (const Error&) {
    bad(what_, key, "an integer", v);
  }
}

double FieldReader::required_number(std::string_view key) const {
  const Json* v = j_.find(key);
  if (!v || !v->is_number()) bad(what_, key, "a number", v);
  return v->as_number();
}

std::int64_t FieldReader::optional_int(std::string_view key, std::int64_t def) const {
  const Json* v = j_.find(key);
  if (!v || v->is_null()) return def;
  return required_int(key);
}

double FieldReader::optional_number(std::string_view key, double def) const {
  const Json* v = j_.find(key);
  if (!v || v->is_null()) return def;
  return required_number(key);
}

void FieldReader::allow(std::initializer_list<std::string_view> known) const {
  for (const auto& [key, value] : j_.as_object()) {
    bool ok = false;
    for (auto k : known) ok = ok || k == key;
    if (!ok) {
      std::string list;
      for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      throw Error(Status::invalid_argument,
                  fmt::format("{}: unknown field \"{}\" (known fields: {})", what_, key, list));
    }
  }
}

Json string_array(const std::vector<std::string>& v) {
  Json a = Json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

std::vector<std::string> string_list(const Json* j, std::string_view what) {
  std::vector<std::string> out;
  if (!j || j->is_null()) return out;
  const auto bad = [&] { return Error(Status::invalid_argument, fmt::format("{} must be an array of strings", what)); };
  if (!j->is_array()) throw bad();
  for (const auto& s : j->as_array()) {
    if (!s.is_string()) throw bad();
    out.push_back(s.as_string());
  }
  return out;
}

}  // namespace ks::util
