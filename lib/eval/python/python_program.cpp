#include "eval/python/python_program.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>

#include "core/fib_solution.hpp"
#include "core/inputs.hpp"
#include "eval/host/guarded_memory.hpp"
#include "eval/isolation/seccomp.hpp"
#include "eval/python/embedded.hpp"
#include "eval/isolation/sandbox.hpp"
#include "ksearch/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/sha256.hpp"
#include "util/unique_fd.hpp"

namespace ks::eval::python {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxSourceBytes = 1u << 20;  // all files of one solution together

[[noreturn]] void compile_error(std::string message) { throw CompileError(message, message); }

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// A file name a module can be imported by: letters, digits, '_' and '.py'.
bool module_file_name(const std::string& path) {
  if (path.size() < 4 || path.size() > 128 || path.compare(path.size() - 3, 3, ".py") != 0) return false;
  for (std::size_t i = 0; i + 3 < path.size(); ++i) {
    const char c = path[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return !std::isdigit(static_cast<unsigned char>(path[0]));
}

class PythonCompiler final : public Compiler {
 public:
  explicit PythonCompiler(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}

  Artifact compile(const CompileRequest& req) override {
    const auto start = std::chrono::steady_clock::now();
    const Solution& s = req.solution;
    if (!language_is_python(s.language))
      compile_error(fmt::format("the Python path runs triton and python solutions, not {}", to_string(s.language)));
    if (s.sources.empty()) compile_error("the solution has no source files");
    std::size_t total = 0;
    for (const auto& f : s.sources) {
      if (!module_file_name(f.path))
        compile_error(fmt::format("source file \"{}\": a Python candidate's files must be plain module names "
                                  "ending in .py (e.g. submission.py, helpers.py)",
                                  f.path));
      total += f.content.size();
    }
    if (total > kMaxSourceBytes)
      compile_error(fmt::format("the solution's sources are {} bytes; at most {} are accepted", total, kMaxSourceBytes));
    // The entry point: the task's convention; its module is the solution's
    // only file, or the one the convention names.
    Json entry = req.python_entry.is_object() ? req.python_entry : Json::object();
    entry.erase("languages");
    if (!entry.contains("function") && !entry.contains("class")) entry["function"] = "run";
    // A solution that names its entry point (FlashInfer-Bench's FILE::SYMBOL)
    // is called there; the symbol is the class where the task builds one.
    if (const auto sep = s.entry_point.find("::"); sep != std::string::npos) {
      entry["module"] = s.entry_point.substr(0, sep);
      entry[entry.contains("class") ? "class" : "function"] = s.entry_point.substr(sep + 2);
    }
    if (s.destination_passing) entry["dps"] = *s.destination_passing;
    // An imported FlashInfer-Bench cpp or cuda Solution, unchanged: its module
    // runs the compilers when imported (the runner times that as its build).
    const bool extension = core::extension_solution_of(s).has_value();
    if (extension) entry["extension"] = true;
    std::string module = entry.get_string("module", "");
    bool found = false;
    for (const auto& f : s.sources) found = found || f.path == module;
    if (!found) {
      if (s.sources.size() == 1 || module.empty()) {
        module = s.sources.front().path;
      } else {
        compile_error(fmt::format("the solution has {} files and none is {}, the module this task's entry point "
                                  "`{}` is read from",
                                  s.sources.size(), module, entry.get_string("class", entry.get_string("function", ""))));
      }
    }
    entry["module"] = module;

    Json sources = Json::array();
    for (const auto& f : s.sources) sources.push_back(Json::obj({{"path", f.path}, {"content", f.content}}));
    Json tensors = Json::array();
    for (const auto& t : req.tensors) tensors.push_back(t.to_json());
    const Json doc = Json::obj({{"format", "ksearch-python-artifact-v1"},
                                {"language", to_string(s.language)},
                                {"sources", sources},
                                {"entry", entry},
                                {"tensors", tensors}});
    const std::string text = doc.dump();
    const std::string key = util::sha256_hex(text).substr(0, 32);
    const fs::path dir = cache_dir_.empty() ? util::default_cache_dir() / "python" : fs::path(cache_dir_);
    util::make_dirs(dir);
    Artifact a;
    a.language = s.language;
    a.path = (dir / (key + ".json")).string();
    a.kernels = {entry.get_string("class", entry.get_string("function", "run"))};
    a.builds_at_load = extension;
    std::error_code ec;
    a.cache_hit = fs::exists(a.path, ec);
    if (!a.cache_hit) util::write_file_atomic(a.path, text);
    a.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return a;
  }

 private:
  std::string cache_dir_;
};

// The request an error answered: the load request is answered before any
// candidate code exists in the process (the runner's own words), every later
// one after (data, which the candidate could have written).
enum class Stage { load, later };

std::string bounded(std::string text, std::size_t cap) {
  if (text.size() > cap) text = text.substr(0, cap) + " [...]";
  return text;
}

// What an error answer of the candidate's process becomes: its words
// ({"kind", "message", "log", "memory"}) quoted and bounded, and a status the
// evaluator decides from the request that failed and the memory it saw the
// process take (docs/security.md, "Who says what").
Failure answer_failure(host::CandidateProcess& process, Stage stage, const std::string& text,
                       const std::string& while_doing) {
  std::string message = text, log, kind;
  bool memory = false;
  try {
    const Json j = Json::parse(text);
    message = j.get_string("message", "");
    log = j.get_string("log", "");
    kind = j.get_string("kind", "");
    memory = j.contains("memory") && j.at("memory").is_bool() && j.at("memory").as_bool();
  } catch (const std::exception&) {
  }
  message = bounded(std::move(message), 4000);
  log = bounded(std::move(log), 8000);
  if (auto f = process.memory_verdict(while_doing)) {
    f->message += "; it said: " + message;
    f->log = log;
    f->out_of_memory = true;
    return *f;
  }
  Failure f{.status = EvalStatus::runtime_error, .message = std::move(message), .log = std::move(log),
            .contained = true};
  // A syntax error, a missing module or entry point, a failed build: the
  // runner found them before running anything of the candidate's.
  if (stage == Stage::load && kind != "environment") f.status = EvalStatus::compile_error;
  if (memory) f.message += process.memory_note();
  return f;
}

// "note=...": what the candidate's process said of a call whose result did
// not fit the outputs (left poisoned for the check), at the end of an answer.
std::string take_note(std::string& answer) {
  const std::size_t at = answer.rfind("note=", 0) == 0 ? 0 : answer.find(";note=");
  if (at == std::string::npos) return {};
  const std::size_t text = at == 0 ? 5 : at + 6;
  std::string note = bounded(answer.substr(text), 1000);
  answer.resize(at);
  return note;
}

// A C++/CUDA Solution's built library, kept by the evaluator across
// evaluations and runs: <cache>/python/ext/<key>.so, keyed by the artifact's
// content, with its SHA-256 and the toolchain that built it in <key>.json.
// Only this class writes there, from the descriptor the load request
// answered with: the build ran before any candidate code existed in that
// process, so the library is the compilers' work. A candidate's process
// never sees the folder (it is hidden there); the library reaches the next
// one as a copy in a memfd, which its runner uses only when its own
// toolchain is the one recorded.
class ExtensionCache {
 public:
  static constexpr std::size_t kMaxLibraryBytes = std::size_t{512} << 20;

  ExtensionCache(fs::path folder, std::string key) : folder_(std::move(folder)), key_(std::move(key)) {}

  // The kept library and the toolchain it was built with; none when absent
  // or when its bytes no longer match their hash.
  std::pair<util::UniqueFd, std::string> open() const {
    try {
      const Json meta = Json::parse(util::read_file(folder_ / (key_ + ".json"), 1 << 16, false));
      const std::string bytes = util::read_file(folder_ / (key_ + ".so"), kMaxLibraryBytes, false);
      if (util::sha256_hex(bytes) != meta.get_string("sha256", "")) return {};
      util::UniqueFd fd(static_cast<int>(::syscall(SYS_memfd_create, "ksearch-extension", MFD_CLOEXEC)));
      if (!fd || !write_all(fd.get(), bytes)) return {};
      ::lseek(fd.get(), 0, SEEK_SET);
      return {std::move(fd), meta.get_string("identity", "")};
    } catch (const std::exception&) {
      return {};  // absent or unreadable: built again
    }
  }

  // Keeps the library behind `fd` (a regular file holding an ELF object),
  // built with `identity`. A library that cannot be kept is built again
  // next time; the evaluation goes on either way.
  void keep(int fd, const std::string& identity) const {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 4 ||
        static_cast<std::uint64_t>(st.st_size) > kMaxLibraryBytes)
      return;
    std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
      if (n <= 0) return;
      got += static_cast<std::size_t>(n);
    }
    if (bytes.compare(0, 4, "\x7f" "ELF") != 0) return;
    try {
      util::make_dirs(folder_);
      util::write_file_atomic(folder_ / (key_ + ".so"), bytes);
      util::write_file_atomic(folder_ / (key_ + ".json"),
                              Json::obj({{"sha256", util::sha256_hex(bytes)}, {"identity", identity}}).dump());
    } catch (const std::exception&) {
    }
  }

 private:
  static bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::write(fd, data.data(), data.size());
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  fs::path folder_;
  std::string key_;
};

// The runner's name of the device ("cpu" or "cuda": torch's).
const char* device_name(PythonDevice::Kind k) { return k == PythonDevice::Kind::cuda ? "cuda" : "cpu"; }

// The cache key of an artifact's extension: its sources and entry point, and
// the device kind it is built for.
std::string extension_key(const Json& doc, const std::string& device_kind) {
  return util::sha256_hex(Json::obj({{"sources", doc.at("sources")}, {"entry", doc.at("entry")},
                                     {"device", device_kind}, {"format", "ksearch-extension-v1"}})
                              .dump())
      .substr(0, 40);
}

class PythonProgram final : public Program {
 public:
  PythonProgram(const Artifact& artifact, const host::CandidateProcessOptions& isolate, PythonDevice device)
      : device_(std::move(device)) {
    Json doc;
    try {
      doc = Json::parse(util::read_file(artifact.path));
    } catch (const std::exception& e) {
      throw RunError(Failure{.status = EvalStatus::runtime_error,
                             .message = fmt::format("cannot read the Python artifact {}: {}", artifact.path, e.what())});
    }
    for (const auto& t : doc.at("tensors").as_array()) tensors_.push_back(TensorSpec::from_json(t));
    const std::string python = isolate.python.empty() ? python_interpreter() : isolate.python;
    if (python.empty())
      throw RunError(Failure{.status = EvalStatus::runtime_error,
                             .message = "no Python interpreter for Python candidates: set $KSEARCH_PYTHON to a Python "
                                        "with PyTorch (and Triton for the triton language)"});
    host::CandidateProcessOptions o = isolate;
    o.command = {python, "-I", "-B", "-c", std::string(embedded::candidate_runner_py)};
    o.zygote = true;  // forked by the worker's long-lived Python, PyTorch imported
    o.zygote_imports = device_.kind == PythonDevice::Kind::cuda ? "torch,triton" : "torch";
    // NumPy's OpenBLAS (PyTorch imports NumPy) would start a thread per core,
    // each with its buffers, in every candidate's process: on a 16-core
    // machine more than a 3 GiB address-space limit holds, and threads the
    // zygote could not fork with. PyTorch's own operations do not use it.
    o.env.push_back("OPENBLAS_NUM_THREADS=1");
    if (device_.kind == PythonDevice::Kind::cuda) {
      // In the worker's PID namespace. CUDA's first call names its threads
      // through /proc/self/task/<tid>/comm with the namespace's thread id;
      // a PID namespace of its own needs a /proc of its own, which cannot
      // be mounted under bubblewrap (it covers parts of its /proc), so that
      // write fails and CUDA with it (error 304: traced on an H100, driver
      // 580). Here /proc shows no process but its own, its user namespace
      // keeps it from tracing or reading others, and its seccomp filter from
      // signalling them (docs/security.md).
      o.pid_namespace = false;
      o.memory_limit = 0;  // the CUDA driver reserves far more address space than it uses,
      o.resident_limit = isolate.memory_limit;  // so the limit is on what it holds
      // The worker's GPU alone: no candidate runs work on another one, where
      // another candidate may be timed.
      if (!device_.visible_devices.empty()) o.env.push_back("CUDA_VISIBLE_DEVICES=" + device_.visible_devices);
    }
    // Triton's kernel cache and PyTorch's extension builds go to the
    // process's private /tmp (the runner points them there): nothing a
    // candidate writes outlives its process. What the evaluator keeps is a
    // C++/CUDA Solution's library, built before any candidate code ran
    // (ExtensionCache).
    const bool extension = doc.at("entry").get_bool("extension");
    if (extension && !isolate.python_cache.empty())
      cache_.emplace(fs::path(isolate.python_cache) / "ext", extension_key(doc, device_name(device_.kind)));
    const auto started = std::chrono::steady_clock::now();
    process_ = std::make_unique<host::CandidateProcess>(o);
    // Triton runs ptxas and a C compiler as it compiles, in the candidate's
    // calls: it keeps fork and exec. (An extension's build runs before the
    // filter is installed.)
    const bool processes = doc.get_string("language", "") == "triton";
    const auto outputs = static_cast<std::int64_t>(
        std::count_if(tensors_.begin(), tensors_.end(), [](const TensorSpec& t) { return t.is_output; }));
    Json load = Json::obj({{"language", doc.at("language")},
                           {"device", device_name(device_.kind)},
                           {"n_inputs", static_cast<std::int64_t>(tensors_.size()) - outputs},
                           {"n_outputs", outputs},
                           {"sources", doc.at("sources")},
                           {"entry", doc.at("entry")},
                           {"seccomp", hex(eval::isolation::candidate_seccomp_program(
                                           processes, o.pid_namespace ? 0 : process_->pid()))},
                           {"seccomp_nr", static_cast<std::int64_t>(SYS_seccomp)}});
    auto [prebuilt, identity] = cache_ ? cache_->open() : std::pair<util::UniqueFd, std::string>();
    std::vector<int> send;
    if (prebuilt) {
      send.push_back(prebuilt.get());
      load["prebuilt_identity"] = identity;
    }
    auto answer = process_->ask(host::CandidateProcess::Request::load, load.dump(), nullptr, send);
    prebuilt.reset();
    std::vector<util::UniqueFd> built;
    for (int fd : answer.fds) built.emplace_back(fd);
    if (answer.error) throw RunError(answer_failure(*process_, Stage::load, answer.text, "loading the candidate"));
    // {"build_s", "identity"}: the time the load request spent building an
    // extension, a compile time rather than the process's start (the
    // runner's own words, bounded by the wall time measured here), and the
    // toolchain it built with.
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    Json said = Json::object();
    try {
      if (!answer.text.empty()) said = Json::parse(answer.text);
    } catch (const std::exception&) {
    }
    facts_.build_s = said.is_object() ? std::clamp(said.get_number("build_s", 0), 0.0, elapsed) : 0.0;
    if (!(facts_.build_s >= 0)) facts_.build_s = 0;  // NaN
    if (cache_ && !built.empty() && said.is_object()) cache_->keep(built.front().get(), said.get_string("identity", ""));
    const auto imported = process_->ask(host::CandidateProcess::Request::import, "");
    if (imported.error)
      throw RunError(answer_failure(*process_, Stage::later, imported.text, "importing the candidate's module"));
    facts_.start_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() - facts_.build_s;
    facts_.isolation = process_->isolation();
  }

