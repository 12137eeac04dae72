// The evaluation options and device facts (ksearch/evaluator.hpp), and the
// default behaviour of the Evaluator interface (ksearch/sys/evaluator.hpp).
#include "ksearch/error.hpp"
#include "ksearch/evaluator.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "util/json_fields.hpp"

#include <fmt/format.h>

KS_NAMESPACE_BEGIN

// ---------------------------------------------------------------------------
// Evaluator

std::vector<EvalResult> Evaluator::evaluate_batch(const Task& task,
                                                  const std::vector<Solution>& solutions) {
  std::vector<EvalResult> out;
  out.reserve(solutions.size());
  for (const auto& s : solutions) out.push_back(evaluate(task, s));
  return out;
}

Json EvalOptions::to_json() const {
  Json j = Json::obj({{"run_tests", run_tests},
                    {"run_benchmarks", run_benchmarks},
                    {"only_workloads", util::string_array(only_workloads)},
                    {"seeds_per_workload", seeds_per_workload},
                    {"recheck_after_timing", recheck_after_timing},
                    {"compile_timeout_s", compile_timeout_s},
                    {"run_timeout_s", run_timeout_s},
                    {"min_time_per_workload_s", min_time_per_workload_s},
                    {"max_time_per_workload_s", max_time_per_workload_s},
                    {"min_reps", min_reps},
                    {"max_reps", max_reps},
                    {"target_rel_stderr", target_rel_stderr},
                    {"flush_l2", flush_l2},
                    {"timing", to_string(timing)},
                    {"time_reference", time_reference},
                    {"pair_reference", pair_reference},
                    {"extra_compile_flags", util::string_array(extra_compile_flags)}});
  if (!baseline_latencies.is_null()) j["baseline_latencies"] = baseline_latencies;
  return j;
}

EvalOptions EvalOptions::from_json(const Json& j) {
  EvalOptions o;
  if (!j.is_object()) throw Error(Status::invalid_argument, "evaluation options must be a JSON object");
  o.run_tests = j.get_bool("run_tests", o.run_tests);
  o.run_benchmarks = j.get_bool("run_benchmarks", o.run_benchmarks);
  o.only_workloads = util::string_list(j.find("only_workloads"), "evaluation options: \"only_workloads\"");
  o.seeds_per_workload = static_cast<int>(j.get_int("seeds_per_workload", o.seeds_per_workload));
  o.recheck_after_timing = j.get_bool("recheck_after_timing", o.recheck_after_timing);
  o.compile_timeout_s = j.get_number("compile_timeout_s", o.compile_timeout_s);
  o.run_timeout_s = j.get_number("run_timeout_s", o.run_timeout_s);
  o.min_time_per_workload_s = j.get_number("min_time_per_workload_s", o.min_time_per_workload_s);
  o.max_time_per_workload_s = j.get_number("max_time_per_workload_s", o.max_time_per_workload_s);
  o.min_reps = static_cast<int>(j.get_int("min_reps", o.min_reps));
  o.max_reps = static_cast<int>(j.get_int("max_reps", o.max_reps));
  o.target_rel_stderr = j.get_number("target_rel_stderr", o.target_rel_stderr);
  o.flush_l2 = j.get_bool("flush_l2", o.flush_l2);
  o.timing = parse_timing_mode(j.get_string("timing", to_string(o.timing)));
  o.time_reference = j.get_bool("time_reference", o.time_reference);
  o.pair_reference = j.get_bool("pair_reference", o.pair_reference);
  o.extra_compile_flags = util::string_list(j.find("extra_compile_flags"), "evaluation options: \"extra_compile_flags\"");
  if (const Json* b = j.find("baseline_latencies"); b && !b->is_null()) o.baseline_latencies = *b;
  return o;
}

Json DeviceInfo::to_json() const {
  Json j = Json::obj({{"backend", backend},
                      {"name", name},
                      {"arch", arch},
                      {"count", count},
                      {"peak_flops", peak_flops},
                      {"peak_bytes_per_s", peak_bytes_per_s},
                      {"l2_bytes", l2_bytes},
                      {"memory_bytes", memory_bytes}});
  // Only when known, so a device described before these existed keeps its JSON.
  if (compute_units > 0) j["compute_units"] = compute_units;
  if (clock_ghz > 0) j["clock_ghz"] = clock_ghz;
  if (!features.empty()) j["features"] = features;
  if (!caches.empty()) j["caches"] = caches;
  if (!timing.empty()) j["timing"] = timing;
  return j;
}

DeviceInfo DeviceInfo::from_json(const Json& j) {
  DeviceInfo d;
  if (!j.is_object()) return d;
  d.backend = j.get_string("backend");
  d.name = j.get_string("name");
  d.arch = j.get_string("arch");
  d.count = static_cast<int>(j.get_int("count"));
  d.peak_flops = j.get_number("peak_flops");
  d.peak_bytes_per_s = j.get_number("peak_bytes_per_s");
  d.l2_bytes = j.get_int("l2_bytes");
  d.memory_bytes = j.get_int("memory_bytes");
  d.compute_units = static_cast<int>(j.get_int("compute_units"));
  d.clock_ghz = j.get_number("clock_ghz");
  d.features = j.get_string("features");
  d.caches = j.get_string("caches");
  d.timing = j.get_string("timing");
  return d;
}

namespace {

std::string bytes_text(std::int64_t b) {
  if (b >= (std::int64_t{1} << 30)) return fmt::format("{:.0f} GiB", static_cast<double>(b) / (1 << 30));
  if (b >= (std::int64_t{1} << 20)) return fmt::format("{:.3g} MiB", static_cast<double>(b) / (1 << 20));
  return fmt::format("{} KiB", b >> 10);
}

}  // namespace

std::string DeviceInfo::describe() const {
  const bool gpu = backend == "cuda";
  std::string out = name.empty() ? (backend.empty() ? std::string("unknown device") : backend) : name;
  if (!arch.empty()) out += fmt::format(" ({})", arch);
  out += gpu ? ", a GPU" : backend == "host" ? ", the host CPU" : "";
  std::string facts;
  auto add = [&](const std::string& f) { facts += (facts.empty() ? "" : "; ") + f; };
  if (compute_units > 0)
    add(fmt::format("{} {}", compute_units, gpu ? "streaming multiprocessors (SMs)" : "hardware threads"));
  if (gpu && count > 1) add(fmt::format("{} such GPUs evaluate candidates in parallel (each kernel runs on one)", count));
  if (clock_ghz > 0) add(fmt::format("clock up to {:.2f} GHz", clock_ghz));
  if (!features.empty()) add("instruction-set extensions: " + features);
  if (!caches.empty()) add("caches: " + caches);
  else if (l2_bytes > 0) add(fmt::format("{}: {}", gpu ? "L2 cache" : "last-level cache", bytes_text(l2_bytes)));
  if (memory_bytes > 0) add(fmt::format("{} {}", bytes_text(memory_bytes), gpu ? "of device memory" : "of memory"));
  if (!facts.empty()) out += "\n" + facts;
  if (!timing.empty()) out += "\nTiming: " + timing;
  return out;
}

KS_NAMESPACE_END
