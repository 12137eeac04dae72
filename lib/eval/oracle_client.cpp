#include "eval/oracle_client.hpp"

#include <fmt/format.h>

#include <math.h>  // ks_rng.h calls math functions unqualified

#include "core/rng/ks_rng.h"
#include "ksearch/error.hpp"

namespace ks::eval {
namespace {

namespace fs = std::filesystem;

// Importing PyTorch and creating a CUDA context take seconds, more on a cold
// disk; generating KernelBench's large inputs on the CPU takes seconds per seed.
constexpr double kStartTimeoutS = 300;
constexpr double kPrepareTimeoutS = 3600;
constexpr double kBaselineTimeoutS = 3600;

std::vector<std::string> oracle_args(const TaskSpec& task, const std::string& device, const fs::path& cache_dir) {
  const Json& argv = task.oracle.at("argv");
  std::vector<std::string> args;
  for (std::size_t i = 1; i < argv.size(); ++i) args.push_back(argv[i].as_string());
  args.insert(args.end(), {"--serve", "--problem", task.oracle.get_string("problem"), "--device", device,
                           "--cache-dir", cache_dir.string()});
  return args;
}

std::filesystem::path oracle_program(const TaskSpec& task) {
  if (task.oracle.is_null())
    throw Error(Status::invalid_argument, fmt::format("task \"{}\" has no reference oracle", task.name));
  return task.oracle.at("argv")[0].as_string();
}

}  // namespace

OracleProcess::OracleProcess(const TaskSpec& task, std::string device, const fs::path& cache_dir)
    : task_(task.name),
      device_(std::move(device)),
      // The oracle runs the user's problem file: trusted code that needs the
      // user's Python, so it gets their environment, less credentials.
      proc_(oracle_program(task), oracle_args(task, device_, cache_dir), nullptr, {}, WorkerProcess::Code::trusted) {
  try {
    hello_ = proc_.wait_hello(kStartTimeoutS);
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("the reference oracle of task \"{}\" ({}) did not start: {}", task_,
                                        oracle_program(task).string(), e.what()));
  }
}

template <class Expected>
Expected OracleProcess::request(const msg::Request& message, double timeout_s) {
  proc_.send(message);
  Json m;
  const auto deadline = WorkerProcess::Clock::now() +
                        std::chrono::duration_cast<WorkerProcess::Clock::duration>(std::chrono::duration<double>(timeout_s));
  switch (proc_.receive(m, deadline)) {
    case WorkerProcess::Received::message: break;
    case WorkerProcess::Received::exited:
      throw Error(Status::subprocess,
                  fmt::format("the reference oracle of task \"{}\" died: {}", task_, proc_.kill_and_describe()));
    case WorkerProcess::Received::timed_out:
      throw Error(Status::timeout, fmt::format("the reference oracle of task \"{}\" did not answer within {:.0f} s: {}",
                                               task_, timeout_s, proc_.kill_and_describe()));
    case WorkerProcess::Received::cancelled:  // not asked for: no cancel flag is passed
      throw Error(Status::cancelled, "the reference oracle's request was cancelled");
  }
  msg::Reply reply;
  try {
    reply = msg::reply_from_json(m);
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("the reference oracle of task \"{}\": {}", task_, e.what()));
  }
  if (const auto* failed = std::get_if<msg::Failed>(&reply))
    throw Error(failed->status, fmt::format("the reference oracle of task \"{}\": {}", task_, failed->message));
  auto* expected = std::get_if<Expected>(&reply);
  if (!expected)
    throw Error(Status::subprocess, fmt::format("the reference oracle of task \"{}\" sent \"{}\" instead of \"{}\"",
                                                task_, msg::name_of(reply), Expected::kName));
  return std::move(*expected);
}

std::map<std::string, std::vector<OracleSeed>> OracleProcess::prepare(const TaskSpec& task,
                                                                      const std::vector<std::string>& workloads,
                                                                      int seeds, const std::string& handover) {
  std::map<std::string, std::vector<OracleSeed>> out;
  for (const auto& name : workloads) {
    const WorkloadSpec* w = task.find_workload(name);
    if (!w) throw Error(Status::invalid_argument, fmt::format("task \"{}\" has no workload \"{}\"", task.name, name));
    msg::Prepare prepare{name, {}, handover};
    for (int k = 0; k <= seeds; ++k)
      prepare.seeds.push_back({k, ks_rng_derive_seed(w->seed, static_cast<ks_u64>(k))});
    out[name] = request<msg::Prepared>(prepare, kPrepareTimeoutS).seeds;
  }
  return out;
}

Json OracleProcess::baseline(const std::vector<std::string>& modes, int warmup, int trials) {
  return request<msg::Baselines>(msg::Baseline{modes, warmup, trials}, kBaselineTimeoutS).modes;
}

}  // namespace ks::eval
