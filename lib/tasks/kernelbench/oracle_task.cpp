// Oracle tasks for the problems of a KernelBench checkout. Building one asks
// the oracle script to describe the problem file (a one-shot run of
// `python3 kernelbench_oracle.py --describe FILE`); evaluating it starts the
// oracle as a long-lived process (lib/eval/oracle_client.hpp).
#include "tasks/kernelbench/oracle_task.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "ksearch/error.hpp"
#include "tasks/kernelbench/level1.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

namespace ks::tasks::kernelbench {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

fs::path oracle_script() {
  if (std::string e = env("KSEARCH_KERNELBENCH_ORACLE"); !e.empty()) return e;
  std::error_code ec;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&oracle_script), &info) && info.dli_fname) {
    fs::path lib = fs::absolute(info.dli_fname).parent_path();
    for (const fs::path& p : {lib / ".." / "libexec" / "ksearch" / "kernelbench_oracle.py",
                              lib / ".." / ".." / "libexec" / "ksearch" / "kernelbench_oracle.py"})
      if (fs::is_regular_file(p, ec)) return fs::weakly_canonical(p, ec);
  }
#ifdef KS_SOURCE_KERNELBENCH_ORACLE
  if (fs::is_regular_file(KS_SOURCE_KERNELBENCH_ORACLE, ec)) return KS_SOURCE_KERNELBENCH_ORACLE;
#endif
  throw Error(Status::not_found,
              "cannot find kernelbench_oracle.py (looked in libexec/ksearch beside libksearch and in the source "
              "tree); set $KSEARCH_KERNELBENCH_ORACLE");
}

// "kernelbench/level1/19_ReLU" -> {1, "19_ReLU"}; nullopt for other names.
std::optional<std::pair<int, std::string>> parse_name(const std::string& name) {
  constexpr std::string_view prefix = "kernelbench/level";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  auto slash = name.find('/', prefix.size());
  if (slash == std::string::npos || slash == prefix.size()) return std::nullopt;
  int level = 0;
  for (std::size_t i = prefix.size(); i < slash; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    level = level * 10 + (name[i] - '0');
  }
  std::string stem = name.substr(slash + 1);
  if (stem.empty() || stem.find('/') != std::string::npos || stem.find("..") != std::string::npos) return std::nullopt;
  return std::pair{level, stem};
}

// The folder holding level1, level2, ...: DIR/KernelBench (a repository
// checkout) or DIR itself.
fs::path levels_root(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir / "KernelBench" / "level1", ec)) return dir / "KernelBench";
  return dir;
}

std::string tolerance_version() {
  std::string v = env("KSEARCH_KERNELBENCH_VERSION");
  return v.empty() ? "head" : v;
}

// KernelBench's fp32 tolerance: 1e-4 since #80 (HEAD), 1e-2 in v0 and v0.1.
double fp32_tolerance(const std::string& version) {
  if (version == "head") return 1e-4;
  if (version == "v0" || version == "v0.1") return 1e-2;
  throw Error(Status::invalid_argument,
              fmt::format("$KSEARCH_KERNELBENCH_VERSION=\"{}\": expected head (fp32 tolerance 1e-4), v0.1 or v0 "
                          "(1e-2)",
                          version));
}