  ProcessFacts process_facts() const override { return facts_; }

  void bind(const Bindings& b) override {
    std::vector<const void*> blocks;
    std::vector<std::size_t> block_tensors;  // the entry in `tensors` of each of `blocks`
    std::set<std::uint64_t> cuda_live;  // the allocations this binding names; the process drops the rest
    Json tensors = Json::array();
    for (const auto& t : tensors_) {
      if (t.scalar) {
        const auto it = b.scalars.find(t.name);
        if (it == b.scalars.end())
          throw RunError(Failure{.status = EvalStatus::runtime_error,
                                 .message = fmt::format("no value for scalar input \"{}\"", t.name)});
        tensors.push_back(Json::obj(
            {{"name", t.name}, {"dtype", to_string(t.dtype)}, {"scalar", true}, {"value", it->second.value}}));
        continue;
      }
      const auto it = b.tensors.find(t.name);
      if (it == b.tensors.end())
        throw RunError(Failure{.status = EvalStatus::runtime_error,
                               .message = fmt::format("no buffer for tensor \"{}\"", t.name)});
      const auto shape = core::tensor_shape(t, b.vars);
      const std::size_t bytes = core::element_count(shape) * dtype_size(t.dtype);
      Json j = Json::obj({{"name", t.name},
                          {"dtype", to_string(t.dtype)},
                          {"shape", [&] {
                             Json a = Json::array();
                             for (auto d : shape) a.push_back(d);
                             return a;
                           }()},
                          {"bytes", static_cast<std::int64_t>(bytes)},
                          {"output", t.is_output}});
      if (bytes > 0 && device_.kind == PythonDevice::Kind::cuda) {
        const CudaShare share = device_.share(it->second);
        facts_.buffers = share.fd >= 0 ? "descriptors" : "ipc";
        if (share.fd >= 0) {
          if (!cuda_sent_.count(share.serial) && !cuda_live.count(share.serial))
            process_->share_cuda(share.serial, share.size, share.fd);
          j["cuda"] = static_cast<std::int64_t>(share.serial);
          cuda_live.insert(share.serial);
        } else {
          j["ipc"] = share.ipc;
        }
        j["offset"] = static_cast<std::int64_t>(share.offset);
      } else if (bytes > 0) {
        const auto block = host::shared_block(it->second.host_ptr());
        if (!block || block->bytes < bytes)
          throw RunError(Failure{.status = EvalStatus::runtime_error,
                                 .message = fmt::format("tensor \"{}\" is no buffer of the evaluator", t.name)});
        j["offset"] = static_cast<std::int64_t>(block->offset);
        blocks.push_back(it->second.host_ptr());
        block_tensors.push_back(tensors.size());
      }
      tensors.push_back(std::move(j));
    }
    const auto serials = process_->share(blocks);
    Json live = Json::array();
    for (std::size_t k = 0; k < block_tensors.size(); ++k) {
      tensors.as_array()[block_tensors[k]]["serial"] = static_cast<std::int64_t>(serials[k]);
      live.push_back(static_cast<std::int64_t>(serials[k]));
    }
    Json dims = Json::object();
    for (const auto& [name, v] : b.vars) dims[name] = v;
    first_call_ = shapes_seen_.insert(dims.dump()).second;
    if (device_.synchronize) device_.synchronize();
    const auto answer = process_->ask(host::CandidateProcess::Request::bind,
                                      Json::obj({{"blocks", live}, {"tensors", tensors}, {"dims", dims}}).dump());
    cuda_sent_ = std::move(cuda_live);
    if (answer.error) throw RunError(answer_failure(*process_, Stage::later, answer.text, "binding its inputs"));
  }

