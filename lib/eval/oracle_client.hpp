// The parent's side of a reference oracle (TaskSpec::oracle): a separate
// process, started once per evaluator and task through the same spawning
// code as the workers, speaking the workers' framed protocol. It supplies the
// inputs and reference outputs of every input seed, and measures the
// baselines the candidates are compared with (docs/evaluation.md,
// "Reference oracles").
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "eval/messages.hpp"
#include "eval/worker_client.hpp"
#include "ksearch/task.hpp"

namespace ks::eval {

class OracleProcess {
 public:
  // Starts the oracle of `task` on `device` ("cpu" or "cuda:N") and waits
  // for it. Throws ks::Error with the oracle's own status and words when it
  // cannot start: Status::not_found for a missing PyTorch or interpreter,
  // invalid_argument for a broken problem file.
  OracleProcess(const TaskSpec& task, std::string device, const std::filesystem::path& cache_dir);

  // The inputs and reference outputs of seed indices 0 .. seeds (the last
  // one is the re-check after timing) of each workload, handed over as
  // `handover` ("cuda_ipc" or "file").
  std::map<std::string, std::vector<OracleSeed>> prepare(const TaskSpec& task,
                                                         const std::vector<std::string>& workloads, int seeds,
                                                         const std::string& handover);

  // Baseline timings of the reference module, {"eager": {"mean_ms", ...},
  // "compile": {...} or {"error": ...}} (msg::Baselines::modes); the oracle
  // caches them per device.
  Json baseline(const std::vector<std::string>& modes, int warmup, int trials);

  const std::string& device() const { return device_; }
  const msg::Hello& hello() const { return hello_; }

 private:
  // Sends `message` and returns the oracle's reply, which must be an Expected.
  template <class Expected>
  Expected request(const msg::Request& message, double timeout_s);

  std::string task_;
  std::string device_;
  WorkerProcess proc_;
  msg::Hello hello_;
};

}  // namespace ks::eval
