#include "eval/isolation/layers.hpp"

#include <sys/mount.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "eval/backend.hpp"

namespace ks::eval::isolation {
namespace {

namespace fs = std::filesystem;

constexpr unsigned long kCovered = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY;

void append(char* dst, std::size_t cap, const char* s) {
  std::size_t n = std::strlen(dst);
  while (*s && n + 1 < cap) dst[n++] = *s++;
  dst[n] = '\0';
}

// "/proc/<this process's pid>" into `own`, without allocating.
void own_proc_entry(char (&own)[24]) {
  std::strcpy(own, "/proc/");
  char digits[16];
  int n = 0;
  for (pid_t p = ::getpid(); p > 0 && n < 15; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
  std::size_t k = 6;
  while (n > 0) own[k++] = digits[--n];
  own[k] = '\0';
}

const char* op_name(MountStep::Op op) {
  switch (op) {
    case MountStep::Op::tmpfs: return "tmpfs";
    case MountStep::Op::proc: return "proc";
    case MountStep::Op::cover_processes: return "cover_processes";
  }
  return "";
}

}  // namespace

std::vector<MountStep> candidate_mounts(const std::string& private_tmp, bool pid_namespace,
                                        const std::vector<std::string>& hide) {
  std::vector<MountStep> steps;
  if (!private_tmp.empty()) {
    // What the libraries a candidate uses keep in its TMPDIR (the CUDA JIT
    // cache, Inductor's and Triton's caches, extension builds) is nobody
    // else's and ends with it; /dev/shm too (the CUDA driver keeps files
    // there). The sizes bound what it can write.
    steps.push_back({.op = MountStep::Op::tmpfs, .target = private_tmp, .data = "size=512m,mode=0700",
                     .flags = MS_NOSUID | MS_NODEV, .enter = true});
    steps.push_back({.op = MountStep::Op::tmpfs, .target = "/dev/shm", .data = "size=256m,mode=1777",
                     .flags = MS_NOSUID | MS_NODEV | MS_NOEXEC, .absent_ok = true});
  }
  if (pid_namespace) {
    // A /proc that shows only its own namespace (a nested user namespace may
    // not mount one where the sandbox covered parts of its /proc, as
    // bubblewrap does: then an empty one), never the worker's.
    steps.push_back({.op = MountStep::Op::proc, .target = "/proc", .data = "size=4k",
                     .flags = MS_NOSUID | MS_NODEV | MS_NOEXEC});
  } else {
    // In the worker's PID namespace /proc stays the worker's (the CUDA
    // driver needs one that matches its process ids), with every other
    // process's entry covered: it sees no process but itself.
    steps.push_back({.op = MountStep::Op::cover_processes, .target = "/proc", .data = "size=4k,mode=0555",
                     .flags = kCovered, .absent_ok = true, .paths = process_entries()});
  }
  for (const auto& h : hide)
    steps.push_back(
        {.op = MountStep::Op::tmpfs, .target = h, .data = "size=4k", .flags = kCovered, .absent_ok = true});
  return steps;
}

Json mounts_json(const std::vector<MountStep>& steps) {
  Json::Array out;
  for (const auto& s : steps)
    out.push_back(Json::obj({{"op", op_name(s.op)},
                             {"target", s.target},
                             {"data", s.data},
                             {"flags", static_cast<std::int64_t>(s.flags)},
                             {"enter", s.enter},
                             {"absent_ok", s.absent_ok}}));
  return Json(std::move(out));
}

int apply_mounts(const std::vector<MountStep>& steps, char* isolation, std::size_t cap) {
  for (const auto& s : steps) {
    switch (s.op) {
      case MountStep::Op::tmpfs:
        if (::mount("tmpfs", s.target.c_str(), "tmpfs", s.flags, s.data.c_str()) != 0) {
          if (s.absent_ok && errno == ENOENT) continue;
          return kExitHideFailed;
        }
        if (s.enter && ::chdir(s.target.c_str()) != 0) return kExitHideFailed;
        break;
      case MountStep::Op::proc:
        if (::mount("proc", s.target.c_str(), "proc", s.flags, nullptr) == 0)
          append(isolation, cap, "+proc");
        else if (::mount("tmpfs", s.target.c_str(), "tmpfs", s.flags | MS_RDONLY, s.data.c_str()) == 0)
          append(isolation, cap, "+noproc");
        else
          return kExitHideFailed;
        break;
      case MountStep::Op::cover_processes: {
        char own[24];
        own_proc_entry(own);
        for (const auto& path : s.paths)
          if (std::strcmp(path.c_str(), own) != 0 &&
              ::mount("tmpfs", path.c_str(), "tmpfs", s.flags, s.data.c_str()) != 0 && errno != ENOENT)
            return kExitHideFailed;
        append(isolation, cap, "+ownproc");
        break;
      }
    }
  }
  return 0;
}

const std::string& private_tmp_mount_point() {
  struct Made {
    std::string path, error;
    ~Made() {  // gone with the worker (an empty folder when it is killed)
      if (!path.empty()) ::rmdir(path.c_str());
    }
  };
  static const Made made = []() -> Made {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base == '/' ? base : "/tmp") + "/ksearch-candidate-XXXXXX";
    if (!::mkdtemp(templ.data()))
      return Made{"", fmt::format("cannot make a folder {} for the candidate's private /tmp: {}", templ,
                                  std::strerror(errno))};
    return Made{templ, ""};
  }();
  if (!made.error.empty()) throw RunError({EvalStatus::runtime_error, made.error});
  return made.path;
}

std::vector<std::string> process_entries() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    out.push_back(e.path().string());
    // Its threads too: /proc/<tid> answers though readdir does not list it.
    std::error_code gone;  // a process that ended meanwhile
    for (const auto& t : fs::directory_iterator(e.path() / "task", gone))
      if (t.path().filename() != e.path().filename()) out.push_back("/proc/" + t.path().filename().string());
  }
  return out;
}

}  // namespace ks::eval::isolation
