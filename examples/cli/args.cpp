#include "args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "ksearch/error.hpp"

namespace ks::cli {

namespace {

// Edit distance, to suggest the option the user probably meant.
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

Args::Args(std::string command, std::string usage, std::string summary, std::vector<OptionSpec> options)
    : command_(std::move(command)), usage_(std::move(usage)), summary_(std::move(summary)),
      options_(std::move(options)) {
  options_.push_back({"help", "", "Show this help and exit.", "", false});
  // Every command takes these two (main reads them before the command runs):
  // how much of the library's log reaches standard error.
  if (!find("quiet"))
    options_.push_back({"quiet", "", "Print less: of the library's own lines, only warnings and errors.", "", false});
  options_.push_back({"verbose", "", "Print more: the library's debug lines too (with --quiet, --quiet wins).", "",
                      false});
}

const OptionSpec* Args::find(const std::string& name) const {
  for (const auto& o : options_)
    if (o.name == name) return &o;
  return nullptr;
}

Args& Args::alias(const std::string& alias, const std::string& name) {
  if (!find(name) || find(alias))
    throw std::logic_error(fmt::format("ksearch {}: alias --{} of --{}", command_, alias, name));
  aliases_[alias] = name;
  return *this;
}

bool Args::parse(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h") a = "--help";
    if (a.size() == 2 && a[0] == '-' && a[1] != '-')
      for (const auto& o : options_)
        if (o.short_name == a[1]) a = "--" + o.name;
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    if (auto al = aliases_.find(name); al != aliases_.end()) {
      spelled_[al->second] = name;  // errors about its value name it as typed
      name = al->second;
    }
    const OptionSpec* o = find(name);
    if (!o) {
      std::string best;
      std::size_t best_d = 4;
      for (const auto& c : options_) {
        std::size_t d = distance(name, c.name);
        if (d < best_d) {
          best_d = d;
          best = c.name;
        }
      }
      error_ = fmt::format("unknown option --{}{}; see `ksearch {} --help`", name,
                           best.empty() ? "" : fmt::format(" (did you mean --{}?)", best), command_);
      return false;
    }
    if (o->value.empty()) {
      if (inline_value) {
        error_ = fmt::format("option --{} takes no value", name);
        return false;
      }
      values_[name].push_back("1");
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= argc) {
        error_ = fmt::format("option --{} needs a value ({})", name, o->value);
        return false;
      }
      value = argv[++i];
    }
    if (!o->repeatable && values_.count(name)) {
      error_ = fmt::format("option --{} is given twice", name);
      return false;
    }
    values_[name].push_back(value);
  }
  return true;
}

std::string Args::spelled(const std::string& name) const {
  auto it = spelled_.find(name);
  return it == spelled_.end() ? name : it->second;
}

std::string Args::get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second.back();
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

namespace {

int to_int(const std::string& name, const std::string& v) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < -2147483647L || x > 2147483647L)
    throw Error(Status::invalid_argument, fmt::format("--{} needs an integer, got \"{}\"", name, v));
  return static_cast<int>(x);
}

}  // namespace

int Args::get_int(const std::string& name, int def) const {
  if (!has(name)) return def;
  return to_int(spelled(name), get(name));
}

std::vector<int> Args::get_int_all(const std::string& name) const {
  std::vector<int> out;
  for (const auto& v : get_all(name)) out.push_back(to_int(spelled(name), v));
  return out;
}

double Args::get_double(const std::string& name, double def) const {
  if (!has(name)) return def;
  std::string v = get(name);
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  // strtod also reads "inf" and "nan": no option means either, and neither
  // survives the trip through the run's JSON manifest (both become null).
  if (v.empty() || *end != '\0' || !std::isfinite(x))
    throw Error(Status::invalid_argument, fmt::format("--{} needs a number, got \"{}\"", spelled(name), v));
  return x;
}

std::uint64_t Args::get_size(const std::string& name, std::uint64_t def) const {
  if (!has(name)) return def;
  const std::string v = get(name);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  std::string unit(end ? end : "");
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();  // "MB", "MiB" -> "M", "MI"
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  double scale = 0;
  if (unit.empty()) scale = 1;
  else if (unit == "K") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  if (v.empty() || end == v.c_str() || scale == 0 || !std::isfinite(x) || x < 1 || x * scale > 9.0e18)
    throw Error(Status::invalid_argument,
                fmt::format("--{} needs a size such as 4M, 512K or 2G (binary units), got \"{}\"", spelled(name), v));
  return static_cast<std::uint64_t>(x * scale);
}

std::string Args::help_text() const {
  std::string out = fmt::format("Usage: {}\n\n{}\n\nOptions:\n", usage_, summary_);
  for (const auto& o : options_) {
    std::string head = std::string(o.short_name ? fmt::format("  -{}, ", o.short_name) : "  ") + "--" + o.name + (o.value.empty() ? "" : " " + o.value);
    out += head + "\n";
    // Wrap the help text at ~76 columns, indented.
    std::string text = o.help;
    for (const auto& [alias, name] : aliases_)
      if (name == o.name) text += " (Also spelled --" + alias + ".)";
    if (!o.default_text.empty()) text += " Default: " + o.default_text + ".";
    if (o.repeatable) text += " May be repeated.";
    std::string line = "      ";
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t sp = text.find(' ', pos);
      std::string word = text.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
      if (line.size() + word.size() > 78 && line.size() > 6) {
        out += line + "\n";
        line = "      ";
      }
      line += word + " ";
      if (sp == std::string::npos) break;
      pos = sp + 1;
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace ks::cli