  // A checked call copies what the entry returns into the outputs.
  //
  // On the host the worker's clock times each call, and the candidate's
  // process gets no request between a timed call and the worker's check
  // (no candidate code may run there: it could finish the work untimed). So
  // a timed call does all of its work inside the request: the call, the
  // copy into the outputs, and the poisoning of what it returned (a cached
  // tensor returned again is poison the next time).
  //
  // On the GPU the process times its calls with CUDA events, in batches
  // (timed_batch); a call's result is kept uncopied (the harnesses time no
  // copy) and poisoned before the next call, and the batch copies its last
  // result into the outputs before it answers. No request follows before
  // the worker's check: synchronize() asks nothing.
  void launch() override {
    double ms = 0;
    run("call", &ms);
    // The first call of a new shape is where Triton compiles and autotunes.
    if (first_call_) facts_.first_calls_s += ms / 1e3;
    first_call_ = false;
  }
  void synchronize() override {}  // every request finishes its own work
  void poison_scratch() override {
    if (device_.kind == PythonDevice::Kind::cuda) run("poison", nullptr);
  }
  double timed_launch() override {
    if (device_.kind == PythonDevice::Kind::cuda) return timed_batch(1, false, false).front();
    double wall_ms = 0;
    run("timed-host", &wall_ms);
    return wall_ms;
  }
  bool times_in_batches() const override { return device_.kind == PythonDevice::Kind::cuda; }
  std::string note() const override { return note_; }
  std::vector<double> timed_batch(int calls, bool poison, bool flush) override {
    double wall_ms = 0;
    std::string answer = run(fmt::format("batch {} {} {}", calls, poison ? 1 : 0, flush ? 1 : 0), &wall_ms);
    // "ms=a,b,...;escaped=N[;note=...]": one time per call, which together cannot
    // exceed the worker's own clock from the request to the answer, and how
    // many calls left work running on another stream (charged).
    if (const auto semi = answer.find(";escaped="); semi != std::string::npos) {
      facts_.stream_escapes += std::strtol(answer.c_str() + semi + 9, nullptr, 10);
      answer.resize(semi);
    }
    std::vector<double> ms;
    double sum = 0;
    bool ok = answer.rfind("ms=", 0) == 0;
    for (std::size_t pos = 3; ok && pos < answer.size();) {
      char* end = nullptr;
      const double v = std::strtod(answer.c_str() + pos, &end);
      ok = end != answer.c_str() + pos && v >= 0;
      ms.push_back(v);
      sum += v;
      pos = static_cast<std::size_t>(end - answer.c_str()) + 1;
    }
    if (!ok || static_cast<int>(ms.size()) != calls || sum > wall_ms)
      throw RunError(Failure{.status = EvalStatus::runtime_error,
                             .message = fmt::format("the candidate's process reported the times \"{}\" for {} calls "
                                                    "that took {:.4f} ms from the evaluator's request to its answer; "
                                                    "a candidate must not touch the evaluator's timer",
                                                    answer.substr(0, 60), calls, wall_ms),
                             .contained = true});
    return ms;
  }

