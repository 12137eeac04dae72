#include "ksearch/run_store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cctype>
#include <chrono>
#include <ctime>

#include "core/run_events.hpp"
#include "core/world_model_file.hpp"
#include "core/solution_files.hpp"
#include "ksearch/error.hpp"
#include "util/fs.hpp"
#include "util/secrets.hpp"

KS_NAMESPACE_BEGIN

namespace fs = std::filesystem;
using util::AppendLog;

std::string utc_timestamp() {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

namespace {

// Every byte the run folder receives passes through redact(): a secret that
// slipped into a compile log, a model's answer or an event never lands on disk.
// Paths are relative to the run folder and go through util::Folder: a run
// folder may come from someone else, so no link in it is followed.
void put(const util::Folder& run, const fs::path& rel, std::string_view content) {
  run.write_atomic(rel, util::redact(content));
}
void add(util::AppendLog& log, std::string_view line) { log.append(util::redact(line)); }

// File names written into the run folder come from LLM answers: keep only a
// safe base name so nothing escapes the folder, never one of the record
// files, and never the same name twice.
std::vector<std::string> safe_file_names(const Solution& s) {
  static const char* reserved[] = {"solution.json", "eval.json", "answer.txt", "launch_plan.json", "best.json"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.sources.size(); ++i) {
    std::string name;
    for (char c : fs::path(s.sources[i].path).filename().string()) {
      bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
      name.push_back(ok ? c : '_');
    }
    // Nor a name like an atomic write's temporary file, which open() removes.
    bool bad = name.empty() || name == "." || name == ".." || util::is_atomic_write_temporary(name);
    for (const char* r : reserved) bad = bad || name == r;
    if (bad) name = fmt::format("source_{}.txt", i);
    std::string unique = name;
    for (int k = 1; std::find(out.begin(), out.end(), unique) != out.end(); ++k) {
      auto dot = name.rfind('.');
      unique = dot == std::string::npos || dot == 0 ? fmt::format("{}_{}", name, k)
                                                    : fmt::format("{}_{}{}", name.substr(0, dot), k, name.substr(dot));
    }
    out.push_back(unique);
  }
  return out;
}

// The sources as readable files, and solution.json referring to them: each
// source is stored once (solution_files.hpp).
void write_solution_files(const util::Folder& run, const fs::path& dir, const Solution& s) {
  auto names = safe_file_names(s);
  Json j = s.to_json();
  for (std::size_t i = 0; i < s.sources.size(); ++i) {
    put(run, dir / names[i], s.sources[i].content);
    j["sources"][i] = Json::obj({{"path", s.sources[i].path}, {"file", names[i]}});
  }
  if (!s.launch_plan.empty()) put(run, dir / "launch_plan.json", s.launch_plan.to_json().dump(2));
  put(run, dir / "solution.json", j.dump(2));
}

// Reads one record of the run folder. A record that is not valid JSON, or
// holds a field of the wrong type, is an error that names its file: "invalid
// JSON" alone does not say which of the folder's files is damaged.
template <class F>
auto in_file(const fs::path& file, F&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}: {}", file.string(), e.what()));
  }
}

Json read_json(const util::Folder& run, const fs::path& rel, std::size_t max_bytes = SIZE_MAX) {
  std::string text = run.read(rel, max_bytes);  // its errors name the file
  return in_file(run.path() / rel, [&] { return Json::parse(text); });
}

Json parse_line(const std::string& line, const fs::path& file) {
  std::string err;
  auto j = Json::try_parse(line, &err);
  if (!j)
    throw Error(Status::parse, fmt::format("{}: a line is not valid JSON ({})", file.string(), err));
  return std::move(*j);
}

Solution read_solution(const util::Folder& run, const fs::path& dir) {
  const fs::path rel = dir / "solution.json";
  Json sj = read_json(run, rel);
  return in_file(run.path() / rel, [&] {
    return Solution::from_json(core::has_source_file_refs(sj) ? core::inline_source_files(sj, run, dir, SIZE_MAX) : sj);
  });
}

}  // namespace

Json AttemptRecord::to_json() const {
  return Json::obj({{"seq", seq},
                    {"round", round},
                    {"action", action},
                    {"solution_id", solution.id},
                    {"parent_id", solution.parent_id},
                    {"status", to_string(eval.status)},
                    {"latency_ms", eval.latency_ms},
                    {"speedup", eval.speedup},
                    {"time", time}});
}

