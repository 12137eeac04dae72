#include "eval/host/host_compiler.hpp"

#include <fmt/format.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/param_space.hpp"
#include "eval/host/call_plan.hpp"
#include "eval/host/host_device.hpp"
#include "eval/include_check.hpp"
#include "eval/log_cap.hpp"
#include "ksearch/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/sha256.hpp"

namespace ks::eval::host {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUnitName = "ks_candidate.cpp";
constexpr std::size_t kMaxLogBytes = kMaxCompilerLogBytes;

bool is_header(const std::string& path) {
  auto ext = fs::path(path).extension().string();
  return ext == ".h" || ext == ".hpp" || ext == ".hh" || ext == ".hxx" || ext == ".inc" || ext == ".cuh";
}

// Source paths become files in a scratch folder: they must stay inside it.
void check_source_path(const std::string& path) {
  fs::path p(path);
  bool ok = !path.empty() && p.is_relative() && path.find('\\') == std::string::npos;
  for (const auto& part : p) ok = ok && part != ".." && part != ".";
  if (!ok || path == kUnitName)
    throw CompileError(fmt::format("source file name \"{}\" is not allowed (use a plain relative name "
                                   "such as \"kernel.cpp\")",
                                   path),
                       "");
}

std::string resolve_compiler(const std::string& configured) {
  if (!configured.empty()) return configured;
  for (const char* var : {"KSEARCH_CXX", "CXX"})
    if (const char* v = std::getenv(var); v && *v) return v;
  return "c++";
}

// `c++ --version`, cached per compiler: part of the artifact key.
std::string compiler_identity(const std::string& compiler) {
  static std::mutex m;
  static std::map<std::string, std::string> cache;
  std::lock_guard lock(m);
  auto it = cache.find(compiler);
  if (it != cache.end()) return it->second;
  std::string id;
  try {
    util::SpawnOptions o{.argv = {compiler, "--version"}};
    o.clear_env = true;  // like every process near a candidate: no credentials
    o.env_set = isolation::candidate_environment(false);
    auto r = util::run_command(o, "", 30);
    id = r.ok() ? r.out : "";
  } catch (const Error&) {
  }
  if (id.empty())
    throw Error(Status::not_found,
                fmt::format("the host C++ compiler \"{}\" cannot be run (set $KSEARCH_CXX or $CXX to a "
                            "working compiler)",
                            compiler));
  cache[compiler] = id;
  return id;
}

// Drops the compiler's "In file included from ks_candidate.cpp" chatter and
// caps the size, keeping the start (the first error matters most) and the end.
std::string clean_log(const std::string& raw) {
  std::istringstream in(raw);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("In file included from ks_candidate.cpp", 0) == 0) continue;
    out += line + "\n";
  }
  return cap_log(std::move(out), kMaxLogBytes);
}

std::string first_error_line(const std::string& log) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find("error") != std::string::npos) return line;
  auto nl = log.find('\n');
  return log.substr(0, nl);
}

class HostCompiler final : public Compiler {
 public:
  explicit HostCompiler(HostCompilerOptions o)
      : compiler_(resolve_compiler(o.compiler)),
        default_cache_(std::move(o.cache_dir)),
        sandbox_(o.sandbox),
        cancel_(o.cancel) {}

  Artifact compile(const CompileRequest& req) override {
    const auto start = std::chrono::steady_clock::now();
    if (req.solution.language != Language::cpp)
      throw CompileError(fmt::format("the host compiler builds cpp solutions, not {}",
                                     to_string(req.solution.language)),
                         "");
    if (req.solution.sources.empty()) throw CompileError("the solution has no source files", "");
    if (std::string refused = check_includes(req.solution.sources); !refused.empty())
      throw CompileError(refused, refused);
    HostPlan plan;
    try {
      plan = HostPlan::parse(req.solution.launch_plan, req.tensors);
    } catch (const Error& e) {
      throw CompileError(e.what(), e.what());
    }
    std::string unit = "// Translation unit built by libksearch: the candidate's sources, then the call shims.\n"
                       "#include <cstddef>\n#include <cstdint>\n#include <stdint.h>\n";
    for (const auto& f : req.solution.sources) {
      check_source_path(f.path);
      if (!is_header(f.path)) unit += fmt::format("#include \"{}\"\n", f.path);
    }
    unit += generate_shims(plan);

    std::vector<std::string> flags = host_base_flags();
    util::Vars params(req.params.begin(), req.params.end());
    for (auto& d : core::param_defines(params)) flags.push_back(std::move(d));
    for (const auto& f : req.flags) flags.push_back(f);

    fs::path dir = !req.cache_dir.empty() ? fs::path(req.cache_dir)
                   : !default_cache_.empty() ? fs::path(default_cache_)
                                             : util::default_cache_dir() / "host";
    util::make_dirs(dir);
    const std::string key = artifact_key(flags, req.solution, unit);
    Artifact a;
    a.language = Language::cpp;
    a.path = (dir / (key + ".so")).string();
    for (const HostCall* c : plan.all_calls()) a.kernels.push_back(c->shim);
    std::error_code ec;
    if (fs::exists(a.path, ec)) {
      a.cache_hit = true;
      fs::path log_path = dir / (key + ".log");
      if (fs::exists(log_path, ec)) a.log = util::read_file(log_path);
    } else {
      a.log = build(req, plan, unit, flags, dir, key, a.path);
    }
    a.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return a;
  }

