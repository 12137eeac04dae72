// The command policy: an external program answers on stdout.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "ksearch/error.hpp"
#include "ksearch/llm_policies.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "util/process.hpp"

KS_NAMESPACE_BEGIN
namespace {

// Environment strings above this size make exec fail (Linux MAX_ARG_STRLEN
// is 128 KiB); longer system messages need the json input.
constexpr std::size_t kMaxEnvValue = 120u << 10;

// The end of stderr is where programs say what went wrong.
std::string tail_excerpt(const std::string& s, std::size_t max = 2000) {
  std::size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  std::size_t e = s.find_last_not_of(" \t\r\n") + 1;
  std::string_view v(s.data() + b, e - b);
  if (v.size() <= max) return std::string(v);
  return "... " + std::string(v.substr(v.size() - max));
}

class CommandPolicy final : public LlmPolicy {
 public:
  explicit CommandPolicy(CommandConfig cfg) : cfg_(std::move(cfg)) {
    if (cfg_.argv.empty() || cfg_.argv[0].empty())
      throw Error(Status::invalid_argument, "command policy: no program given");
    if (!(cfg_.timeout_s > 0)) throw Error(Status::invalid_argument, "command policy: timeout_s must be positive");
    if (cfg_.max_concurrency < 1)
      throw Error(Status::invalid_argument, "command policy: max_concurrency must be at least 1");
  }

  LlmResponse complete(const LlmRequest& request) override {
    util::SpawnOptions opts;
    opts.argv = cfg_.argv;
    opts.env_set["KSEARCH_PROMPT_KIND"] = to_string(request.kind);
    std::string input;
    if (cfg_.input == CommandConfig::Input::json) {
      input = Json::obj({{"kind", to_string(request.kind)}, {"system", request.system}, {"prompt", request.prompt}})
                  .dump();
      opts.env_unset.push_back("KSEARCH_SYSTEM_PROMPT");
    } else {
      if (request.system.size() > kMaxEnvValue)
        throw Error(Status::invalid_argument,
                    fmt::format("command policy: the system message ({} bytes) is too long for "
                                "$KSEARCH_SYSTEM_PROMPT; use the json input",
                                request.system.size()));
      opts.env_set["KSEARCH_SYSTEM_PROMPT"] = request.system;
      input = request.prompt;
    }
    // A program that cannot start throws: that is configuration, not a bad answer.
    util::CommandResult r =
        util::run_command(std::move(opts), input, cfg_.timeout_s, cfg_.max_output_bytes, &cancelled_);
    if (r.cancelled) throw Error(Status::cancelled, describe() + ": cancelled; the program was killed");

    LlmResponse resp;
    resp.model = describe();
    resp.usage.attempts = 1;
    resp.usage.wall_s = r.wall_s;
    std::string err = tail_excerpt(r.err);
    if (!r.ok()) {
      resp.error = fmt::format("{}: {}{}{}", describe(), r.describe(), err.empty() ? "" : "; stderr: ", err);
      resp.text = r.out;
    } else if (r.out.find_first_not_of(" \t\r\n") == std::string::npos) {
      resp.error = fmt::format("{}: the program printed no answer{}{}", describe(), err.empty() ? "" : "; stderr: ",
                               err);
    } else if (r.output_truncated) {
      resp.error = fmt::format("{}: the answer is larger than 16 MiB", describe());
    } else {
      resp.ok = true;
      resp.text = std::move(r.out);
      resp.finish_reason = "stop";
    }
    std::lock_guard lock(mu_);
    total_ += resp.usage;
    return resp;
  }

  // Up to max_concurrency programs at once, the answers in request order.
  // A program that cannot start (or a cancel) ends the batch with that error
  // once the running ones have returned.
  std::vector<LlmResponse> complete_batch(const std::vector<LlmRequest>& requests) override {
    const std::size_t workers =
        std::min(requests.size(), static_cast<std::size_t>(std::max(1, cfg_.max_concurrency)));
    if (workers <= 1) return LlmPolicy::complete_batch(requests);
    std::vector<LlmResponse> out(requests.size());
    std::atomic<std::size_t> next{0};
    std::exception_ptr first_error;
    std::mutex error_mu;
    auto work = [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < requests.size();) {
        try {
          out[i] = complete(requests[i]);
        } catch (...) {
          std::lock_guard lock(error_mu);
          if (!first_error) first_error = std::current_exception();
          next.store(requests.size());  // start no more
        }
      }
    };
    std::vector<std::thread> threads;
    for (std::size_t t = 1; t < workers; ++t) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
    if (first_error) std::rethrow_exception(first_error);
    return out;
  }

  std::string describe() const override { return "command:" + cfg_.argv[0]; }

  void cancel() override { cancelled_.store(true); }

  // The program must exist and be executable before any prompt is built.
  std::string check_ready() override {
    const std::string& prog = cfg_.argv[0];
    auto runnable = [](const std::filesystem::path& p) {
      std::error_code ec;
      return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
    };
    bool found = false;
    if (prog.find('/') != std::string::npos) {
      found = runnable(prog);
    } else if (const char* path = std::getenv("PATH")) {
      std::string dirs = path;
      for (std::size_t p = 0; p <= dirs.size() && !found;) {
        std::size_t c = dirs.find(':', p);
        if (c == std::string::npos) c = dirs.size();
        found = runnable(std::filesystem::path(c > p ? dirs.substr(p, c - p) : ".") / prog);
        p = c + 1;
      }
    }
    if (!found)
      throw Error(Status::invalid_argument,
                  fmt::format("command policy: \"{}\" is not an executable program{}", prog,
                              prog.find('/') != std::string::npos ? "" : " on $PATH"));
    return {};
  }

  LlmUsage total_usage() const override {
    std::lock_guard lock(mu_);
    return total_;
  }

 private:
  CommandConfig cfg_;
  mutable std::mutex mu_;
  LlmUsage total_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

std::unique_ptr<LlmPolicy> make_command_policy(const CommandConfig& config) {
  return std::make_unique<CommandPolicy>(config);
}

std::unique_ptr<LlmPolicy> make_command_policy(const std::vector<std::string>& argv, double timeout_s) {
  CommandConfig c;
  c.argv = argv;
  c.timeout_s = timeout_s;
  return make_command_policy(c);
}

KS_NAMESPACE_END