struct RunStore::Impl {
  fs::path dir;
  util::Folder run;  // every access goes through it
  bool read_only = false;
  int lock_fd = -1;
  ~Impl() {
    if (lock_fd >= 0) ::close(lock_fd);  // releases the flock
  }
  util::AppendLog events;
  util::AppendLog transcript;
  util::AppendLog attempts;
  int next_event_seq = 0;
  std::function<void(const Json&)> listener;

  // An attempt folder holding this solution (any, when the same code was
  // evaluated twice: they hold the same files), or empty.
  // (Paths relative to the run folder.)
  fs::path attempt_folder_of(const std::string& id) const {
    if (id.empty()) return {};
    const std::string suffix = "-" + id;
    for (const auto& [name, kind] : run.list("attempts")) {
      const fs::path d = fs::path("attempts") / name;
      if (kind == util::EntryKind::folder && name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          run.kind(d / "solution.json") != util::EntryKind::none)
        return d;
    }
    return {};
  }

  static fs::path attempt_dir(const AttemptRecord& a) {
    std::string id = a.solution.id.empty() ? "no-code" : a.solution.id;
    return fs::path("attempts") / fmt::format("{:04d}-{}", a.seq, id);
  }
};

RunStore::RunStore() : impl_(std::make_unique<Impl>()) {}
RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;
RunStore::~RunStore() = default;

bool RunStore::exists(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(dir / "manifest.json", ec));  // a link there is refused when read
}

RunStore RunStore::create(const fs::path& dir, const Json& manifest) {
  if (exists(dir))
    throw Error(Status::invalid_argument,
                fmt::format("{} already holds a run; use `ksearch resume {}` to continue it, or choose "
                            "another --run-dir", dir.string(), dir.string()));
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(Status::invalid_argument, fmt::format("{} exists and is not a folder", dir.string()));
  util::make_dirs(dir);
  {
    RunStore s;
    s.impl_->dir = dir;
    s.impl_->run = util::Folder(dir);
    s.write_manifest(manifest);
  }
  return open(dir);
}

namespace {

// An exclusive, non-blocking lock held while a process writes the run.
int lock_run(const util::Folder& run) {
  int fd = run.open_lock_file("lock");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      throw Error(Status::state, fmt::format("{} is in use by another ksearch process (a run or resume is still "
                                             "going); wait for it or stop it first", run.path().string()));
    throw Error(Status::io, fmt::format("cannot lock {}: {}", (run.path() / "lock").string(), std::strerror(err)));
  }
  return fd;
}

// The run folder's own names. Before anything is written, none may be a
// link: refused at once, naming it, instead of after rounds already spent.
void refuse_links(const util::Folder& run) {
  for (const char* name : {"manifest.json", "events.jsonl", "transcript.jsonl", "attempts.jsonl", "attempts",
                           "world_model", "best.json", "best", "final_eval.json", "state.json", "lock"})
    run.refuse_link(name);
}

// What a kill between an atomic write and its rename leaves behind: gone at
// the next open, which holds the lock, so no writer is using them. Only
// those names, only regular files, only in the folders the store writes
// (a link is never followed: refuse_links checked the folders).
void remove_stale_temporaries(const util::Folder& run) {
  auto clean = [&](const fs::path& dir) {
    for (const auto& [name, kind] : run.list(dir))
      if (kind == util::EntryKind::file && util::is_atomic_write_temporary(name)) run.remove_file(dir / name);
  };
  clean(".");
  clean("best");
  clean("world_model");
  for (const auto& [name, kind] : run.list("attempts"))
    if (kind == util::EntryKind::folder) clean(fs::path("attempts") / name);
}

}  // namespace

RunStore RunStore::open_read_only(const fs::path& dir) {
  if (!exists(dir))
    throw Error(Status::not_found, fmt::format("{} holds no run (manifest.json is missing)", dir.string()));
  RunStore s;
  s.impl_->dir = dir;
  s.impl_->run = util::Folder(dir);
  s.impl_->read_only = true;
  return s;
}

RunStore RunStore::open(const fs::path& dir) {
  if (!exists(dir))
    throw Error(Status::not_found, fmt::format("{} holds no run (manifest.json is missing)", dir.string()));
  RunStore s;
  s.impl_->dir = dir;
  s.impl_->run = util::Folder(dir);
  const util::Folder& run = s.impl_->run;
  refuse_links(run);
  s.impl_->lock_fd = lock_run(run);
  remove_stale_temporaries(run);
  // A kill can tear the last line of a log; cut it so appends stay whole lines.
  for (const char* log : {"events.jsonl", "transcript.jsonl", "attempts.jsonl"}) run.truncate_torn_tail(log);
  s.impl_->next_event_seq = static_cast<int>(run.read_lines("events.jsonl").size());
  s.impl_->events = run.append_log("events.jsonl");
  s.impl_->transcript = run.append_log("transcript.jsonl");
  s.impl_->attempts = run.append_log("attempts.jsonl");
  return s;
}

