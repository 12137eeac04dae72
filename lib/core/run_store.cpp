#include "ksearch/run_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>

#include "core/fs.hpp"
#include "ksearch/error.hpp"

namespace ks {

namespace fs = std::filesystem;
using detail::AppendLog;

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

// File names written into the run folder come from LLM answers: keep only a
// safe base name so nothing escapes the folder.
std::string safe_file_name(const std::string& path, int index) {
  std::string base = fs::path(path).filename().string();
  std::string out;
  for (char c : base) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || out == "." || out == ".." || out == "solution.json" || out == "eval.json" ||
      out == "answer.txt")
    out = fmt::format("source_{}.txt", index);
  return out;
}

void write_solution_files(const fs::path& dir, const Solution& s) {
  for (std::size_t i = 0; i < s.sources.size(); ++i)
    detail::write_file_atomic(dir / safe_file_name(s.sources[i].path, static_cast<int>(i)),
                              s.sources[i].content);
  if (!s.launch_plan.is_null()) detail::write_file_atomic(dir / "launch_plan.json", s.launch_plan.dump(2));
}

Json parse_line(const std::string& line, const fs::path& file) {
  std::string err;
  auto j = Json::try_parse(line, &err);
  if (!j)
    throw Error(Status::parse, fmt::format("{}: a line is not valid JSON ({})", file.string(), err));
  return std::move(*j);
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
  AppendLog events;
  AppendLog transcript;
  AppendLog attempts;
  int next_event_seq = 0;

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
  detail::make_dirs(dir);
  RunStore s;
  s.impl_->dir = dir;
  s.write_manifest(manifest);
  return open(dir);
}

RunStore RunStore::open(const fs::path& dir) {
  if (!exists(dir))
    throw Error(Status::not_found, fmt::format("{} holds no run (manifest.json is missing)", dir.string()));
  RunStore s;
  s.impl_->dir = dir;
  // A kill can tear the last line of a log; cut it so appends stay whole lines.
  for (const char* log : {"events.jsonl", "transcript.jsonl", "attempts.jsonl"})
    detail::truncate_torn_tail(dir / log);
  s.impl_->next_event_seq = static_cast<int>(detail::read_lines(dir / "events.jsonl").size());
  s.impl_->events = AppendLog(dir / "events.jsonl");
  s.impl_->transcript = AppendLog(dir / "transcript.jsonl");
  s.impl_->attempts = AppendLog(dir / "attempts.jsonl");
  return s;
}

const fs::path& RunStore::dir() const { return impl_->dir; }

Json RunStore::manifest() const {
  return Json::parse(detail::read_file(impl_->dir / "manifest.json"));
}

void RunStore::write_manifest(const Json& manifest) {
  detail::write_file_atomic(impl_->dir / "manifest.json", manifest.dump(2) + "\n");
}

int RunStore::append_event(const std::string& type, Json data) {
  Json e = Json::obj({{"seq", impl_->next_event_seq}, {"time", utc_timestamp()}, {"type", type}});
  if (data.is_object()) {
    for (auto& [k, v] : data.as_object()) e[k] = std::move(v);
  } else if (!data.is_null()) {
    e["data"] = std::move(data);
  }
  impl_->events.append(e.dump());
  return impl_->next_event_seq++;
}

std::vector<Json> RunStore::events() const {
  std::vector<Json> out;
  fs::path p = impl_->dir / "events.jsonl";
  for (const auto& line : detail::read_lines(p)) out.push_back(parse_line(line, p));
  return out;
}

void RunStore::append_transcript(const Json& entry) { impl_->transcript.append(entry.dump()); }

std::vector<Json> RunStore::transcript() const {
  std::vector<Json> out;
  fs::path p = impl_->dir / "transcript.jsonl";
  for (const auto& line : detail::read_lines(p)) out.push_back(parse_line(line, p));
  return out;
}

