#include "eval/cuda/nvrtc_compiler.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>

#include "eval/cuda/cuda_api.hpp"
#include "eval/include_check.hpp"
#include "eval/log_cap.hpp"
#include "eval/phases.hpp"
#include "ksearch/error.hpp"
#include "util/fs.hpp"
#include "util/sha256.hpp"

namespace ks::eval::cuda {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Bump when the cache entry format or the meaning of a key changes.
constexpr const char* kCacheFormat = "ksearch-cuda-cubin-v1";

// NVRTC keeps one precompiled-header heap per process; compilations that may
// create or replace a header in it run one at a time. Cache writes of one
// process are serialised too (the atomic-write temp name is per process).
std::mutex& pch_mutex() {
  static std::mutex m;
  return m;
}
std::mutex& cache_write_mutex() {
  static std::mutex m;
  return m;
}

// A compilation cancelled at its time limit: reported like any compile
// error, but not cached, since another attempt may finish.
class CompileTimeout : public CompileError {
 public:
  using CompileError::CompileError;
};


bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_header_name(const std::string& path) {
  for (const char* ext : {".h", ".cuh", ".hpp", ".hh", ".inc", ".inl"})
    if (ends_with(path, ext)) return true;
  return false;
}

std::string ltrim(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
  return std::string(s.substr(i));
}

bool blank_or_line_comment(std::string_view rest) {
  std::string t = ltrim(rest);
  return t.empty() || t.rfind("//", 0) == 0;
}

// The leading lines of a file that only include system headers (plus blank
// lines, comments and #pragma once): parameter macros go after them. Returns
// the byte offset and the 1-based line number of the first line after.
std::pair<std::size_t, int> system_include_prefix(const std::string& text) {
  std::size_t pos = 0;
  int line = 1;
  bool in_comment = false;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    std::size_t next = eol == std::string::npos ? text.size() : eol + 1;
    std::string_view raw(text.data() + pos, next - pos);
    while (!raw.empty() && (raw.back() == '\n' || raw.back() == '\r')) raw.remove_suffix(1);
    if (!raw.empty() && raw.back() == '\\') break;  // a continued line: stop, stay simple
    std::string l = ltrim(raw);
    bool ok = false;
    if (in_comment) {
      auto end = l.find("*/");
      if (end == std::string::npos) ok = true;
      else if (blank_or_line_comment(std::string_view(l).substr(end + 2))) ok = true, in_comment = false;
    } else if (blank_or_line_comment(l)) {
      ok = true;
    } else if (l.rfind("/*", 0) == 0) {
      auto end = l.find("*/", 2);
      if (end == std::string::npos) ok = in_comment = true;
      else ok = blank_or_line_comment(std::string_view(l).substr(end + 2));
    } else if (l[0] == '#') {
      std::string d = ltrim(std::string_view(l).substr(1));
      if (d.rfind("include", 0) == 0) ok = ltrim(std::string_view(d).substr(7)).rfind('<', 0) == 0;
      else if (d.rfind("pragma", 0) == 0) ok = ltrim(std::string_view(d).substr(6)).rfind("once", 0) == 0;
    }
    if (!ok) break;
    pos = next;
    ++line;
  }
  if (in_comment) return {0, 1};  // never split inside a comment
  return {pos, line};
}

void hash_field(util::Sha256& h, std::string_view s) {
  std::uint64_t n = s.size();
  h.update(&n, sizeof n);
  h.update(s);
}