const fs::path& RunStore::dir() const { return impl_->dir; }

Json RunStore::manifest() const {
  return read_json(impl_->run, "manifest.json");
}

namespace {
void require_writable(bool read_only, const fs::path& dir) {
  if (read_only) throw Error(Status::state, fmt::format("{} was opened read-only", dir.string()));
}
}  // namespace

void RunStore::write_manifest(const Json& manifest) {
  require_writable(impl_->read_only, impl_->dir);
  put(impl_->run, "manifest.json", manifest.dump(2) + "\n");
}

int RunStore::append_event(const std::string& type, Json data) {
  require_writable(impl_->read_only, impl_->dir);
  Json e = core::events::envelope(impl_->next_event_seq, utc_timestamp(), type, std::move(data));
  add(impl_->events, e.dump());
  if (impl_->listener) {
    try {
      impl_->listener(e);
    } catch (...) {
      // The event is on disk; a failing observer must not stop the run.
    }
  }
  return impl_->next_event_seq++;
}

void RunStore::set_event_listener(std::function<void(const Json& event)> listener) {
  impl_->listener = std::move(listener);
}

std::vector<Json> RunStore::events() const {
  std::vector<Json> out;
  for (const auto& line : impl_->run.read_lines("events.jsonl"))
    out.push_back(parse_line(line, impl_->dir / "events.jsonl"));
  return out;
}

void RunStore::append_transcript(const Json& entry) {
  require_writable(impl_->read_only, impl_->dir); add(impl_->transcript, entry.dump()); }

std::vector<Json> RunStore::transcript() const {
  std::vector<Json> out;
  for (const auto& line : impl_->run.read_lines("transcript.jsonl"))
    out.push_back(parse_line(line, impl_->dir / "transcript.jsonl"));
  return out;
}

void RunStore::record_attempt(const AttemptRecord& a) {
  require_writable(impl_->read_only, impl_->dir);
  const util::Folder& run = impl_->run;
  fs::path d = Impl::attempt_dir(a);
  run.make_dirs(d);
  if (!a.solution.sources.empty()) write_solution_files(run, d, a.solution);
  if (!a.raw_answer.empty()) put(run, d / "answer.txt", a.raw_answer);
  put(run, d / "eval.json", a.eval.to_json().dump(2));
  add(impl_->attempts, a.to_json().dump());
}

std::vector<AttemptRecord> RunStore::attempts() const {
  std::vector<AttemptRecord> out;
  const util::Folder& run = impl_->run;
  fs::path p = impl_->dir / "attempts.jsonl";
  for (const auto& line : run.read_lines("attempts.jsonl")) {
    Json j = parse_line(line, p);
    AttemptRecord a;
    in_file(p, [&] {
      a.seq = static_cast<int>(j.get_int("seq"));
      a.round = static_cast<int>(j.get_int("round"));
      a.action = j.get_string("action");
      a.time = j.get_string("time");
      a.solution.id = j.get_string("solution_id");
      a.solution.parent_id = j.get_string("parent_id");
    });
    fs::path d = Impl::attempt_dir(a);
    if (run.kind(d / "solution.json") != util::EntryKind::none) {
      a.solution = read_solution(run, d);
      a.solution.parent_id = j.get_string("parent_id");
    }
    Json ej = read_json(run, d / "eval.json");
    a.eval = in_file(run.path() / d / "eval.json", [&] { return EvalResult::from_json(ej); });
    if (run.kind(d / "answer.txt") != util::EntryKind::none) a.raw_answer = run.read(d / "answer.txt");
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](const AttemptRecord& x, const AttemptRecord& y) { return x.seq < y.seq; });
  return out;
}

void RunStore::write_world_model(std::uint64_t version, const Json& wm) {
  require_writable(impl_->read_only, impl_->dir);
  fs::path p = fs::path("world_model") / fmt::format("v{:06d}.json", version);
  if (impl_->run.kind(p) == util::EntryKind::file) return;
  put(impl_->run, p, wm.dump(2) + "\n");
}

