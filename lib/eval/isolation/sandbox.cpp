#include "eval/isolation/sandbox.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

#include "ksearch/error.hpp"
#include "ksearch/log.hpp"
#include "util/process.hpp"
#include "util/secrets.hpp"

extern char** environ;

namespace ks::eval::isolation {
namespace {

namespace fs = std::filesystem;

// The folders of the operating system a compiler, the worker and the CUDA
// driver load from. On a merged-/usr system most are symbolic links.
constexpr const char* kSystemDirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// What of /etc the loader and the compilers read: not /etc as a whole, which
// holds the machine's secrets (shadow, ssh host keys, credentials of tools).
constexpr const char* kEtcFiles[] = {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                                     "/etc/localtime"};

// Variables a candidate's processes may inherit: how to find programs and
// libraries, the locale, and how to reach the GPU. Names that look like
// credentials are dropped even here.
constexpr const char* kAllowedNames[] = {"PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME",
                                         "CUDA_PATH", "KSEARCH_LIBCUDA", "KSEARCH_LIBNVRTC"};
constexpr const char* kAllowedPrefixes[] = {"LC_", "CUDA_", "NVIDIA_", "__NV_", "__GL_"};

bool allowed_name(std::string_view name) {
  if (util::looks_like_credential_name(name)) return false;
  for (const char* n : kAllowedNames)
    if (name == n) return true;
  for (const char* p : kAllowedPrefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

bool under_system_dir(const fs::path& p) {
  const std::string s = p.lexically_normal().string();
  for (const char* d : kSystemDirs) {
    const std::string dir(d);
    if (s == dir || s.rfind(dir + "/", 0) == 0) return true;
  }
  return false;
}

// `program` as exec would find it: itself when it holds a '/', else the
// first executable of that name in PATH; empty when there is none.
std::string find_in_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string_view rest = path && *path ? path : "/usr/bin:/bin";
  while (!rest.empty()) {
    auto colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    if (!dir.empty()) {
      std::string cand = dir + "/" + program;
      if (::access(cand.c_str(), X_OK) == 0) return cand;
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return {};
}

std::string find_bwrap() {
  if (const char* v = std::getenv("KSEARCH_BWRAP"); v && *v) return v;
  return find_in_path("bwrap");
}

// The GPU's device nodes: the control and per-GPU nodes, UVM and the
// capability folder of MIG setups.
std::vector<fs::path> nvidia_device_nodes() {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("nvidia", 0) == 0) out.push_back(e.path());
  }
  return out;
}

void add_bind(std::vector<std::string>& a, const char* how, const fs::path& p) {
  a.push_back(how);
  a.push_back(p.string());
  a.push_back(p.string());
}

// bwrap's arguments up to (not including) the command.
std::vector<std::string> bwrap_arguments(const std::string& tool, const SandboxView& view,
                                         const std::vector<std::string>& argv) {
  std::vector<std::string> a{tool,
                             "--unshare-user",
                             "--unshare-pid",
                             "--unshare-ipc",
                             "--unshare-net",
                             "--unshare-uts",
                             "--unshare-cgroup-try",
                             "--cap-drop",
                             "ALL",
                             "--hostname",
                             "ksearch-sandbox",
                             // Never uid 0 inside, even for root outside: a host
                             // run worker gives each candidate a user namespace
                             // of its own, and without CAP_SETFCAP a namespace
                             // may not map uid 0 of its parent.
                             "--uid",
                             "1000",
                             "--gid",
                             "1000"};
  if (view.die_with_parent) a.emplace_back("--die-with-parent");
  std::error_code ec;
  for (const char* d : kSystemDirs) {
    fs::path p(d);
    if (fs::is_symlink(p, ec)) {
      a.insert(a.end(), {"--symlink", fs::read_symlink(p, ec).string(), p.string()});
    } else if (fs::is_directory(p, ec)) {
      add_bind(a, "--ro-bind", p);
    }
  }
  for (const char* f : kEtcFiles) add_bind(a, "--ro-bind-try", f);
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"});
  // The toolkit and library folders the caller pointed at, when they live
  // outside the system folders (binds after the /tmp tmpfs may sit inside it).
  std::set<std::string> extra;
  auto add_from_env = [&](const char* var, bool list) {
    const char* v = std::getenv(var);
    if (!v || !*v) return;
    std::string_view rest(v);
    while (!rest.empty()) {
      auto colon = list ? rest.find(':') : std::string_view::npos;
      fs::path p(std::string(rest.substr(0, colon)));
      if (p.is_absolute() && !under_system_dir(p)) extra.insert(p.lexically_normal().string());
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  };
  add_from_env("LD_LIBRARY_PATH", true);
  add_from_env("CUDA_HOME", false);
  add_from_env("CUDA_PATH", false);
  add_from_env("KSEARCH_LIBCUDA", false);
  add_from_env("KSEARCH_LIBNVRTC", false);
  if (!argv.empty() && fs::path(argv[0]).is_absolute() && !under_system_dir(argv[0])) extra.insert(argv[0]);
  for (const auto& p : view.read_only) extra.insert(fs::absolute(p).lexically_normal().string());
  for (const auto& p : extra) add_bind(a, "--ro-bind-try", p);
  for (const auto& p : view.read_write) add_bind(a, "--bind", fs::absolute(p).lexically_normal());
  if (view.gpu) {
    for (const auto& n : nvidia_device_nodes()) add_bind(a, "--dev-bind", n);
    add_bind(a, "--ro-bind-try", "/sys");
  }
  a.insert(a.end(), {"--chdir", view.cwd.empty() ? std::string("/tmp") : view.cwd.string()});
  a.emplace_back("--");
  return a;
}

SandboxStatus probe() {
  SandboxStatus st;
  st.tool = find_bwrap();
  if (st.tool.empty()) {
    st.problem = "bubblewrap (bwrap) is not installed (Debian/Ubuntu package `bubblewrap`; or set $KSEARCH_BWRAP)";
    return st;
  }
  try {
    util::SpawnOptions v;
    v.argv = {st.tool, "--version"};
    v.clear_env = true;
    v.env_set = candidate_environment(false);
    auto r = util::run_command(v, "", 10);
    std::string out = r.out;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    st.version = out.empty() ? "bubblewrap" : out;
    // The real thing: the namespaces and mounts a worker gets.
    util::SpawnOptions o;
    o.argv = bwrap_arguments(st.tool, SandboxView{}, {});
    o.argv.emplace_back("true");
    o.clear_env = true;
    o.env_set = candidate_environment(true);
    auto t = util::run_command(o, "", 20);
    if (!t.ok()) {
      std::string why = t.err;
      if (auto nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
      st.problem = fmt::format("{} cannot create its namespaces here ({}): {}", st.tool, t.describe(),
                               why.empty() ? "no message" : why);
      return st;
    }
  } catch (const Error& e) {
    st.problem = fmt::format("{} cannot be run: {}", st.tool, e.what());
    return st;
  }
  st.available = true;
  return st;
}

}  // namespace

std::string find_program(const std::string& program) { return find_in_path(program); }

std::vector<fs::path> program_folders(const std::string& program) {
  std::vector<fs::path> out;
  std::string found = find_in_path(program);
  if (found.empty()) return out;
  fs::path p = fs::absolute(found);
  std::error_code ec;
  for (int hop = 0; hop < 16; ++hop) {
    if (!under_system_dir(p)) {
      fs::path dir = p.parent_path();
      fs::path folder = dir.filename() == "bin" ? dir.parent_path() : dir;
      if (std::find(out.begin(), out.end(), folder) == out.end()) out.push_back(folder);
    }
    if (!fs::is_symlink(p, ec)) break;
    fs::path next = fs::read_symlink(p, ec);
    if (ec) break;
    p = next.is_absolute() ? next : (p.parent_path() / next).lexically_normal();
  }
  return out;
}

const SandboxStatus& sandbox_status() {
  static const SandboxStatus st = probe();
  return st;
}

Sandbox::Sandbox(SandboxMode mode) : mode_(mode) {
  if (mode == SandboxMode::off) return;
  const SandboxStatus& st = sandbox_status();
  if (st.available) {
    active_ = true;
    return;
  }
  if (mode == SandboxMode::required)
    throw Error(Status::state, "the sandbox for candidates was required (--sandbox on) but cannot start: " + st.problem);
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    log_message(LogLevel::warning,
                fmt::format("candidates and their compilers run WITHOUT a sandbox: {}. They get a scrubbed environment and resource limits, but can read and "
                            "write whatever this user can (home folder, run folders, the reference cache) and reach "
                            "the network. See docs/security.md.",
                            st.problem));
}

std::vector<std::string> Sandbox::wrap(const std::vector<std::string>& argv, const SandboxView& view) const {
  if (!active_) return argv;
  std::vector<std::string> out = bwrap_arguments(sandbox_status().tool, view, argv);
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::string Sandbox::describe() const {
  if (active_) return sandbox_status().version + " (active)";
  if (mode_ == SandboxMode::off) return "off (--sandbox off)";
  return "unavailable: " + sandbox_status().problem;
}

namespace {

// The caller's variables that `keep` accepts, never a value holding a
// registered secret.
template <class Keep>
std::map<std::string, std::string> environment_where(Keep&& keep) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view name = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (keep(name) && !util::contains_secret(value)) env.emplace(std::string(name), std::string(value));
  }
  return env;
}

}  // namespace

std::map<std::string, std::string> candidate_environment(bool sandboxed) {
  std::map<std::string, std::string> env = environment_where(allowed_name);
  // Names the user adds on purpose, e.g. the settings of a custom driver.
  if (const char* extra = std::getenv("KSEARCH_WORKER_ENV"); extra && *extra) {
    std::string_view rest(extra);
    while (!rest.empty()) {
      auto sep = rest.find_first_of(",:");
      std::string name(rest.substr(0, sep));
      const char* v = name.empty() ? nullptr : std::getenv(name.c_str());
      if (v && !util::looks_like_credential_name(name) && !util::contains_secret(v)) env[name] = v;
      if (sep == std::string_view::npos) break;
      rest.remove_prefix(sep + 1);
    }
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  if (sandboxed) {
    env["TMPDIR"] = "/tmp";
    env["HOME"] = "/tmp";
  }
  return env;
}

std::map<std::string, std::string> trusted_environment() {
  return environment_where([](std::string_view name) { return !util::looks_like_credential_name(name); });
}

}  // namespace ks::eval::isolation