 private:
  // One run request; its answer's text, less the note on the result it
  // may end with (note()).
  std::string run(std::string_view kind, double* ms) {
    if (device_.synchronize) device_.synchronize();
    auto answer = process_->ask(host::CandidateProcess::Request::run, kind, ms);
    if (answer.error) throw RunError(answer_failure(*process_, Stage::later, answer.text, "running the candidate"));
    note_ = take_note(answer.text);
    return std::move(answer.text);
  }

  PythonDevice device_;
  std::vector<TensorSpec> tensors_;
  std::unique_ptr<host::CandidateProcess> process_;
  std::optional<ExtensionCache> cache_;  // an imported C++/CUDA Solution's built library
  std::set<std::uint64_t> cuda_sent_;  // allocations the process has mapped (descriptors sent)
  std::set<std::string> shapes_seen_;  // the dims of every binding so far
  bool first_call_ = false;            // the next checked call is the first of its shape
  std::string note_;                   // what the process said of its last call's result
  ProcessFacts facts_;
};

}  // namespace

std::string python_interpreter() {
  const char* v = std::getenv("KSEARCH_PYTHON");
  const std::string name = v && *v ? v : "python3";
  std::string found = isolation::find_program(name);
  if (found.empty()) return {};
  std::error_code ec;
  return fs::absolute(found, ec).lexically_normal().string();
}