void RunStore::remove_world_model(std::uint64_t version) {
  require_writable(impl_->read_only, impl_->dir);
  impl_->run.remove_file(fs::path("world_model") / fmt::format("v{:06d}.json", version));
}

std::vector<std::uint64_t> RunStore::world_model_versions() const {
  std::vector<std::uint64_t> out;
  for (const auto& [n, kind] : impl_->run.list("world_model")) {
    // vNNNNNN.json, at least six digits; anything else is not a snapshot.
    if (n.size() < 12 || n[0] != 'v' || n.substr(n.size() - 5) != ".json") continue;
    std::string digits = n.substr(1, n.size() - 6);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 18)
      continue;
    out.push_back(std::stoull(digits));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<Json> RunStore::latest_world_model() const {
  auto v = world_model_versions();
  if (v.empty()) return std::nullopt;
  return read_json(impl_->run, fs::path("world_model") / fmt::format("v{:06d}.json", v.back()),
                   core::kMaxWorldModelFileBytes);
}

void RunStore::write_best(const BestSolution& best) {
  require_writable(impl_->read_only, impl_->dir);
  // The record is one file, replaced atomically: a kill leaves the old best
  // or the new one, never a mix. It names the attempt folder that holds the
  // solution, so the code is not stored again; best/ is a readable view of
  // that folder (hard links), rebuilt after the record.
  // A link at best/ (or in it) is never deleted or written through: the
  // folder is opened without following links, and only its own entries go.
  const util::Folder& run = impl_->run;
  const fs::path from = impl_->attempt_folder_of(best.solution.id);
  Json record = Json::obj({{"round", best.round}, {"solution_id", best.solution.id}, {"eval", best.eval.to_json()}});
  if (from.empty()) record["solution"] = best.solution.to_json();  // not recorded as an attempt (an API caller's)
  else record["attempt"] = from.generic_string();
  put(run, "best.json", record.dump(2) + "\n");
  const fs::path d = "best";
  run.make_dirs(d);
  run.remove_files_in(d);
  if (from.empty()) {
    write_solution_files(run, d, best.solution);
  } else {
    for (const auto& [name, kind] : run.list(from))
      if (kind == util::EntryKind::file && name != "eval.json" && name != "answer.txt")
        run.link_or_copy(from / name, d / name);
  }
  put(run, d / "eval.json", best.eval.to_json().dump(2));
}

std::optional<BestSolution> RunStore::best() const {
  const util::Folder& run = impl_->run;
  fs::path p = impl_->dir / "best.json";
  if (run.kind("best.json") == util::EntryKind::none) return std::nullopt;
  Json j = read_json(run, "best.json");
  BestSolution b = in_file(p, [&] {
    BestSolution r;
    r.round = static_cast<int>(j.get_int("round"));
    if (const Json* s = j.find("solution")) r.solution = Solution::from_json(*s);  // inline (older runs, API callers)
    r.eval = EvalResult::from_json(j.at("eval"));
    return r;
  });
  if (!j.contains("solution")) {
    const std::string rel = j.get_string("attempt");
    const fs::path rp(rel);
    if (rel.empty() || rp.is_absolute() || std::any_of(rp.begin(), rp.end(), [](const fs::path& c) { return c == ".."; }))
      throw Error(Status::parse, fmt::format("{}: \"attempt\" must name a folder of the run, not \"{}\"", p.string(), rel));
    b.solution = read_solution(run, rp);
  }
  return b;
}

void RunStore::write_final_eval(const EvalResult& eval) {
  require_writable(impl_->read_only, impl_->dir);
  const std::string text = eval.to_json().dump(2) + "\n";
  put(impl_->run, "final_eval.json", text);
  if (impl_->run.kind("best") == util::EntryKind::folder) put(impl_->run, "best/final_eval.json", text);
}

std::optional<EvalResult> RunStore::final_eval() const {
  if (impl_->run.kind("final_eval.json") == util::EntryKind::none) return std::nullopt;
  Json j = read_json(impl_->run, "final_eval.json");
  return in_file(impl_->dir / "final_eval.json", [&] { return EvalResult::from_json(j); });
}

void RunStore::write_state(const Json& state) {
  require_writable(impl_->read_only, impl_->dir);
  put(impl_->run, "state.json", state.dump(2) + "\n");
}

std::optional<Json> RunStore::state() const {
  if (impl_->run.kind("state.json") == util::EntryKind::none) return std::nullopt;
  return read_json(impl_->run, "state.json");
}

KS_NAMESPACE_END
