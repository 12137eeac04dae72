// Reading JSON objects field by field with errors that name the object and
// the field, and a check that rejects unknown (usually misspelt) fields.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/json.hpp"

namespace ks::util {

class FieldReader {
 public:
  // `what` names the object in errors, e.g. "tensor" or "workload \"w0\"".
  FieldReader(const Json& j, std::string what);

  void set_context(std::string what) { what_ = std::move(what); }
  const std::string& context() const { return what_; }

  const std::string& required_string(std::string_view key) const;
  const Json::Array& required_array(std::string_view key) const;
  const Json& required_object(std::string_view key) const;
  std::int64_t required_int(std::string_view key) const;
  double required_number(std::string_view key) const;
  std::int64_t optional_int(std::string_view key, std::int64_t def) const;
  double optional_number(std::string_view key, double def) const;

  // Throws when the object has a field outside `known`, listing the known ones.
  void allow(std::initializer_list<std::string_view> known) const;

 private:
  const Json& j_;
  std::string what_;
};

// A list of strings as a JSON array, and back. Null or absent reads as an
// empty list; anything but an array of strings is an error naming `what`
// (e.g. "evaluation options: \"only_workloads\"").
Json string_array(const std::vector<std::string>& v);
std::vector<std::string> string_list(const Json* j, std::string_view what);

}  // namespace ks::util