const PythonFacts& python_facts() {
  static std::once_flag once;
  static PythonFacts facts;
  std::call_once(once, [] {
    facts.python = python_interpreter();
    if (facts.python.empty()) {
      const char* v = std::getenv("KSEARCH_PYTHON");
      facts.problem = v && *v ? fmt::format("$KSEARCH_PYTHON names {}, which is not an executable", v)
                              : "no python3 in PATH";
      return;
    }
    // One short run: versions only, each import on its own so one missing
    // module does not hide the others.
    constexpr const char* kProbe =
        "import json, sys\n"
        "r = {'version': sys.version.split()[0]}\n"
        "try:\n"
        "    import torch\n"
        "    r['torch'] = torch.__version__\n"
        "    r['torch_cuda'] = torch.version.cuda or ''\n"
        "    r['cuda_available'] = bool(torch.cuda.is_available())\n"
        "except Exception as e:\n"
        "    r['torch_error'] = f'{type(e).__name__}: {e}'\n"
        "try:\n"
        "    import triton\n"
        "    r['triton'] = triton.__version__\n"
        "except Exception as e:\n"
        "    r['triton_error'] = f'{type(e).__name__}: {e}'\n"
        "print(json.dumps(r))\n";
    try {
      util::SpawnOptions o;
      o.argv = {facts.python, "-I", "-B", "-c", kProbe};
      o.clear_env = true;
      o.env_set = isolation::candidate_environment(false);
      const auto r = util::run_command(o, "", 120);
      if (!r.ok()) {
        facts.problem = fmt::format("{} failed ({}): {}", facts.python, r.describe(), r.err.substr(0, 400));
        return;
      }
      const Json j = Json::parse(r.out);
      facts.version = j.get_string("version", "");
      facts.torch = j.get_string("torch", "");
      facts.torch_cuda = j.get_string("torch_cuda", "");
      facts.cuda_available = j.contains("cuda_available") && j.at("cuda_available").as_bool();
      facts.triton = j.get_string("triton", "");
    } catch (const std::exception& e) {
      facts.problem = fmt::format("cannot ask {} for its versions: {}", facts.python, e.what());
    }
  });
  return facts;
}