void RunStore::record_attempt(const AttemptRecord& a) {
  fs::path d = impl_->attempt_dir(a);
  detail::make_dirs(d);
  if (!a.solution.sources.empty()) {
    write_solution_files(d, a.solution);
    detail::write_file_atomic(d / "solution.json", a.solution.to_json().dump(2));
  }
  if (!a.raw_answer.empty()) detail::write_file_atomic(d / "answer.txt", a.raw_answer);
  detail::write_file_atomic(d / "eval.json", a.eval.to_json().dump(2));
  impl_->attempts.append(a.to_json().dump());
}

std::vector<AttemptRecord> RunStore::attempts() const {
  std::vector<AttemptRecord> out;
  fs::path p = impl_->dir / "attempts.jsonl";
  for (const auto& line : detail::read_lines(p)) {
    Json j = parse_line(line, p);
    AttemptRecord a;
    a.seq = static_cast<int>(j.get_int("seq"));
    a.round = static_cast<int>(j.get_int("round"));
    a.action = j.get_string("action");
    a.time = j.get_string("time");
    a.solution.id = j.get_string("solution_id");
    a.solution.parent_id = j.get_string("parent_id");
    fs::path d = impl_->attempt_dir(a);
    if (fs::exists(d / "solution.json")) {
      a.solution = Solution::from_json(Json::parse(detail::read_file(d / "solution.json")));
      a.solution.parent_id = j.get_string("parent_id");
    }
    a.eval = EvalResult::from_json(Json::parse(detail::read_file(d / "eval.json")));
    if (fs::exists(d / "answer.txt")) a.raw_answer = detail::read_file(d / "answer.txt");
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](const AttemptRecord& x, const AttemptRecord& y) { return x.seq < y.seq; });
  return out;
}

void RunStore::write_world_model(std::uint64_t version, const Json& wm) {
  fs::path p = impl_->dir / "world_model" / fmt::format("v{:06d}.json", version);
  std::error_code ec;
  if (fs::exists(p, ec)) return;
  detail::write_file_atomic(p, wm.dump(2) + "\n");
}

std::vector<std::uint64_t> RunStore::world_model_versions() const {
  std::vector<std::uint64_t> out;
  std::error_code ec;
  fs::path d = impl_->dir / "world_model";
  if (!fs::is_directory(d, ec)) return out;
  for (const auto& e : fs::directory_iterator(d)) {
    std::string n = e.path().filename().string();
    if (n.size() == 12 && n[0] == 'v' && n.substr(7) == ".json") out.push_back(std::stoull(n.substr(1, 6)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<Json> RunStore::latest_world_model() const {
  auto v = world_model_versions();
  if (v.empty()) return std::nullopt;
  return Json::parse(detail::read_file(impl_->dir / "world_model" / fmt::format("v{:06d}.json", v.back())));
}

void RunStore::write_best(const BestSolution& best) {
  fs::path d = impl_->dir / "best";
  detail::make_dirs(d);
  // Remove files of an earlier best that this one does not have.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec)) fs::remove(e.path(), ec);
  write_solution_files(d, best.solution);
  detail::write_file_atomic(d / "eval.json", best.eval.to_json().dump(2));
  Json sj = best.solution.to_json();
  sj["round"] = best.round;
  detail::write_file_atomic(d / "solution.json", sj.dump(2));
}

std::optional<BestSolution> RunStore::best() const {
  fs::path d = impl_->dir / "best";
  std::error_code ec;
  if (!fs::exists(d / "solution.json", ec) || !fs::exists(d / "eval.json", ec)) return std::nullopt;
  BestSolution b;
  Json sj = Json::parse(detail::read_file(d / "solution.json"));
  b.round = static_cast<int>(sj.get_int("round"));
  sj.erase("round");
  b.solution = Solution::from_json(sj);
  b.eval = EvalResult::from_json(Json::parse(detail::read_file(d / "eval.json")));
  return b;
}

void RunStore::write_state(const Json& state) {
  detail::write_file_atomic(impl_->dir / "state.json", state.dump(2) + "\n");
}

std::optional<Json> RunStore::state() const {
  std::error_code ec;
  if (!fs::exists(impl_->dir / "state.json", ec)) return std::nullopt;
  return Json::parse(detail::read_file(impl_->dir / "state.json"));
}

}  // namespace ks