 private:
  // The key covers everything that changes the object code.
  std::string artifact_key(const std::vector<std::string>& flags, const Solution& solution,
                           const std::string& unit) const {
    util::Sha256 h;
    auto field = [&](std::string_view s) {
      h.update(std::to_string(s.size()) + ":");
      h.update(s);
    };
    field("ksearch-host-artifact-v1");
    field(compiler_);
    field(compiler_identity(compiler_));
    field(cpu_facts().model);
    field(cpu_facts().isa_flags);
    for (const auto& f : flags) field(f);
    for (const auto& f : solution.sources) {
      field(f.path);
      field(f.content);
    }
    field(unit);
    return h.hex_digest().substr(0, 32);
  }

  // Compiles in a private folder so concurrent compilations never meet; the
  // finished object is renamed to `path`, so readers see all of it or none.
  // Returns the compiler's log; throws CompileError with it.
  std::string build(const CompileRequest& req, const HostPlan& plan, const std::string& unit,
                    const std::vector<std::string>& flags, const fs::path& dir, const std::string& key,
                    const std::string& path) {
    std::string tmpl = (dir / ("build-" + key.substr(0, 8) + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data()))
      throw Error(Status::io, fmt::format("cannot create a build folder in {}", dir.string()));
    fs::path work(tmpl);
    struct Cleanup {
      fs::path p;
      ~Cleanup() {
        std::error_code e;
        fs::remove_all(p, e);
      }
    } cleanup{work};
    // Scratch files, deleted after the build: no need for atomic, synced writes.
    auto write_scratch = [](const fs::path& file, const std::string& content) {
      util::make_dirs(file.parent_path());
      std::ofstream out(file, std::ios::binary);
      out << content;
      if (!out) throw Error(Status::io, fmt::format("cannot write {}", file.string()));
    };
    for (const auto& f : req.solution.sources) write_scratch(work / f.path, f.content);
    write_scratch(work / kUnitName, unit);

    // The compiler reads the candidate's sources: it sees only its build
    // folder and the system, with the candidate environment.
    std::vector<std::string> argv{compiler_};
    for (const auto& f : flags) argv.push_back(f);
    argv.insert(argv.end(), {"-o", "candidate.so", kUnitName});
    const bool confined = sandbox_ && sandbox_->active();
    util::SpawnOptions spawn;
    spawn.argv = confined ? sandbox_->wrap(argv, isolation::SandboxView{.read_only = isolation::program_folders(compiler_),
                                                                        .read_write = {work},
                                                                        .gpu = false,
                                                                        .cwd = work,
                                                                        .die_with_parent = true})
                          : argv;
    spawn.cwd = work.string();
    spawn.clear_env = true;
    spawn.env_set = isolation::candidate_environment(confined);
    spawn.new_session = true;
    double timeout = req.timeout_s > 0 ? req.timeout_s : 1e9;
    auto r = util::run_command(spawn, "", timeout, 16u << 20, cancel_);
    if (r.cancelled) throw Error(Status::cancelled, "the compilation was cancelled; the compiler was killed");
    std::string log = clean_log(r.err + r.out);
    if (r.timed_out)
      throw CompileError(fmt::format("compilation did not finish within {:.0f} s", req.timeout_s), log);
    if (!r.ok()) {
      if (log.find(kUnitName) != std::string::npos) {
        // The error is in a generated shim: the plan and the functions disagree.
        log += "\nnote: the call plan calls:\n";
        for (const HostCall* c : plan.all_calls()) log += "  " + describe_call(*c) + "\n";
        log += "note: tensors are passed as const T* (inputs) or T* (outputs, scratch); other "
               "arguments as int64_t unless typed ({\"f32\": expr}, ...)\n";
      }
      throw CompileError(fmt::format("compilation failed ({}): {}", r.describe(), first_error_line(log)), log);
    }
    util::write_file_atomic(dir / (key + ".log"), log);
    std::error_code ec;
    fs::rename(work / "candidate.so", path, ec);
    if (ec) throw Error(Status::io, fmt::format("cannot move the compiled candidate to {}: {}", path, ec.message()));
    return log;
  }

  std::string compiler_;
  std::string default_cache_;
  const isolation::Sandbox* sandbox_;
  const std::atomic<bool>* cancel_;
};

}  // namespace

std::vector<std::string> host_base_flags() {
  // -fvisibility=hidden: only the shims are exported. --no-undefined turns a
  // declared-but-missing function into a compile error instead of a load failure.
  return {"-std=c++20", "-O3", "-march=native", "-shared", "-fPIC", "-pthread",
          "-fvisibility=hidden", "-Wl,--no-undefined"};
}

std::unique_ptr<Compiler> make_host_compiler(const HostCompilerOptions& options) {
  return std::make_unique<HostCompiler>(options);
}

}  // namespace ks::eval::host
