// ks::Json: parsing through simdjson's DOM, writing with our own writer.
#include "ksearch/json.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>

#include "ksearch/error.hpp"
#include "util/text.hpp"

KS_NAMESPACE_BEGIN
namespace {

Json from_simdjson(simdjson::dom::element el) {
  using T = simdjson::dom::element_type;
  switch (el.type()) {
    case T::ARRAY: {
      Json::Array out;
      for (auto child : el.get_array()) out.push_back(from_simdjson(child));
      return Json(std::move(out));
    }
    case T::OBJECT: {
      Json::Object out;
      for (auto field : el.get_object()) {
        std::string key(field.key);
        // Duplicate keys: the last one wins, as in most JSON readers.
        bool replaced = false;
        for (auto& m : out) {
          if (m.first == key) {
            m.second = from_simdjson(field.value);
            replaced = true;
            break;
          }
        }
        if (!replaced) out.emplace_back(std::move(key), from_simdjson(field.value));
      }
      return Json(std::move(out));
    }
    case T::INT64: return Json(static_cast<long long>(int64_t(el)));
    case T::UINT64: {
      uint64_t u = uint64_t(el);
      if (u > static_cast<uint64_t>(INT64_MAX)) return Json(static_cast<double>(u));
      return Json(static_cast<long long>(u));
    }
    case T::DOUBLE: return Json(double(el));
    case T::STRING: return Json(std::string(std::string_view(el)));
    case T::BOOL: return Json(bool(el));
    case T::NULL_VALUE: return Json();
  }
  return Json();
}

// Writes a JSON string. Text from models and compilers is not always valid
// UTF-8 (a byte cut off mid-character, a binary dump); invalid bytes become
// U+FFFD so every line written can be read back by a strict parser. DEL and
// the C1 controls are escaped like C0 ones, so JSON printed on a terminal
// cannot drive it.
void write_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      // A C1 control (C2 80..C2 9F) is escaped like a C0 one.
      const unsigned next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
      if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {
        out += fmt::format("\\u{:04x}", next);
        i += 2;
        continue;
      }
      i += util::append_utf8_or_replacement(out, s, i);
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out.push_back('\n');
  out.append(static_cast<std::size_t>(indent * depth), ' ');
}

[[noreturn]] void type_error(const char* wanted, Json::Type got) {
  throw Error(Status::invalid_argument,
              fmt::format("expected a JSON {}, found {}", wanted, json_type_name(got)));
}

const Json& null_json() {
  static const Json null;
  return null;
}

}  // namespace

const char* json_type_name(Json::Type type) {
  switch (type) {
    case Json::Type::null: return "null";
    case Json::Type::boolean: return "boolean";
    case Json::Type::integer: return "integer";
    case Json::Type::number: return "number";
    case Json::Type::string: return "string";
    case Json::Type::array: return "array";
    case Json::Type::object: return "object";
  }
  return "?";
}

std::optional<Json> Json::try_parse(std::string_view text, std::string* error) {
  // One parser per thread: simdjson parsers are reusable but not thread-safe.
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element doc;
  auto err = parser.parse(padded).get(doc);
  if (err) {
    if (error) *error = simdjson::error_message(err);
    return std::nullopt;
  }
  return from_simdjson(doc);
}

Json Json::parse(std::string_view text) {
  std::string err;
  auto j = try_parse(text, &err);
  if (!j) throw Error(Status::parse, "invalid JSON: " + err);
  return std::move(*j);
}

Json::Type Json::type() const {
  switch (value_.index()) {
    case 0: return Type::null;
    case 1: return Type::boolean;
    case 2: return Type::integer;
    case 3: return Type::number;
    case 4: return Type::string;
    case 5: return Type::array;
    default: return Type::object;
  }
}

bool Json::as_bool() const {
  if (!is_bool()) type_error("boolean", type());
  return std::get<bool>(value_);
}

std::int64_t Json::as_int() const {
  if (is_int()) return std::get<std::int64_t>(value_);
  if (std::holds_alternative<double>(value_)) {
    double d = std::get<double>(value_);
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) return static_cast<std::int64_t>(d);
    throw Error(Status::invalid_argument, fmt::format("expected an integer, found {}", d));
  }
  type_error("integer", type());
}

double Json::as_number() const {
  if (is_int()) return static_cast<double>(std::get<std::int64_t>(value_));
  if (std::holds_alternative<double>(value_)) return std::get<double>(value_);
  type_error("number", type());
}

const std::string& Json::as_string() const {
  if (!is_string()) type_error("string", type());
  return std::get<std::string>(value_);
}

const Json::Array& Json::as_array() const {
  if (!is_array()) type_error("array", type());
  return std::get<Array>(value_);
}

Json::Array& Json::as_array() {
  if (!is_array()) type_error("array", type());
  return std::get<Array>(value_);
}

const Json::Object& Json::as_object() const {
  if (!is_object()) type_error("object", type());
  return std::get<Object>(value_);
}

Json::Object& Json::as_object() {
  if (!is_object()) type_error("object", type());
  return std::get<Object>(value_);
}

