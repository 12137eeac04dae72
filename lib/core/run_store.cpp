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
void put(const fs::path& path, std::string_view content) { util::write_file_atomic(path, util::redact(content)); }
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
    bool bad = name.empty() || name == "." || name == "..";
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
void write_solution_files(const fs::path& dir, const Solution& s) {
  auto names = safe_file_names(s);
  Json j = s.to_json();
  for (std::size_t i = 0; i < s.sources.size(); ++i) {
    put(dir / names[i], s.sources[i].content);
    j["sources"][i] = Json::obj({{"path", s.sources[i].path}, {"file", names[i]}});
  }
  if (!s.launch_plan.empty()) put(dir / "launch_plan.json", s.launch_plan.to_json().dump(2));
  put(dir / "solution.json", j.dump(2));
}

// `to` as a hard link to `from` (the same bytes stored once), or a copy
// where the file system cannot link.
void link_or_copy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::remove(to, ec);
  fs::create_hard_link(from, to, ec);
  if (ec) fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) throw Error(Status::io, fmt::format("cannot copy {} to {}: {}", from.string(), to.string(), ec.message()));
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

Json read_json(const fs::path& file) {
  std::string text = util::read_file(file);  // its errors name the file
  return in_file(file, [&] { return Json::parse(text); });
}

Json parse_line(const std::string& line, const fs::path& file) {
  std::string err;
  auto j = Json::try_parse(line, &err);
  if (!j)
    throw Error(Status::parse, fmt::format("{}: a line is not valid JSON ({})", file.string(), err));
  return std::move(*j);
}

Solution read_solution(const fs::path& dir) {
  const fs::path file = dir / "solution.json";
  Json sj = read_json(file);
  return in_file(file, [&] {
    return Solution::from_json(core::has_source_file_refs(sj) ? core::inline_source_files(sj, dir, SIZE_MAX) : sj);
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
  fs::path attempt_folder_of(const std::string& id) const {
    std::error_code ec;
    if (id.empty() || !fs::is_directory(dir / "attempts", ec)) return {};
    const std::string suffix = "-" + id;
    for (const auto& e : fs::directory_iterator(dir / "attempts", ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          fs::exists(e.path() / "solution.json", ec))
        return e.path();
    }
    return {};
  }

  fs::path attempt_dir(const AttemptRecord& a) const {
    std::string id = a.solution.id.empty() ? "no-code" : a.solution.id;
    return dir / "attempts" / fmt::format("{:04d}-{}", a.seq, id);
  }
};

RunStore::RunStore() : impl_(std::make_unique<Impl>()) {}
RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;
RunStore::~RunStore() = default;

bool RunStore::exists(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "manifest.json", ec);
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
    s.write_manifest(manifest);
  }
  return open(dir);
}

