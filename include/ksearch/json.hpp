// A small JSON value: parsed with simdjson, written by libksearch's own
// writer. Objects keep insertion order so files we write read naturally.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ksearch/export.h"

KS_NAMESPACE_BEGIN

class KS_API Json {
 public:
  enum class Type { null, boolean, integer, number, string, array, object };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool v) : value_(v) {}
  Json(int v) : value_(static_cast<std::int64_t>(v)) {}
  Json(long v) : value_(static_cast<std::int64_t>(v)) {}
  Json(long long v) : value_(static_cast<std::int64_t>(v)) {}
  Json(unsigned v) : value_(static_cast<std::int64_t>(v)) {}
  Json(unsigned long v) : value_(static_cast<std::int64_t>(v)) {}
  Json(unsigned long long v) : value_(static_cast<std::int64_t>(v)) {}
  Json(double v) : value_(v) {}
  Json(const char* v) : value_(std::string(v)) {}
  Json(std::string_view v) : value_(std::string(v)) {}
  Json(std::string v) : value_(std::move(v)) {}
  Json(Array v) : value_(std::move(v)) {}
  Json(Object v) : value_(std::move(v)) {}

  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }
  // Builds an object from {key, value} pairs: Json::obj({{"a", 1}, {"b", "x"}}).
  static Json obj(std::initializer_list<Member> members) { return Json(Object(members)); }
  static Json arr(std::initializer_list<Json> items) { return Json(Array(items)); }

  // Parses JSON text; throws ks::Error(Status::parse) naming the problem.
  static Json parse(std::string_view text);
  // Like parse, but returns nullopt and fills *error instead of throwing.
  static std::optional<Json> try_parse(std::string_view text, std::string* error = nullptr);

  Type type() const;
  bool is_null() const { return std::holds_alternative<std::monostate>(value_); }
  bool is_bool() const { return std::holds_alternative<bool>(value_); }
  bool is_int() const { return std::holds_alternative<std::int64_t>(value_); }
  bool is_number() const { return is_int() || std::holds_alternative<double>(value_); }
  bool is_string() const { return std::holds_alternative<std::string>(value_); }
  bool is_array() const { return std::holds_alternative<Array>(value_); }
  bool is_object() const { return std::holds_alternative<Object>(value_); }

  // Typed access; throws ks::Error(Status::invalid_argument) on a type mismatch.
  bool as_bool() const;
  std::int64_t as_int() const;  // also accepts a double with an integral value
  double as_number() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Object access. find() returns nullptr when absent or not an object.
  const Json* find(std::string_view key) const;
  Json* find(std::string_view key);
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Inserts a null member when absent; turns a null value into an object.
  Json& operator[](std::string_view key);
  Json& operator[](const char* key) { return (*this)[std::string_view(key)]; }
  // Read-only lookup: a null value when absent (never inserts).
  const Json& operator[](std::string_view key) const;
  const Json& operator[](const char* key) const { return (*this)[std::string_view(key)]; }
  // Throws ks::Error(Status::not_found) naming the key when absent.
  const Json& at(std::string_view key) const;
  bool erase(std::string_view key);

  // Array access.
  const Json& operator[](std::size_t i) const;
  Json& operator[](std::size_t i);
  const Json& operator[](int i) const { return (*this)[static_cast<std::size_t>(i)]; }
  Json& operator[](int i) { return (*this)[static_cast<std::size_t>(i)]; }
  void push_back(Json v);  // turns a null value into an array

  // Members of an object or elements of an array; 0 for scalars.
  std::size_t size() const;
  bool empty() const { return size() == 0; }

  // Lookups with a default when the key is absent or null; a present value of
  // the wrong type throws, so a typo in a file is never silently ignored.
  std::string get_string(std::string_view key, std::string_view def = {}) const;
  double get_number(std::string_view key, double def = 0.0) const;
  std::int64_t get_int(std::string_view key, std::int64_t def = 0) const;
  bool get_bool(std::string_view key, bool def = false) const;

  // Serializes. indent < 0: compact single line; otherwise pretty-printed.
  std::string dump(int indent = -1) const;

  bool operator==(const Json& other) const { return value_ == other.value_; }
  bool operator!=(const Json& other) const { return !(*this == other); }

 private:
  std::variant<std::monostate, bool, std::int64_t, double, std::string, Array, Object> value_;
};

KS_API const char* json_type_name(Json::Type type);

KS_NAMESPACE_END
