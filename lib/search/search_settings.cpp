// The settings table (ksearch/search_settings.hpp): the components' rows in
// the manifest's order, setting by name, bounds, and the table as JSON and
// as docs/options.md.
#include "ksearch/search_settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "search/settings_rows.hpp"
#include "ksearch/error.hpp"

KS_NAMESPACE_BEGIN

const char* to_string(SettingType t) {
  switch (t) {
    case SettingType::deduce: return "deduce";
    case SettingType::integer: return "integer";
    case SettingType::number: return "number";
    case SettingType::boolean: return "boolean";
    case SettingType::bytes: return "bytes";
    case SettingType::text: return "text";
    case SettingType::object: return "object";
  }
  return "?";
}

namespace {

void insert_after(std::vector<SettingSpec>& rows, std::string_view key, std::vector<SettingSpec> more) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const SettingSpec& s) { return s.key == key; });
  if (it != rows.end()) ++it;
  rows.insert(it, std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

std::vector<SettingSpec> all_rows() {
  // The manifest's order, as manifests have always been written.
  std::vector<SettingSpec> rows = core::search_setting_rows();
  insert_after(rows, "max_rounds", core::world_model_setting_rows());
  std::vector<SettingSpec> after_parallel = core::tune_setting_rows();
  for (auto& s : core::evolve_setting_rows()) after_parallel.push_back(std::move(s));
  insert_after(rows, "parallel", std::move(after_parallel));
  for (auto& s : core::greedy_setting_rows()) rows.push_back(std::move(s));
  for (const auto& s : rows)
    if (!s.get || !s.set) throw Error(Status::internal, fmt::format("setting {} has no field", s.key));
  return rows;
}

std::string number_text(double v, SettingType t) {
  if (t != SettingType::number && std::abs(v) < 9e15) return fmt::format("{}", static_cast<std::int64_t>(v));
  return fmt::format("{}", v);
}

std::string bounds_text(const SettingSpec& s) {
  const bool lo = std::isfinite(s.min), hi = std::isfinite(s.max);
  const std::string note = s.min_note.empty() ? "" : " (" + s.min_note + ")";
  if (lo && hi) return fmt::format("between {}{} and {}", number_text(s.min, s.type), note, number_text(s.max, s.type));
  if (lo) return fmt::format(">= {}{}", number_text(s.min, s.type), note);
  if (hi) return fmt::format("<= {}", number_text(s.max, s.type));
  return "";
}

}  // namespace

const std::vector<SettingSpec>& search_settings() {
  static const std::vector<SettingSpec> rows = all_rows();
  return rows;
}

const SettingSpec* find_search_setting(std::string_view key) {
  for (const auto& s : search_settings())
    if (s.key == key) return &s;
  return nullptr;
}

void check_setting_bounds(const SettingSpec& s, const Json& value) {
  if (!s.has_bounds() || !value.is_number()) return;
  const double v = value.as_number();
  if (!(v >= s.min && v <= s.max))  // NaN fails too: a NaN budget would silently mean "unlimited"
    throw Error(Status::invalid_argument, fmt::format("{} must be {}{}, is {}", s.key,
                                                      s.type == SettingType::number ? "a number " : "",
                                                      bounds_text(s), value.dump()));
}

void set_search_setting(SearchConfig& c, std::string_view key, const Json& value) {
  const SettingSpec* s = find_search_setting(key);
  if (!s || !s->settable) {
    std::string known;
    for (const auto& r : search_settings())
      if (r.settable) known += (known.empty() ? "" : ", ") + r.key;
    throw Error(Status::invalid_argument, fmt::format("\"{}\" is not a search setting (known: {})", key, known));
  }
  const Json before = s->get(c);
  s->set(c, value);
  try {
    check_setting_bounds(*s, s->get(c));
  } catch (const Error&) {
    s->set(c, before);  // a refused value leaves the setting as it was
    throw;
  }
}

Json search_settings_json() {
  Json out = Json::array();
  for (const auto& s : search_settings()) {
    if (!s.settable) continue;
    out.push_back(Json::obj({{"key", s.key},
                             {"component", s.component},
                             {"type", to_string(s.type)},
                             {"default", s.default_value()},
                             {"min", std::isfinite(s.min) ? Json(s.min) : Json()},
                             {"max", std::isfinite(s.max) ? Json(s.max) : Json()},
                             {"help", s.help},
                             {"flag", s.flag.empty() ? Json() : Json("--" + s.flag)},
                             {"replay", s.replay}}));
  }
  return out;
}

std::string search_settings_markdown() {
  std::string out =
      "# Search settings\n\n"
      "<!-- Generated from the settings table (ksearch/search_settings.hpp); the test_settings test\n"
      "     fails when this file is not what the table gives: KS_UPDATE_DOCS=1 ctest -R test_settings\n"
      "     rewrites it. -->\n\n"
      "Every knob of a search, by the name the run folder's manifest (`config`), `ksearch replay`'s\n"
      "setting changes (`config_changes`), the C ABI (`ks_search_options.config_json`,\n"
      "`ks_search_option_bounds`) and the Python options (`ksearch.SearchOptions(wm_propose_every=0)`)\n"
      "use, with the `ksearch run` flag that sets it. Settings marked *replay* can be changed by\n"
      "`ksearch replay RUN --FLAG VALUE`. Each component keeps its rows beside its code.\n";
  std::vector<std::string> components;
  for (const auto& s : search_settings())
    if (s.settable && std::find(components.begin(), components.end(), s.component) == components.end())
      components.push_back(s.component);
  for (const auto& component : components) {
    out += fmt::format("\n## {}\n\n| name | type | default | bounds | flag | help |\n|---|---|---|---|---|---|\n",
                       component);
    for (const auto& s : search_settings()) {
      if (!s.settable || s.component != component) continue;
      std::string def = s.default_text.empty() ? s.default_value().dump() : s.default_text;
      std::string flag = s.flag.empty() ? ""
                                        : fmt::format("`--{}`{}{}", s.flag, s.negated ? " (sets false)" : "",
                                                      s.replay ? " (replay)" : "");
      std::string help = s.help;
      for (std::size_t p = help.find('|'); p != std::string::npos; p = help.find('|', p + 2)) help.replace(p, 1, "\\|");
      out += fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", s.key, to_string(s.type), def, bounds_text(s), flag,
                         help);
    }
  }
  return out;
}

KS_NAMESPACE_END
