// `--wandb` (SearchOptions::wandb): the run logs itself to Weights & Biases
// under K-Search's names through a child process, the ksearch.tracking
// program (bindings/python/ksearch/tracking.py, built into the library) run
// by $KSEARCH_PYTHON with --in-run. It reads the run folder the run writes
// anyway, like `ksearch show` does, and its standard input is a pipe the run
// holds: closed when the run ends (or the process dies), which tells it to
// log the last rounds and finish. Why a child and not a library: the library
// never loads Python, and W&B (missing, unreachable, a slow upload) must never
// slow down or fail a search; the same program logs a finished run later.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/search.hpp"
#include "util/process.hpp"

namespace ks::engine {

class WandbLogger {
 public:
  // Starts the logger for `run_dir`, whose manifest exists. When it cannot
  // start (no Python), says so in one line on stderr and does nothing more.
  // `never`: environment variables it must not get (the LLM key's).
  WandbLogger(const WandbOptions& options, const std::filesystem::path& run_dir, const std::vector<std::string>& never);
  // finish()
  ~WandbLogger();
  WandbLogger(const WandbLogger&) = delete;
  WandbLogger& operator=(const WandbLogger&) = delete;

  // Tells the logger the run has ended and waits up to finish_timeout_s for
  // it; then stops it. A logger that failed is one line on stderr.
  void finish();

  // The logger's environment, built from `env` (NAME=VALUE strings): a few
  // variables Python and W&B need (PATH, HOME, locale, PYTHONPATH, proxies,
  // CA bundles, RUN_NAME) and every WANDB_* one, less `never`. WANDB_SILENT is
  // "true" unless set: the logger prints its own one-line status.
  static std::map<std::string, std::string> environment(const std::vector<std::string>& env,
                                                        const std::vector<std::string>& never);

 private:
  WandbOptions options_;
  std::filesystem::path run_dir_;
  std::unique_ptr<util::Subprocess> process_;
};

// Refuses settings that cannot work (a negative or NaN finish timeout), before the run starts.
void check_wandb_options(const WandbOptions& options);

// A logger when options.enabled, else null.
std::unique_ptr<WandbLogger> start_wandb_logger(const WandbOptions& options, const std::filesystem::path& run_dir,
                                                const std::string& llm_key_env);

}  // namespace ks::engine
