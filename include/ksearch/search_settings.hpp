// The search's settings as data: one row per knob of SearchConfig, with its
// name, type, default, bounds, help and `ksearch run` flag. Each component
// keeps its rows beside its code (the world model's in
// lib/search/world_model_strategy.cpp, evolve's in evolve_strategy.cpp, ...;
// docs/options.md lists them all). Everything that names a setting reads
// these rows: SearchConfig's JSON codec (the manifest's "config") and its
// validation, replay's config_changes, the CLI's flags and their help, the C
// ABI's settings by name (ks_search_options.config_json and the
// ks_search_option_* queries), the Python options and docs/options.md. A new
// knob is one row plus the code that uses it.
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"
#include "ksearch/strategy.hpp"

KS_NAMESPACE_BEGIN

enum class SettingType {
  deduce,   // (rows only) from the field the row reads and writes
  integer,
  number,   // a finite double unless its bounds say otherwise
  boolean,
  bytes,    // an integer count of bytes; the CLI takes "4M", "512K"
  text,     // a name (strategy, language, model); not settable by name
  object,   // a nested JSON object (a warm start's solution); not settable by name
};

KS_API const char* to_string(SettingType t);

struct KS_API SettingSpec {
  std::string key;        // the name everywhere but the CLI: manifest, config_changes, C, Python
  std::string component;  // "search", "world_model", "tune", "evolve", "greedy"
  SettingType type = SettingType::deduce;
  double min = -std::numeric_limits<double>::infinity();  // inclusive bounds, checked by validate
  double max = std::numeric_limits<double>::infinity();
  std::string min_note;   // said beside the lower bound in errors ("automatic" for 0)
  std::string help;       // one or two sentences
  std::string flag;       // `ksearch run --FLAG`; "" for none
  std::string placeholder;   // the flag's value in --help ("N", "S"); "" for a boolean
  std::string default_text;  // --help's default when the value does not say it ("unlimited")
  bool negated = false;   // a boolean whose flag sets it to false (--no-starting-point)
  bool replay = false;    // `ksearch replay --FLAG` changes it
  bool settable = true;   // false: the manifest's only (read and written, never set by name)
  // What a manifest without the key reads as (a run made before the setting
  // existed), given the settings read before it; empty: the default.
  std::function<Json(const SearchConfig& read_so_far)> when_absent;
  // The field, as JSON and back; set checks the type (not the bounds).
  std::function<Json(const SearchConfig&)> get;
  std::function<void(SearchConfig&, const Json&)> set;

  Json default_value() const { return get(SearchConfig{}); }
  bool has_bounds() const { return min > -std::numeric_limits<double>::infinity() ||
                                   max < std::numeric_limits<double>::infinity(); }
};

// Every row, in the manifest's order.
KS_API const std::vector<SettingSpec>& search_settings();
// The row named `key`; nullptr for none.
KS_API const SettingSpec* find_search_setting(std::string_view key);
// Sets one settable setting by name, checking its type and bounds; throws
// ks::Error(invalid_argument) naming the key (and the known keys for an
// unknown one).
KS_API void set_search_setting(SearchConfig& c, std::string_view key, const Json& value);
// Throws ks::Error(invalid_argument) when `value` is outside the row's bounds.
KS_API void check_setting_bounds(const SettingSpec& s, const Json& value);
// The settable rows as a JSON array of {key, component, type, default, min,
// max, help, flag, replay} (for the C ABI and the Python options).
KS_API Json search_settings_json();
// docs/options.md's text, generated from the rows.
KS_API std::string search_settings_markdown();

KS_NAMESPACE_END
