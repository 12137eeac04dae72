#include "engine/wandb_logger.hpp"

#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string_view>

#include "eval/python/python_program.hpp"
#include "ksearch/error.hpp"
#include "ksearch/log.hpp"

extern char** environ;

namespace ks::engine {

namespace embedded {
extern const std::string_view tracking_py;  // bindings/python/ksearch/tracking.py (CMakeLists.txt)
}

namespace fs = std::filesystem;

namespace {

// Exit status of `tracking.py --in-run` when W&B is unavailable: it has said so itself.
constexpr int kExitWandbUnavailable = 3;

// What Python, pip-installed packages and W&B's HTTP client need; nothing of
// the run's own settings (its LLM key, its headers) is among them.
constexpr std::string_view kPassed[] = {
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
    "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "VIRTUAL_ENV", "CONDA_PREFIX",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "NETRC", "RUN_NAME",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"};

// Run under `python -c`: the program text is argv[1]. Executed in __main__'s
// own namespace, so dataclasses and `from __future__` work as in a file; the
// working directory is dropped from sys.path, so no module there shadows one
// the logger imports.
constexpr const char* kBootstrap =
    "import sys\n"
    "if sys.path[:1] == ['']:\n"
    "    del sys.path[0]\n"
    "exec(compile(sys.argv.pop(1), 'ksearch/tracking.py', 'exec'), globals())\n";

void warn(const std::string& text) {
  log_message(LogLevel::warning, "--wandb: " + text);
}

}  // namespace

std::map<std::string, std::string> WandbLogger::environment(const std::vector<std::string>& env,
                                                            const std::vector<std::string>& never) {
  std::map<std::string, std::string> out;
  for (const std::string& kv : env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = kv.substr(0, eq);
    bool pass = name.rfind("WANDB_", 0) == 0;
    for (std::string_view p : kPassed) pass = pass || name == p;
    for (const std::string& n : never) pass = pass && name != n;
    if (pass) out[name] = kv.substr(eq + 1);
  }
  out.emplace("WANDB_SILENT", "true");
  return out;
}

WandbLogger::WandbLogger(const WandbOptions& options, const fs::path& run_dir, const std::vector<std::string>& never)
    : options_(options), run_dir_(fs::absolute(run_dir)) {
  const std::string python = eval::python::python_interpreter();
  if (python.empty()) {
    warn("no Python to run the W&B logger ($KSEARCH_PYTHON, else python3 in PATH); the search goes on without W&B");
    return;
  }
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  util::SpawnOptions o;
  o.argv = {python, "-c", kBootstrap, std::string(embedded::tracking_py), run_dir_.string(), "--in-run", "--poll", "1"};
  if (!options.project.empty()) o.argv.insert(o.argv.end(), {"--project", options.project});
  if (!options.run_name.empty()) o.argv.insert(o.argv.end(), {"--name", options.run_name});
  o.clear_env = true;
  o.env_set = environment(env, never);
  o.pipe_stdin = true;  // the run holds it open: its end is the logger's signal to finish
  o.pipe_stdout = false;
  o.pipe_stderr = false;
  o.stdout_to_stderr = true;  // W&B's messages must not mix with the program's stdout (--json)
  // Its own process group (the terminal's Ctrl-C stops the run, which then
  // ends the logger after its last rounds), and gone with this process.
  o.die_with_parent_process = true;
  try {
    process_ = std::make_unique<util::Subprocess>(o);
  } catch (const Error& e) {
    warn(fmt::format("cannot start the W&B logger ({}); the search goes on without W&B", e.what()));
  }
}

WandbLogger::~WandbLogger() {
  try {
    finish();
  } catch (...) {
    // A destructor must not throw; the logger is gone either way.
  }
}

void WandbLogger::finish() {
  if (!process_) return;
  process_->close_stdin();
  const auto ms = [](double s) { return std::chrono::milliseconds(static_cast<long long>(s * 1000)); };
  std::optional<int> status = process_->wait_for(ms(options_.finish_timeout_s));
  if (!status) {
    warn(fmt::format("W&B had not finished {:g} s after the run ended; stopped it (what it wrote is in W&B's local "
                     "folder: `wandb sync` uploads it)",
                     options_.finish_timeout_s));
    ::kill(process_->pid(), SIGTERM);
    status = process_->wait_for(std::chrono::seconds(10));
    if (!status) status = process_->kill_and_reap();
  }
  util::CommandResult r;
  util::decode_wait_status(*status, r);
  if (!r.signaled && r.exit_code != 0 && r.exit_code != kExitWandbUnavailable)
    warn(fmt::format("the W&B logger ended with {}; the run is complete, log it with `python3 -m ksearch.tracking "
                     "{} --wandb --ksearch-names`",
                     r.describe(), run_dir_.string()));
  process_.reset();  // kills what is left of its process group (W&B's service) and reaps it
}

void check_wandb_options(const WandbOptions& options) {
  if (!(options.finish_timeout_s >= 0 && options.finish_timeout_s <= 86400))
    throw Error(Status::invalid_argument,
                fmt::format("wandb.finish_timeout_s is {}; give seconds from 0 to 86400", options.finish_timeout_s));
}

std::unique_ptr<WandbLogger> start_wandb_logger(const WandbOptions& options, const fs::path& run_dir,
                                                const std::string& llm_key_env) {
  if (!options.enabled) return nullptr;
  std::vector<std::string> never = {"KSEARCH_API_KEY", "OPENAI_API_KEY"};
  if (!llm_key_env.empty()) never.push_back(llm_key_env);
  return std::make_unique<WandbLogger>(options, run_dir, never);
}

}  // namespace ks::engine