std::string python_problem(Language language, bool gpu) {
  const PythonFacts& f = python_facts();
  const std::string fix = "set $KSEARCH_PYTHON to a Python that has them";
  if (!f.problem.empty()) return fmt::format("{} candidates need a Python with PyTorch: {}; {}", to_string(language),
                                             f.problem, fix);
  if (f.torch.empty())
    return fmt::format("{} candidates need PyTorch, and {} cannot import torch; install it (pip install torch) or {}",
                       to_string(language), f.python, fix);
  if (language == Language::triton && f.triton.empty())
    return fmt::format("triton candidates need Triton, and {} cannot import triton; install it (pip install triton) "
                       "or {}",
                       f.python, fix);
  if (gpu && !f.cuda_available)
    return fmt::format("{} candidates on the GPU need a CUDA build of PyTorch, and {} has PyTorch {}{} without a "
                       "usable GPU; {}",
                       to_string(language), f.python, f.torch, f.torch_cuda.empty() ? " (a CPU build)" : "", fix);
  return {};
}

std::unique_ptr<Compiler> make_python_compiler(std::string cache_dir) {
  return std::make_unique<PythonCompiler>(std::move(cache_dir));
}

std::unique_ptr<Program> load_python_program(const Artifact& artifact, const host::CandidateProcessOptions& isolate,
                                             const PythonDevice& device) {
  return std::make_unique<PythonProgram>(artifact, isolate, device);
}

}  // namespace ks::eval::python