namespace {

// An exclusive, non-blocking lock held while a process writes the run.
int lock_run(const fs::path& dir) {
  fs::path p = dir / "lock";
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(Status::io, fmt::format("cannot open {}: {}", p.string(), std::strerror(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      throw Error(Status::state, fmt::format("{} is in use by another ksearch process (a run or resume is still "
                                             "going); wait for it or stop it first", dir.string()));
    throw Error(Status::io, fmt::format("cannot lock {}: {}", p.string(), std::strerror(err)));
  }
  return fd;
}

}  // namespace

RunStore RunStore::open_read_only(const fs::path& dir) {
  if (!exists(dir))
    throw Error(Status::not_found, fmt::format("{} holds no run (manifest.json is missing)", dir.string()));
  RunStore s;
  s.impl_->dir = dir;
  s.impl_->read_only = true;
  return s;
}

RunStore RunStore::open(const fs::path& dir) {
  if (!exists(dir))
    throw Error(Status::not_found, fmt::format("{} holds no run (manifest.json is missing)", dir.string()));
  RunStore s;
  s.impl_->dir = dir;
  s.impl_->lock_fd = lock_run(dir);
  // A kill can tear the last line of a log; cut it so appends stay whole lines.
  for (const char* log : {"events.jsonl", "transcript.jsonl", "attempts.jsonl"})
    util::truncate_torn_tail(dir / log);
  s.impl_->next_event_seq = static_cast<int>(util::read_lines(dir / "events.jsonl").size());
  s.impl_->events = util::AppendLog(dir / "events.jsonl");
  s.impl_->transcript = util::AppendLog(dir / "transcript.jsonl");
  s.impl_->attempts = util::AppendLog(dir / "attempts.jsonl");
  return s;
}

const fs::path& RunStore::dir() const { return impl_->dir; }

Json RunStore::manifest() const {
  return read_json(impl_->dir / "manifest.json");
}

namespace {
void require_writable(bool read_only, const fs::path& dir) {
  if (read_only) throw Error(Status::state, fmt::format("{} was opened read-only", dir.string()));
}
}  // namespace

void RunStore::write_manifest(const Json& manifest) {
  require_writable(impl_->read_only, impl_->dir);
  put(impl_->dir / "manifest.json", manifest.dump(2) + "\n");
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
  fs::path p = impl_->dir / "events.jsonl";
  for (const auto& line : util::read_lines(p)) out.push_back(parse_line(line, p));
  return out;
}

void RunStore::append_transcript(const Json& entry) {
  require_writable(impl_->read_only, impl_->dir); add(impl_->transcript, entry.dump()); }

std::vector<Json> RunStore::transcript() const {
  std::vector<Json> out;
  fs::path p = impl_->dir / "transcript.jsonl";
  for (const auto& line : util::read_lines(p)) out.push_back(parse_line(line, p));
  return out;
}

void RunStore::record_attempt(const AttemptRecord& a) {
  require_writable(impl_->read_only, impl_->dir);
  fs::path d = impl_->attempt_dir(a);
  util::make_dirs(d);
  if (!a.solution.sources.empty()) write_solution_files(d, a.solution);
  if (!a.raw_answer.empty()) put(d / "answer.txt", a.raw_answer);
  put(d / "eval.json", a.eval.to_json().dump(2));
  add(impl_->attempts, a.to_json().dump());
}

std::vector<AttemptRecord> RunStore::attempts() const {
  std::vector<AttemptRecord> out;
  fs::path p = impl_->dir / "attempts.jsonl";
  for (const auto& line : util::read_lines(p)) {
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
    fs::path d = impl_->attempt_dir(a);
    if (fs::exists(d / "solution.json")) {
      a.solution = read_solution(d);
      a.solution.parent_id = j.get_string("parent_id");
    }
    Json ej = read_json(d / "eval.json");
    a.eval = in_file(d / "eval.json", [&] { return EvalResult::from_json(ej); });
    if (fs::exists(d / "answer.txt")) a.raw_answer = util::read_file(d / "answer.txt");
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](const AttemptRecord& x, const AttemptRecord& y) { return x.seq < y.seq; });
  return out;
}

void RunStore::write_world_model(std::uint64_t version, const Json& wm) {
  require_writable(impl_->read_only, impl_->dir);
  fs::path p = impl_->dir / "world_model" / fmt::format("v{:06d}.json", version);
  std::error_code ec;
  if (fs::exists(p, ec)) return;
  put(p, wm.dump(2) + "\n");
}

std::vector<std::uint64_t> RunStore::world_model_versions() const {
  std::vector<std::uint64_t> out;
  std::error_code ec;
  fs::path d = impl_->dir / "world_model";
  if (!fs::is_directory(d, ec)) return out;
  for (const auto& e : fs::directory_iterator(d)) {
    // vNNNNNN.json, at least six digits; anything else is not a snapshot.
    std::string n = e.path().filename().string();
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
  return read_json(impl_->dir / "world_model" / fmt::format("v{:06d}.json", v.back()));
}

void RunStore::write_best(const BestSolution& best) {
  require_writable(impl_->read_only, impl_->dir);
  // The record is one file, replaced atomically: a kill leaves the old best
  // or the new one, never a mix. It names the attempt folder that holds the
  // solution, so the code is not stored again; best/ is a readable view of
  // that folder (hard links), rebuilt after the record.
  const fs::path from = impl_->attempt_folder_of(best.solution.id);
  Json record = Json::obj({{"round", best.round}, {"solution_id", best.solution.id}, {"eval", best.eval.to_json()}});
  if (from.empty()) record["solution"] = best.solution.to_json();  // not recorded as an attempt (an API caller's)
  else record["attempt"] = fs::relative(from, impl_->dir).string();
  put(impl_->dir / "best.json", record.dump(2) + "\n");
  fs::path d = impl_->dir / "best";
  util::make_dirs(d);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec)) fs::remove(e.path(), ec);
  if (from.empty()) {
    write_solution_files(d, best.solution);
  } else {
    for (const auto& e : fs::directory_iterator(from))
      if (e.is_regular_file() && e.path().filename() != "eval.json" && e.path().filename() != "answer.txt")
        link_or_copy(e.path(), d / e.path().filename());
  }
  put(d / "eval.json", best.eval.to_json().dump(2));
}

std::optional<BestSolution> RunStore::best() const {
  std::error_code ec;
  fs::path p = impl_->dir / "best.json";
  if (!fs::exists(p, ec)) return std::nullopt;
  Json j = read_json(p);
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
    b.solution = read_solution(impl_->dir / rp);
  }
  return b;
}

void RunStore::write_final_eval(const EvalResult& eval) {
  require_writable(impl_->read_only, impl_->dir);
  const std::string text = eval.to_json().dump(2) + "\n";
  util::write_file_atomic(impl_->dir / "final_eval.json", text);
  std::error_code ec;
  if (fs::is_directory(impl_->dir / "best", ec)) util::write_file_atomic(impl_->dir / "best" / "final_eval.json", text);
}

std::optional<EvalResult> RunStore::final_eval() const {
  std::error_code ec;
  fs::path p = impl_->dir / "final_eval.json";
  if (!fs::exists(p, ec)) return std::nullopt;
  Json j = read_json(p);
  return in_file(p, [&] { return EvalResult::from_json(j); });
}

void RunStore::write_state(const Json& state) {
  require_writable(impl_->read_only, impl_->dir);
  put(impl_->dir / "state.json", state.dump(2) + "\n");
}

std::optional<Json> RunStore::state() const {
  std::error_code ec;
  if (!fs::exists(impl_->dir / "state.json", ec)) return std::nullopt;
  return read_json(impl_->dir / "state.json");
}

KS_NAMESPACE_END
