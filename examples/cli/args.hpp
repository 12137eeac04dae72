// A small declarative command-line parser: each option has a name, a value
// placeholder, a default and a sentence of help, so `--help` explains every
// option and a mistyped one is named in the error.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ks::cli {

struct OptionSpec {
  std::string name;         // "max-rounds" (used as --max-rounds)
  std::string value;        // placeholder, e.g. "N"; empty for a flag
  std::string help;         // one or two sentences
  std::string default_text; // shown in --help
  bool repeatable = false;  // may be given several times
  char short_name = 0;      // e.g. 'o' for -o; 0 for none
};

class Args {
 public:
  Args(std::string command, std::string usage, std::string summary, std::vector<OptionSpec> options);

  // Parses argv (after the subcommand). Returns false and sets error() on a
  // problem (unknown option with the closest known one, missing value).
  bool parse(int argc, char** argv);
  // Another spelling of an option (an older name, or another command's):
  // --ALIAS is read as --NAME, and --help names it beside NAME.
  Args& alias(const std::string& alias, const std::string& name);
  const std::string& error() const { return error_; }
  bool help_requested() const { return has("help"); }
  std::string help_text() const;

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& def = "") const;
  std::vector<std::string> get_all(const std::string& name) const;
  // Typed getters throw ks::Error(Status::invalid_argument) naming the option.
  int get_int(const std::string& name, int def) const;
  std::vector<int> get_int_all(const std::string& name) const;  // a repeatable integer option
  double get_double(const std::string& name, double def) const;
  // A size in bytes: "4194304", "4M", "512K", "2G" (binary units; B, iB accepted).
  std::uint64_t get_size(const std::string& name, std::uint64_t def) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // The option's name as the command line spelled it (an alias, if one was used).
  std::string spelled(const std::string& name) const;

 private:
  const OptionSpec* find(const std::string& name) const;
  std::string command_, usage_, summary_;
  std::vector<OptionSpec> options_;
  std::map<std::string, std::string> aliases_;  // alias -> option name
  std::map<std::string, std::string> spelled_;  // option name -> the alias it was given by
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  std::string error_;
};

}  // namespace ks::cli