Json describe(const std::vector<std::string>& argv, const fs::path& problem) {
  util::SpawnOptions o;
  o.argv = argv;
  o.argv.push_back("--describe");
  o.argv.push_back(problem.string());
  util::CommandResult r;
  try {
    r = util::run_command(o, "", 600);
  } catch (const Error& e) {
    throw Error(Status::not_found,
                fmt::format("cannot run the KernelBench oracle ({}): {}; set $KSEARCH_PYTHON to a Python "
                            "interpreter with PyTorch",
                            argv.at(0), e.what()));
  }
  if (!r.ok()) {
    // The script prints one JSON line {"error", "status"} for the failures it understands.
    std::string message = r.err.empty() ? r.out : r.err;
    Status status = Status::invalid_argument;
    auto nl = r.out.find('\n');
    if (auto j = Json::try_parse(r.out.substr(0, nl)); j && j->is_object() && j->contains("error")) {
      message = j->get_string("error");
      if (j->get_string("status") == "no_pytorch") status = Status::not_found;
    } else if (message.size() > 4000) {
      message = "..." + message.substr(message.size() - 4000);
    }
    if (r.exit_code == 127 && r.err.empty() && r.out.empty())
      message = fmt::format("{} could not be started", argv.at(0));
    throw Error(status, fmt::format("KernelBench problem {}: {} ({})", problem.string(), message, r.describe()));
  }
  auto j = Json::try_parse(r.out);
  if (!j || !j->is_object())
    throw Error(Status::subprocess,
                fmt::format("KernelBench oracle: --describe {} printed no JSON: {}", problem.string(), r.out.substr(0, 500)));
  return *j;
}

std::vector<std::int64_t> int_list(const Json& j) {
  std::vector<std::int64_t> out;
  for (const auto& v : j.as_array()) out.push_back(v.as_int());
  return out;
}

}  // namespace

std::vector<std::string> kernelbench_oracle_argv() {
  std::string python = env("KSEARCH_PYTHON");
  return {python.empty() ? "python3" : python, oracle_script().string()};
}

TaskSpec make_kernelbench_oracle_spec(const fs::path& kernelbench_dir, const std::string& name) {
  auto parsed = parse_name(name);
  if (!parsed)
    throw Error(Status::invalid_argument,
                fmt::format("\"{}\" is not a KernelBench task name (expected kernelbench/level<N>/<problem>)", name));
  const auto& [level, stem] = *parsed;
  const fs::path root = levels_root(kernelbench_dir);
  const fs::path file = root / fmt::format("level{}", level) / (stem + ".py");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw Error(Status::not_found, fmt::format("KernelBench task \"{}\": no problem file {} (the checkout is {})", name,
                                               file.string(), kernelbench_dir.string()));
  const std::vector<std::string> argv = kernelbench_oracle_argv();
  const Json d = describe(argv, fs::absolute(file));
  const std::string version = tolerance_version();
  const double tol = fp32_tolerance(version);

  TaskSpec spec;
  spec.name = name;
  spec.description = fmt::format("KernelBench level {} problem {} (PyTorch reference oracle)", level, stem);
  spec.languages = {Language::cuda, Language::cpp};
  // Dimensions: the problem file's integer constants, in file order.
  std::vector<std::pair<std::string, std::int64_t>> consts;
  for (const auto& c : d.at("constants").as_array()) {
    const std::string n = c.as_array().at(0).as_string();
    const std::int64_t v = c.as_array().at(1).as_int();
    if (v > 0) consts.push_back({n, v});
  }
  for (const auto& [k, v] : consts) spec.dims.push_back(k);
  // An extent is named after the first constant with its value, so launch
  // plans (and native solutions of the same problem) can use the names.
  auto shape_of = [&](const Json& s) {
    std::vector<std::string> out;
    for (std::int64_t e : int_list(s)) {
      std::string text = std::to_string(e);
      if (e != 1)
        for (const auto& [k, v] : consts)
          if (v == e) {
            text = k;
            break;
          }
      out.push_back(text);
    }
    return out;
  };
  auto add = [&](const Json& t, bool is_output) {
    TensorSpec ts;
    ts.name = t.get_string("name");
    ts.shape = shape_of(t.at("shape"));
    ts.is_output = is_output;
    spec.tensors.push_back(ts);
  };
  for (const auto& t : d.at("inputs").as_array()) add(t, false);
  for (const auto& t : d.at("parameters").as_array()) add(t, false);
  for (const auto& t : d.at("outputs").as_array()) add(t, true);
  WorkloadSpec w;
  w.name = "kernelbench";
  for (const auto& [k, v] : consts) w.dims[k] = v;
  w.seed = 42;  // KernelBench's seed_num; trial seeds derive from it as KernelBench draws them
  w.benchmark = true;
  spec.workloads.push_back(w);
  spec.tolerance.atol = tol;
  spec.tolerance.rtol = tol;
  spec.tolerance.rule = Tolerance::Rule::out_relative;
  spec.tolerance.nan_policy = Tolerance::NanPolicy::must_match;
  spec.oracle = Json::obj({{"argv", Json(Json::Array(argv.begin(), argv.end()))},
                           {"kind", "kernelbench"},
                           {"problem", fs::absolute(file).string()},
                           {"problem_sha256", d.get_string("sha256")},
                           {"version", version},
                           {"precision", "fp32"}});
  std::string note =
      "Inputs and parameters are exactly KernelBench's: generated by the problem's get_inputs() after "
      "set_seed(trial seed), the module built after set_seed(42), in float32.";
  const std::string source = d.get_string("source");
  spec.prompts[Language::cuda] = kernelbench_prompt(spec, source, true, note);
  spec.prompts[Language::cpp] = spec.prompts[Language::cuda];
  // Python candidates are ModelNew modules, built from get_init_inputs() as
  // KernelBench builds them, where that is a literal another process can read.
  if (const Json* init = d.find("init_inputs"); init && init->is_string()) {
    spec.python = kernelbench_python_convention(init->as_string(), static_cast<int>(d.at("inputs").as_array().size()),
                                                false);
    for (Language l : {Language::triton, Language::python}) {
      spec.languages.push_back(l);
      spec.prompts[l] = kernelbench_python_prompt(spec, source, true, note, l);
    }
  }
  // A native problem of the same name shares its tensor and dimension names:
  // its straightforward kernel is a starting point here too.
  if (level == 1)
    if (const Level1Problem* p = find_level1_problem(stem)) spec.starting_points.push_back(p->start);
  return spec;
}