// Writes a cache file; a failure (read-only or full disk) costs the cache
// entry, not the compilation.
bool store(const fs::path& path, std::string_view content) {
  std::lock_guard<std::mutex> lock(cache_write_mutex());
  try {
    util::write_file_atomic(path, content);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string first_error_line(const std::string& log) {
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t eol = log.find('\n', pos);
    std::string line = log.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    if (line.find("error") != std::string::npos) return line;
    if (eol == std::string::npos) break;
    pos = eol + 1;
  }
  return {};
}

// NVRTC reports precompiled-header use in the log; the counters take it from
// there and the log a model sees stays about its code.
std::string strip_pch_messages(const std::string& log, bool* created, bool* used) {
  std::string out;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t eol = log.find('\n', pos);
    std::size_t next = eol == std::string::npos ? log.size() : eol + 1;
    std::string_view line(log.data() + pos, next - pos);
    if (line.find("precompiled header file") != std::string_view::npos) {
      if (line.find("creating precompiled header") != std::string_view::npos) *created = true;
      if (line.find("using precompiled header") != std::string_view::npos) *used = true;
    } else {
      out.append(line);
    }
    pos = next;
  }
  return out;
}

// Removes the PCH folders of compile processes that are gone (a process that
// exits normally has NVRTC delete its files; a killed one leaves them).
void remove_stale_pch_dirs(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    long pid = std::strtol(name.c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

std::vector<std::string> name_expressions_of(const LaunchPlan* plan) {
  std::vector<std::string> out;
  if (!plan) return out;
  for (const auto& n : plan->kernel_names())
    if (!is_plain_identifier(n)) out.push_back(n);
  return out;
}

bool is_plain_identifier(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

ProgramSource assemble_source(const std::vector<SourceFile>& files,
                              const std::map<std::string, std::int64_t>& params) {
  if (files.empty()) throw Error(Status::invalid_argument, "the solution has no source files");
  std::vector<const SourceFile*> units;
  ProgramSource out;
  for (const auto& f : files) {
    if (f.path.empty()) throw Error(Status::invalid_argument, "a source file has no name");
    out.headers.emplace_back(f.path, f.content);
    if (!is_header_name(f.path)) units.push_back(&f);
  }
  if (units.empty()) {
    std::string names;
    for (const auto& f : files) names += (names.empty() ? "" : ", ") + f.path;
    throw Error(Status::invalid_argument,
                fmt::format("no .cu file to compile among {} (headers are only compiled where "
                            "included)",
                            names));
  }
  for (const auto& [name, value] : params)
    if (!is_plain_identifier(name))
      throw Error(Status::invalid_argument,
                  fmt::format("tunable parameter \"{}\" is not a valid macro name", name));

  const SourceFile& main = *units.front();
  out.name = main.path;
  if (params.empty() && units.size() == 1) {
    out.text = main.content;
    return out;
  }
  auto [split, line] = system_include_prefix(main.content);
  out.text = main.content.substr(0, split);
  if (!out.text.empty() && out.text.back() != '\n') out.text += '\n';
  if (!params.empty()) {
    // The empty declaration ends NVRTC's header prefix, so the precompiled
    // headers stay valid for every parameter value.
    out.text += ";\n";
    for (const auto& [name, value] : params)
      out.text += value < 0 ? fmt::format("#define {} ({})\n", name, value)
                            : fmt::format("#define {} {}\n", name, value);
    out.text += fmt::format("#line {} \"{}\"\n", line, main.path);
  }
  out.text += main.content.substr(split);
  for (std::size_t i = 1; i < units.size(); ++i) {
    if (!out.text.empty() && out.text.back() != '\n') out.text += '\n';
    out.text += fmt::format("#line 1 \"{}\"\n", units[i]->path);
    out.text += units[i]->content;
  }
  return out;
}

KernelCatalog module_catalog(const std::vector<CubinKernel>& kernels,
                             const std::map<std::string, std::string>& lowered_names) {
  // Shared so the lookup function can outlive this call.
  struct Index {
    std::vector<KernelDesc> descs;
    std::map<std::string, std::size_t> by_name;
  };
  auto index = std::make_shared<Index>();
  KernelCatalog cat;
  auto strip_spaces = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
    return s;
  };
  std::map<std::string, int> base_count;
  for (const auto& k : kernels) ++base_count[strip_spaces(plan_name_of(k.demangled))];
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const auto& k = kernels[i];
    index->descs.push_back(KernelDesc{k.symbol, k.params, 0, 0});
    index->by_name.emplace(k.symbol, i);
    std::string plan = strip_spaces(plan_name_of(k.demangled));
    // A C++-linkage kernel is reachable by its plain name when that is unique.
    if (base_count[plan] == 1) index->by_name.emplace(plan, i);
    cat.names.push_back(plan_name_of(k.demangled));
  }
  for (const auto& [expr, symbol] : lowered_names) {
    auto it = index->by_name.find(symbol);
    if (it != index->by_name.end()) index->by_name[strip_spaces(expr)] = it->second;
  }
  cat.find = [index, strip_spaces](const std::string& name) -> const KernelDesc* {
    auto it = index->by_name.find(strip_spaces(name));
    return it == index->by_name.end() ? nullptr : &index->descs[it->second];
  };
  return cat;
}

// ---------------------------------------------------------------------------
// CudaCompiler

struct CudaCompiler::Outcome {
  std::string cubin;
  std::map<std::string, std::string> lowered_names;
  std::string log;
  std::string pch;  // Artifact::pch
};

CudaCompiler::CudaCompiler(CudaCompilerOptions options) : options_(std::move(options)) {
  nvrtc();  // fail now, with Status::no_device, when NVRTC is missing
}

CudaCompiler::Counters CudaCompiler::counters() const {
  return Counters{compiled_.load(), cache_hits_.load(), pch_created_.load(), pch_used_.load()};
}

std::string CudaCompiler::arch_for(const CompileRequest& request) const {
  if (!request.arch.empty()) return request.arch;
  if (!options_.arch.empty()) return options_.arch;
  return cuda_device_arch(0);
}

std::string CudaCompiler::cache_dir_for(const CompileRequest& request) const {
  if (!request.cache_dir.empty()) return request.cache_dir;
  if (!options_.cache_dir.empty()) return options_.cache_dir;
  return (util::default_cache_dir() / "cuda").string();
}

std::string CudaCompiler::pch_dir_for(const std::string& cache_dir) {
  fs::path root = options_.pch_dir.empty() ? fs::path(cache_dir) / "pch" : fs::path(options_.pch_dir);
  fs::path mine = root / std::to_string(::getpid());
  std::error_code ec;
  if (!fs::exists(mine, ec)) {
    remove_stale_pch_dirs(root);
    util::make_dirs(mine);
  }
  return mine.string();
}

std::vector<std::string> CudaCompiler::nvrtc_options(const CompileRequest& request,
                                                     const std::string& arch) const {
  std::vector<std::string> opts{"-arch=" + arch};
  bool has_std = std::any_of(request.flags.begin(), request.flags.end(), [](const std::string& f) {
    return f.rfind("-std", 0) == 0 || f.rfind("--std", 0) == 0;
  });
  if (!has_std) opts.emplace_back("-std=c++17");
  // Unannotated functions are device code: candidates have no host code.
  opts.emplace_back("-default-device");
  opts.emplace_back("-lineinfo");
  // ptxas reports registers, spills and shared memory per kernel into the log.
  opts.emplace_back("--ptxas-options=-v");
  // ptxas compiles the module's kernels on up to 8 threads. Each kernel's
  // code is the same as on one thread (compared section by section for the
  // TriMul starting kernel); only the cubin's note of the options differs.
  // A fixed count keeps the options, and so the cache keys, the same on
  // every machine. NVRTC's own -split-compile is not used: it splits NVVM,
  // whose output then depends on thread timing (docs/cuda-backend.md).
  opts.emplace_back("--ptxas-options=--split-compile=8");
  for (const auto& dir : toolkit_include_dirs()) opts.push_back("-I" + dir);
  for (const auto& dir : options_.include_dirs) opts.push_back("-I" + dir);
  for (const auto& f : request.flags) opts.push_back(f);
  return opts;
}

CudaCompiler::Outcome CudaCompiler::run_nvrtc(const ProgramSource& src,
                                              const std::vector<std::string>& options,
                                              const std::vector<std::string>& name_exprs,
                                              const std::string& cache_dir, double timeout_s) {
  const NvrtcApi& api = nvrtc();
  std::vector<std::string> all = options;
  bool pch = options_.use_pch && api.nvrtcGetPCHCreateStatus;
  std::string pch_dir;
  if (pch) {
    try {
      pch_dir = pch_dir_for(cache_dir);
    } catch (const Error&) {
      pch = false;  // no writable folder: compile without precompiled headers
    }
  }
  if (pch) {
    all.emplace_back("-pch");
    all.push_back("--pch-dir=" + pch_dir);
    all.emplace_back("-pch-verbose=false");
    // NVRTC warns that a #line directive (ours, after the header prefix)
    // stops it from extending the precompiled prefix; that is intended.
    all.emplace_back("-diag-suppress=20283");
  }
  std::vector<const char*> argv;
  for (const auto& o : all) argv.push_back(o.c_str());
  std::vector<const char*> header_text, header_names;
  for (const auto& [name, text] : src.headers) {
    header_names.push_back(name.c_str());
    header_text.push_back(text.c_str());
  }

  std::unique_lock<std::mutex> lock(pch_mutex(), std::defer_lock);
  if (pch) {
    lock.lock();
    if (pch_heap_wanted_ > 0 && api.nvrtcSetPCHHeapSize) {
      api.nvrtcSetPCHHeapSize(pch_heap_wanted_);  // no program of ours is alive here
      pch_heap_wanted_ = 0;
    }
  }

  nvrtcProgram prog = nullptr;
  check_nvrtc(api.nvrtcCreateProgram(&prog, src.text.c_str(), src.name.c_str(),
                                     static_cast<int>(header_text.size()), header_text.data(),
                                     header_names.data()),
              "nvrtcCreateProgram");
  struct Destroy {
    const NvrtcApi& api;
    nvrtcProgram& p;
    ~Destroy() { api.nvrtcDestroyProgram(&p); }
  } destroy{api, prog};
  for (const auto& e : name_exprs)
    check_nvrtc(api.nvrtcAddNameExpression(prog, e.c_str()), "nvrtcAddNameExpression");

  // NVRTC polls the callback while it works; returning 1 cancels.
  Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(timeout_s));
  if (timeout_s > 0 && api.nvrtcSetFlowCallback) {
    auto cancel = [](void* payload, void*) -> int {
      return Clock::now() > *static_cast<Clock::time_point*>(payload) ? 1 : 0;
    };
    check_nvrtc(api.nvrtcSetFlowCallback(prog, cancel, &deadline), "nvrtcSetFlowCallback");
  }

  nvrtcResult res = api.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  ++compiled_;
  std::size_t log_size = 0;
  std::string raw_log;
  if (api.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    raw_log.resize(log_size);
    api.nvrtcGetProgramLog(prog, raw_log.data());
    raw_log.resize(log_size - 1);  // the terminating NUL
  }
  bool created = false, used = false;
  Outcome out;
  // Capped like the host compiler's: a runaway log would otherwise travel
  // through the protocol, the cache and every prompt.
  out.log = cap_log(strip_pch_messages(raw_log, &created, &used));
  if (created) ++pch_created_;
  if (used) ++pch_used_;
  out.pch = used ? "used" : created ? "created" : "";
  if (pch && api.nvrtcGetPCHCreateStatus(prog) == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED &&
      api.nvrtcGetPCHHeapSizeRequired && api.nvrtcSetPCHHeapSize) {
    // Grow the heap so the next compilation can keep its headers; not now,
    // while this program may still refer to the current heap.
    std::size_t need = 0;
    if (api.nvrtcGetPCHHeapSizeRequired(prog, &need) == NVRTC_SUCCESS && need > 0)
      pch_heap_wanted_ = need + need / 4;
  }

  if (res == NVRTC_ERROR_CANCELLED)
    throw CompileTimeout(fmt::format("compilation exceeded its time limit of {:.1f} s", timeout_s),
                       out.log);
  if (res == NVRTC_ERROR_COMPILATION || res == NVRTC_ERROR_INVALID_OPTION) {
    std::string first = first_error_line(out.log);
    throw CompileError(first.empty() ? fmt::format("NVRTC: {}", api.nvrtcGetErrorString(res))
                                     : "compilation failed: " + first,
                       out.log);
  }
  if (res != NVRTC_SUCCESS)
    throw Error(Status::compile, fmt::format("nvrtcCompileProgram: {} ({}){}",
                                             api.nvrtcGetErrorString(res), api.library,
                                             out.log.empty() ? "" : "\n" + out.log));
  std::size_t size = 0;
  check_nvrtc(api.nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  out.cubin.resize(size);
  check_nvrtc(api.nvrtcGetCUBIN(prog, out.cubin.data()), "nvrtcGetCUBIN");
  for (const auto& e : name_exprs) {
    const char* lowered = nullptr;
    if (api.nvrtcGetLoweredName(prog, e.c_str(), &lowered) == NVRTC_SUCCESS && lowered)
      out.lowered_names[e] = lowered;
  }
  return out;
}

namespace {

// The cache key: everything that changes the cubin.
std::string cache_key(const NvrtcApi& api, const std::string& arch, const std::vector<std::string>& options,
                      const ProgramSource& src, const std::vector<std::string>& name_exprs) {
  util::Sha256 h;
  hash_field(h, kCacheFormat);
  hash_field(h, api.version_string());
  hash_field(h, arch);
  for (const auto& o : options) hash_field(h, o);
  hash_field(h, src.name);
  hash_field(h, src.text);
  for (const auto& [name, text] : src.headers) {
    hash_field(h, name);
    hash_field(h, text);
  }
  for (const auto& e : name_exprs) hash_field(h, "name-expression:" + e);
  return h.hex_digest();
}

// A complete cache entry into `art` and `cubin` (the metadata is written
// last, so its presence marks one); a remembered failure is returned, to be
// thrown. An unreadable entry is compiled again.
std::optional<CompileError> read_cache(const fs::path& meta_path, const fs::path& cubin_path, const fs::path& fail_path,
                                       Artifact& art, std::string& cubin) {
  std::error_code ec;
  if (fs::exists(meta_path, ec) && fs::exists(cubin_path, ec)) {
    try {
      Json meta = Json::parse(util::read_file(meta_path));
      cubin = util::read_file(cubin_path);
      art.log = meta.get_string("log");
      if (const Json* ln = meta.find("lowered_names"); ln && ln->is_object())
        for (const auto& [k, v] : ln->as_object()) art.lowered_names[k] = v.as_string();
      art.cache_hit = true;
    } catch (const Error&) {
      cubin.clear();  // unreadable entry: compile again and overwrite it
    }
  } else if (fs::exists(fail_path, ec)) {
    try {
      Json fail = Json::parse(util::read_file(fail_path));
      return CompileError(fail.get_string("error"), fail.get_string("log"));
    } catch (const Error&) {
      // unreadable entry: compile again
    }
  }
  return std::nullopt;
}

// The module's kernels into `art`, and the plan checked against them:
// every plan name recorded with the symbol it leads to, so a run worker
// needs no lookup rules.
void check_module(const std::string& cubin, const LaunchPlan* plan, Artifact& art) {
  std::vector<CubinKernel> kernels = inspect_cubin(cubin);
  for (const auto& k : kernels) art.kernels.push_back(k.symbol);
  if (!plan) return;
  KernelCatalog cat = module_catalog(kernels, art.lowered_names);
  for (const auto& name : plan->kernel_names())
    if (const KernelDesc* d = cat.find(name)) art.lowered_names[name] = d->symbol;
  try {
    check_plan_against_module(*plan, cat);
  } catch (const Error& e) {
    throw CompileError(e.what(), art.log.empty() ? std::string(e.what()) : std::string(e.what()) + "\n\n" + art.log);
  }
}

}  // namespace

Artifact CudaCompiler::compile(const CompileRequest& request) {
  const auto t0 = Clock::now();
  const Solution& sol = request.solution;
  if (sol.language != Language::cuda)
    throw Error(Status::invalid_argument,
                fmt::format("the CUDA compiler got a {} solution", to_string(sol.language)));

  // NVRTC reads any file a directive names: refuse those outside the
  // candidate's sources and the toolkit before it sees the code.
  if (std::string refused = check_includes(sol.sources); !refused.empty()) throw CompileError(refused, refused);
  // Read the plan first: its kernel names decide the name expressions, and a
  // malformed plan is reported before any compile time is spent.
  std::optional<LaunchPlan> plan;
  if (!sol.launch_plan.empty()) {
    try {
      plan = LaunchPlan::parse(sol.launch_plan);
    } catch (const Error& e) {
      throw CompileError(e.what(), e.what());
    }
  }
  ProgramSource src;
  try {
    src = assemble_source(sol.sources, request.params);
  } catch (const Error& e) {
    throw CompileError(e.what(), e.what());
  }
  const std::string arch = arch_for(request);
  const std::vector<std::string> options = nvrtc_options(request, arch);
  const std::vector<std::string> name_exprs = name_expressions_of(plan ? &*plan : nullptr);
  const NvrtcApi& api = nvrtc();

  const std::string key = cache_key(api, arch, options, src, name_exprs);

  const std::string cache_dir = cache_dir_for(request);
  const fs::path dir = fs::path(cache_dir) / arch / key.substr(0, 2);
  const fs::path cubin_path = dir / (key + ".cubin");
  const fs::path meta_path = dir / (key + ".json");
  const fs::path fail_path = dir / (key + ".fail.json");

  Artifact art;
  art.language = Language::cuda;
  art.path = cubin_path.string();
  std::string cubin;
  if (const std::optional<CompileError> failed = read_cache(meta_path, cubin_path, fail_path, art, cubin)) {
    ++cache_hits_;
    throw *failed;
  }
  if (art.cache_hit) {
    ++cache_hits_;
  } else {
    Outcome out;
    try {
      out = run_nvrtc(src, options, name_exprs, cache_dir, request.timeout_s);
    } catch (const CompileTimeout&) {
      throw;  // not a property of the source: never cached
    } catch (const CompileError& e) {
      // Deterministic failures are remembered, so a repeated broken candidate
      // costs no second compilation either.
      store(fail_path, Json::obj({{"error", e.what()}, {"log", e.log()}}).dump());
      throw;
    }
    cubin = std::move(out.cubin);
    art.log = std::move(out.log);
    art.lowered_names = std::move(out.lowered_names);
    art.pch = std::move(out.pch);
    Json lowered = Json::object();
    for (const auto& [k, v] : art.lowered_names) lowered[k] = v;
    // The cubin first: the metadata marks a complete entry.
    if (!store(cubin_path, cubin) ||
        !store(meta_path, Json::obj({{"format", kCacheFormat},
                                     {"nvrtc", api.version_string()},
                                     {"arch", arch},
                                     {"lowered_names", lowered},
                                     {"log", art.log}})
                              .dump(1))) {
      // No cache (read-only or full disk): keep the cubin next to the
      // process instead, so this evaluation still works.
      fs::path tmp = fs::temp_directory_path() / fmt::format("ksearch-{}-{}.cubin", ::getpid(), key);
      util::write_file_atomic(tmp, cubin);
      art.path = tmp.string();
    }
  }

  check_module(cubin, plan ? &*plan : nullptr, art);
  art.compile_s = seconds_since(t0);
  return art;
}

}  // namespace ks::eval::cuda
