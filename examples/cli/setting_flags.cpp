// The search's settings as flags: each row of the settings table
// (ksearch/search_settings.hpp) with a flag is a `ksearch run` option, and
// those marked for replay are `ksearch replay` options; the help, the type
// and the bounds come from the row.
#include <fmt/format.h>

#include <charconv>

#include "search_cli.hpp"
#include "ksearch/error.hpp"
#include "ksearch/search_settings.hpp"

namespace ks::cli {

namespace {

Json flag_value(const Args& a, const SettingSpec& s) {
  switch (s.type) {
    case SettingType::boolean: return Json(!s.negated);
    case SettingType::number: return Json(a.get_double(s.flag, 0));
    case SettingType::bytes: return Json(static_cast<std::int64_t>(a.get_size(s.flag, 0)));
    default: break;
  }
  const std::string text = a.get(s.flag);
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw Error(Status::invalid_argument, fmt::format("--{} needs an integer, got \"{}\"", s.flag, text));
  return Json(v);
}

}  // namespace

std::vector<OptionSpec> setting_options(bool for_replay) {
  std::vector<OptionSpec> out;
  for (const auto& s : search_settings()) {
    if (s.flag.empty() || !s.settable || (for_replay && !s.replay)) continue;
    std::string def = for_replay ? "as recorded"
                      : s.type == SettingType::boolean ? ""
                      : !s.default_text.empty()        ? s.default_text
                                                       : s.default_value().dump();
    out.push_back({s.flag, s.type == SettingType::boolean ? "" : s.placeholder, s.help, def, false});
  }
  return out;
}

void apply_setting_flags(const Args& a, SearchConfig& c, Json* changes) {
  for (const auto& s : search_settings()) {
    if (s.flag.empty() || !s.settable || !a.has(s.flag) || (changes && !s.replay)) continue;
    Json v = flag_value(a, s);
    // Checked here too, so that the error names the flag.
    try {
      check_setting_bounds(s, v);
    } catch (const Error& e) {
      throw Error(Status::invalid_argument, fmt::format("--{}: {}", s.flag, e.what()));
    }
    if (changes) (*changes)[s.key] = v;
    else set_search_setting(c, s.key, v);
  }
}

}  // namespace ks::cli