const Json* Json::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& m : std::get<Object>(value_))
    if (m.first == key) return &m.second;
  return nullptr;
}

Json* Json::find(std::string_view key) {
  if (!is_object()) return nullptr;
  for (auto& m : std::get<Object>(value_))
    if (m.first == key) return &m.second;
  return nullptr;
}

Json& Json::operator[](std::string_view key) {
  if (is_null()) value_ = Object{};
  if (Json* j = find(key)) return *j;
  auto& obj = as_object();
  obj.emplace_back(std::string(key), Json());
  return obj.back().second;
}

const Json& Json::operator[](std::string_view key) const {
  if (const Json* j = find(key)) return *j;
  return null_json();
}

const Json& Json::at(std::string_view key) const {
  if (const Json* j = find(key)) return *j;
  throw Error(Status::not_found, fmt::format("missing field \"{}\"", key));
}

bool Json::erase(std::string_view key) {
  if (!is_object()) return false;
  auto& obj = std::get<Object>(value_);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it->first == key) {
      obj.erase(it);
      return true;
    }
  }
  return false;
}

const Json& Json::operator[](std::size_t i) const {
  const auto& a = as_array();
  if (i >= a.size()) return null_json();
  return a[i];
}

Json& Json::operator[](std::size_t i) {
  auto& a = as_array();
  if (i >= a.size())
    throw Error(Status::invalid_argument, fmt::format("index {} out of range (size {})", i, a.size()));
  return a[i];
}

void Json::push_back(Json v) {
  if (is_null()) value_ = Array{};
  as_array().push_back(std::move(v));
}

std::size_t Json::size() const {
  if (is_array()) return std::get<Array>(value_).size();
  if (is_object()) return std::get<Object>(value_).size();
  return 0;
}

std::string Json::get_string(std::string_view key, std::string_view def) const {
  const Json* j = find(key);
  if (!j || j->is_null()) return std::string(def);
  if (!j->is_string())
    throw Error(Status::invalid_argument,
                fmt::format("field \"{}\" must be a string, found {}", key, json_type_name(j->type())));
  return j->as_string();
}

double Json::get_number(std::string_view key, double def) const {
  const Json* j = find(key);
  if (!j || j->is_null()) return def;
  if (!j->is_number())
    throw Error(Status::invalid_argument,
                fmt::format("field \"{}\" must be a number, found {}", key, json_type_name(j->type())));
  return j->as_number();
}

std::int64_t Json::get_int(std::string_view key, std::int64_t def) const {
  const Json* j = find(key);
  if (!j || j->is_null()) return def;
  if (!j->is_number())
    throw Error(Status::invalid_argument,
                fmt::format("field \"{}\" must be an integer, found {}", key, json_type_name(j->type())));
  try {
    return j->as_int();
  } catch (const Error&) {
    throw Error(Status::invalid_argument,
                fmt::format("field \"{}\" must be an integer, found {}", key, j->as_number()));
  }
}

bool Json::get_bool(std::string_view key, bool def) const {
  const Json* j = find(key);
  if (!j || j->is_null()) return def;
  if (!j->is_bool())
    throw Error(Status::invalid_argument,
                fmt::format("field \"{}\" must be true or false, found {}", key, json_type_name(j->type())));
  return j->as_bool();
}

namespace {

void dump_to(const Json& j, std::string& out, int indent, int depth) {
  switch (j.type()) {
    case Json::Type::null: out += "null"; break;
    case Json::Type::boolean: out += j.as_bool() ? "true" : "false"; break;
    case Json::Type::integer: out += fmt::format("{}", j.as_int()); break;
    case Json::Type::number: {
      double d = j.as_number();
      if (!std::isfinite(d)) {
        out += "null";  // JSON has no NaN/Inf
      } else {
        std::string s = fmt::format("{}", d);
        // Keep a number that happens to be integral recognisable as a float.
        if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
        out += s;
      }
      break;
    }
    case Json::Type::string: write_string(out, j.as_string()); break;
    case Json::Type::array: {
      const auto& a = j.as_array();
      if (a.empty()) {
        out += "[]";
        break;
      }
      out.push_back('[');
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (i) out.push_back(',');
        newline(out, indent, depth + 1);
        dump_to(a[i], out, indent, depth + 1);
      }
      newline(out, indent, depth);
      out.push_back(']');
      break;
    }
    case Json::Type::object: {
      const auto& o = j.as_object();
      if (o.empty()) {
        out += "{}";
        break;
      }
      out.push_back('{');
      for (std::size_t i = 0; i < o.size(); ++i) {
        if (i) out.push_back(',');
        newline(out, indent, depth + 1);
        write_string(out, o[i].first);
        out += indent < 0 ? ":" : ": ";
        dump_to(o[i].second, out, indent, depth + 1);
      }
      newline(out, indent, depth);
      out.push_back('}');
      break;
    }
  }
}

}  // namespace

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(*this, out, indent, 0);
  return out;
}

KS_NAMESPACE_END