std::unique_ptr<Task> load_kernelbench_oracle_task(const std::string& name,
                                                   const std::filesystem::path& kernelbench_dir) {
  const std::string dir = kernelbench_dir.empty() ? env("KSEARCH_KERNELBENCH") : kernelbench_dir.string();
  if (dir.empty() || !parse_name(name)) return nullptr;
  TaskSpec spec = make_kernelbench_oracle_spec(dir, name);
  spec.validate();
  return std::make_unique<SpecTask>(std::move(spec));
}

std::vector<TaskInfo> list_kernelbench_problems(const std::filesystem::path& kernelbench_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path root = kernelbench_dir;
  if (fs::is_directory(root / "KernelBench" / "level1", ec)) root /= "KernelBench";
  if (!fs::is_directory(root, ec))
    throw Error(Status::not_found, fmt::format("KernelBench checkout {} is not a folder", kernelbench_dir.string()));
  std::vector<TaskInfo> out;
  for (int level = 1; level <= 9; ++level) {
    const fs::path dir = root / fmt::format("level{}", level);
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::pair<int, std::string>> stems;  // by problem id, then name
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (!e.is_regular_file() || e.path().extension() != ".py") continue;
      const std::string stem = e.path().stem().string();
      stems.push_back({std::atoi(stem.c_str()), stem});
    }
    std::sort(stems.begin(), stems.end());
    for (const auto& [id, stem] : stems) {
      TaskInfo info;
      info.name = fmt::format("kernelbench/level{}/{}", level, stem);
      info.description = fmt::format("KernelBench level {} problem {} (PyTorch reference oracle)", level, id);
      info.source = (dir / (stem + ".py")).string();
      info.languages = {Language::cuda, Language::cpp, Language::triton, Language::python};
      info.targets = Json::object();
      out.push_back(std::move(info));
    }
  }
  if (out.empty())
    throw Error(Status::not_found, fmt::format("{} holds no KernelBench problems (no level1/*.py in it or in its "
                                               "KernelBench folder)",
                                               kernelbench_dir.string()));
  return out;
}

}  // namespace ks::tasks::kernelbench
