// How a component writes its rows of the settings table
// (ksearch/search_settings.hpp): field_setting binds a row to the
// SearchConfig field it reads and writes, and takes its type from it.
//
//   field_setting([](SearchConfig& c) -> int& { return c.evolve.islands; },
//                 {.key = "evolve_islands", .component = "evolve", .min = 1, .max = 64,
//                  .help = "...", .flag = "evolve-islands", .placeholder = "N", .replay = true});
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ksearch/error.hpp"
#include "ksearch/search_settings.hpp"

namespace ks::core {

// A JSON value as the field's type; throws Error(invalid_argument) naming `key`.
template <typename T>
T setting_value(const Json& v, const std::string& key) {
  auto bad = [&](const char* what) {
    throw Error(Status::invalid_argument, fmt::format("{} must be {}, is {}", key, what, v.dump()));
  };
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) bad("a string");
    return v.as_string();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_bool()) bad("true or false");
    return v.as_bool();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) bad("a number");
    return static_cast<T>(v.as_number());
  } else {
    static_assert(std::is_integral_v<T>);
    if (!v.is_number()) bad("an integer");
    std::int64_t i = 0;
    try {
      i = v.as_int();
    } catch (const Error&) {
      bad("an integer");
    }
    if constexpr (sizeof(T) < sizeof(std::int64_t))
      if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max()) bad(fmt::format("an integer between {} and {}", std::numeric_limits<T>::min(), std::numeric_limits<T>::max()).c_str());
    return static_cast<T>(i);
  }
}

template <typename Ref>
SettingSpec field_setting(Ref ref, SettingSpec s) {
  using T = std::remove_reference_t<std::invoke_result_t<Ref, SearchConfig&>>;
  if (s.type == SettingType::deduce)
    s.type = std::is_same_v<T, bool>             ? SettingType::boolean
             : std::is_floating_point_v<T>        ? SettingType::number
                                                  : SettingType::integer;
  s.get = [ref](const SearchConfig& c) {
    // Read only: the reference is not written through.
    const T& v = ref(const_cast<SearchConfig&>(c));
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return Json(static_cast<std::int64_t>(v));
    else return Json(v);
  };
  s.set = [ref, key = s.key](SearchConfig& c, const Json& v) { ref(c) = setting_value<T>(v, key); };
  return s;
}

// The components' rows, each kept beside its code, in the manifest's order.
std::vector<SettingSpec> search_setting_rows();       // lib/search/strategy.cpp: budget, warm start
std::vector<SettingSpec> world_model_setting_rows();  // lib/search/world_model_strategy.cpp
std::vector<SettingSpec> tune_setting_rows();         // lib/search/tune/tune_strategy.cpp
std::vector<SettingSpec> evolve_setting_rows();       // lib/search/evolve_strategy.cpp
std::vector<SettingSpec> greedy_setting_rows();       // lib/search/greedy_strategy.cpp

}  // namespace ks::core
