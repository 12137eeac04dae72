// Confinement of everything that touches a candidate: the run and compile
// workers, the host compiler and, inside the run worker, the candidate itself
// (docs/security.md).
//
// Two layers, always both where they can be had:
//   - an environment built from an allowlist (toolchain and driver settings),
//     so no credential of the caller's reaches a candidate's process;
//   - bubblewrap (Debian package `bubblewrap`): a read-only view of the
//     system folders, a private /tmp, only the folders the process needs,
//     the GPU device nodes for CUDA workers, no network, and its own PID
//     namespace, so every descendant dies with it, setsid() or not.
// Where bubblewrap cannot start (missing, or no user namespaces), `automatic`
// runs unconfined with one loud warning per process; `required` refuses.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ksearch/vocabulary.hpp"

namespace ks::eval::isolation {

// The mode is ks::SandboxMode (ksearch/vocabulary.hpp, one name table).

struct SandboxStatus {
  bool available = false;  // bubblewrap found, and it created its namespaces here
  std::string tool;        // the bwrap executable
  std::string version;     // "bubblewrap 0.8.0"
  std::string problem;     // why not, when !available
};

// Probed once per process (one short bwrap start), then cached.
// $KSEARCH_BWRAP names the executable; otherwise `bwrap` is looked up in PATH.
const SandboxStatus& sandbox_status();

// What a confined process sees besides the read-only system folders
// (/usr, /bin, /lib*, the loader's part of /etc, the CUDA toolkit and the
// folders in $LD_LIBRARY_PATH) and a private, empty /tmp.
struct SandboxView {
  std::vector<std::filesystem::path> read_only;   // files or folders, at the same path
  std::vector<std::filesystem::path> read_write;
  bool gpu = false;                // NVIDIA device nodes and /sys
  std::filesystem::path cwd;       // empty: /tmp
  // Kill the sandbox when the thread that started bubblewrap ends: for a
  // synchronous child (a compiler), or one forked by the lasting spawner
  // thread (SpawnOptions::die_with_parent_process), never for a long-lived
  // process started from a short-lived thread.
  bool die_with_parent = false;
};

// The installation folders a program needs inside the sandbox when it lives
// outside the system folders (a compiler under /opt/gcc, say): for argv[0]
// found in PATH and every hop of its symbolic links, the folder above its
// `bin`, or its own folder. Empty for programs under /usr.
std::vector<std::filesystem::path> program_folders(const std::string& program);

// `program` as exec would find it: itself when it holds a '/', else the
// first executable of that name in PATH; "" when there is none.
std::string find_program(const std::string& program);

class Sandbox {
 public:
  // Throws ks::Error(Status::state) for `required` when bubblewrap is
  // unavailable; for `automatic`, warns once per process on stderr.
  explicit Sandbox(SandboxMode mode);

  SandboxMode mode() const { return mode_; }
  bool active() const { return active_; }

  // The command to execute: bwrap with the view, then `argv`; or `argv`
  // itself when inactive. An absolute argv[0] outside the system folders
  // (the worker in a build tree) is made visible read-only.
  std::vector<std::string> wrap(const std::vector<std::string>& argv, const SandboxView& view) const;

  // One line for `ksearch devices` and manifests: "bubblewrap 0.8.0 (active)",
  // "off (--sandbox off)", "unavailable: ...".
  std::string describe() const;

 private:
  SandboxMode mode_;
  bool active_ = false;
};

// The environment of every process started for a candidate: an allowlist of
// the caller's variables (PATH, locale, CUDA and NVIDIA settings, the
// library path, ksearch's own driver overrides), less anything whose name
// looks like a credential or whose value holds a registered secret; plus
// the names listed in $KSEARCH_WORKER_ENV (comma-separated), under the same
// credential rules. TMPDIR and HOME point at the private /tmp when `sandboxed`.
std::map<std::string, std::string> candidate_environment(bool sandboxed);

// The environment of trusted helpers (a task's reference oracle): the
// caller's, less names that look like credentials and values that hold a
// registered secret.
std::map<std::string, std::string> trusted_environment();

}  // namespace ks::eval::isolation
