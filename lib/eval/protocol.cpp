#include "eval/protocol.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ksearch/error.hpp"
#include "util/json_fields.hpp"
#include "util/process.hpp"

namespace ks::eval {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::uint32_t get_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Checks a header and returns the payload length.
std::size_t payload_length(const char* header) {
  if (std::string_view(header, 4) != kFrameMagic) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      unsigned char c = static_cast<unsigned char>(header[i]);
      shown += (c >= 32 && c < 127) ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
    }
    throw Error(Status::subprocess,
                fmt::format("worker protocol: bad frame magic \"{}\" (expected \"KSW1\"); the stream "
                            "is corrupt",
                            shown));
  }
  std::size_t n = get_u32(header + 4);
  if (n > kMaxFrameBytes)
    throw Error(Status::subprocess,
                fmt::format("worker protocol: frame of {} bytes exceeds the limit of {}", n, kMaxFrameBytes));
  return n;
}

Json parse_payload(std::string_view payload) {
  std::string err;
  auto j = Json::try_parse(payload, &err);
  if (!j) throw Error(Status::subprocess, "worker protocol: frame payload is not JSON: " + err);
  return std::move(*j);
}

}  // namespace

std::string encode_frame(const Json& message) {
  std::string payload = message.dump();
  if (payload.size() > kMaxFrameBytes)
    throw Error(Status::internal,
                fmt::format("worker protocol: message of {} bytes is too large", payload.size()));
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  out.append(kFrameMagic);
  put_u32(out, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

void FrameDecoder::feed(std::string_view bytes) {
  // Drop consumed bytes before growing, so the buffer stays small.
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (1u << 20)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

std::optional<Json> FrameDecoder::next() {
  if (pending() < kFrameHeaderBytes) return std::nullopt;
  std::size_t n = payload_length(buf_.data() + pos_);
  if (pending() < kFrameHeaderBytes + n) return std::nullopt;
  Json j = parse_payload(std::string_view(buf_).substr(pos_ + kFrameHeaderBytes, n));
  pos_ += kFrameHeaderBytes + n;
  return j;
}

bool write_frame(int fd, const Json& message) {
  std::string frame = encode_frame(message);
  return util::write_all_fd(fd, frame.data(), frame.size());
}

namespace {

// Reads exactly `size` bytes; returns the count read before end of stream.
std::size_t read_exact(int fd, char* dst, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, dst + got, size - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(Status::subprocess, fmt::format("worker protocol: read failed: {}", std::strerror(errno)));
    }
    got += static_cast<std::size_t>(n);
  }
  return got;
}

}  // namespace

std::optional<Json> read_frame(int fd) {
  char header[kFrameHeaderBytes];
  std::size_t got = read_exact(fd, header, sizeof header);
  if (got == 0) return std::nullopt;
  if (got < sizeof header)
    throw Error(Status::subprocess, "worker protocol: stream ended inside a frame header");
  std::size_t n = payload_length(header);
  std::string payload(n, '\0');
  if (read_exact(fd, payload.data(), n) < n)
    throw Error(Status::subprocess, "worker protocol: stream ended inside a frame");
  return parse_payload(payload);
}

}  // namespace ks::eval

namespace ks::eval::msg {
namespace {

// A field that must be an object: the types' own decoders are lenient
// (files written by hand), what a worker sends must be whole.
const Json& object_at(const Json& j, std::string_view key) {
  const Json& v = j.at(key);
  if (!v.is_object()) throw Error(Status::parse, fmt::format("\"{}\" is not an object", key));
  return v;
}

Status status_of(const Json& j) { return static_cast<Status>(j.get_int("status", static_cast<int>(Status::internal))); }

// Each message's fields, after its "op" or "event".
void put(Json&, const Ping&) {}
void put(Json&, const Exit&) {}
void put(Json& j, const Evaluate& m) {
  const RunRequest& r = m.run;
  j["task_key"] = m.task_key;
  if (m.task) j["task"] = m.task->to_json();
  j["candidate"] = r.candidate.to_json();
  j["reference"] = r.oracle.empty() ? r.reference.to_json() : Json();
  j["options"] = r.options.to_json();
  j["workloads"] = util::string_array(r.workloads);
  j["time_reference"] = util::string_array(r.time_reference);
  if (!r.oracle.empty()) {
    Json o = Json::object();
    for (const auto& [w, seeds] : r.oracle) {
      Json list = Json::array();
      for (const auto& s : seeds) list.push_back(s.to_json());
      o[w] = list;
    }
    j["oracle"] = o;
  }
}
void put(Json& j, const ProbeExternal& m) { j["tensor"] = m.tensor.to_json(); }
void put(Json& j, const Compile& m) { j["request"] = compile_request_to_json(m.request); }
void put(Json& j, const Prepare& m) {
  j["workload"] = m.workload;
  Json list = Json::array();
  for (const auto& s : m.seeds)
    list.push_back(Json::obj({{"index", s.index}, {"seed", static_cast<std::int64_t>(s.seed)}}));
  j["seeds"] = list;
  j["handover"] = m.handover;
}
void put(Json& j, const Baseline& m) {
  j["modes"] = util::string_array(m.modes);
  j["warmup"] = m.warmup;
  j["trials"] = m.trials;
}

void put(Json& j, const Hello& m) {
  j["role"] = m.role;
  j["pid"] = m.pid;
  if (m.device) j["device"] = m.device->to_json();
  else if (!m.device_name.empty()) j["device"] = m.device_name;
  if (!m.torch.empty()) j["torch"] = m.torch;
  if (m.started_s > 0) j["started_s"] = m.started_s;
}
void put(Json& j, const Pong& m) { j["pid"] = m.pid; }
void put(Json& j, const Failed& m) {
  j["status"] = static_cast<int>(m.status);
  j["message"] = m.message;
}
void put(Json& j, const Fatal& m) {
  j["status"] = static_cast<int>(m.status);
  j["message"] = m.message;
}
void put(Json& j, const WorkloadStarted& m) { j["workload"] = m.workload; }
void put(Json& j, const Phase& m) {
  j["workload"] = m.workload;
  const Json phase = m.phase.to_json();
  for (const auto& [k, v] : phase.as_object()) j[k] = v;
}
void put(Json& j, const ReferenceTimed& m) {
  j["workload"] = m.workload;
  j["timing"] = m.timing.to_json();
}
void put(Json& j, const WorkloadFinished& m) { j["result"] = m.result.to_json(); }
void put(Json& j, const Finished& m) {
  j["result"] = m.result.to_json();
  j["restart"] = m.restart;
  if (m.phases) j["phases"] = m.phases->to_json();
}
void put(Json&, const ExternalOk&) {}
void put(Json& j, const Compiled& m) { j["artifact"] = artifact_to_json(m.artifact); }
void put(Json& j, const CompileFailed& m) {
  j["message"] = m.message;
  j["log"] = m.log;
}
void put(Json& j, const Prepared& m) {
  j["workload"] = m.workload;
  j["handover"] = m.handover;
  Json list = Json::array();
  for (const auto& s : m.seeds) list.push_back(s.to_json());
  j["seeds"] = list;
  j["device"] = m.device;
  j["torch"] = m.torch;
}
void put(Json& j, const Baselines& m) {
  j["device"] = m.device;
  j["torch"] = m.torch;
  j["cached"] = m.cached;
  if (m.modes.is_object())
    for (const auto& [k, v] : m.modes.as_object()) j[k] = v;
}

// Each message from its JSON; a missing field throws (Json::at).
template <class T>
T take(const Json& j);

template <>
Ping take<Ping>(const Json&) { return {}; }
template <>
Exit take<Exit>(const Json&) { return {}; }
template <>
Evaluate take<Evaluate>(const Json& j) {
  Evaluate m;
  m.task_key = j.at("task_key").as_string();
  if (const Json* t = j.find("task"); t && !t->is_null()) m.task = TaskSpec::from_json(*t);
  RunRequest& r = m.run;
  r.candidate = PreparedSolution::from_json(object_at(j, "candidate"));
  // Null for an oracle task: its oracle supplies inputs and reference outputs.
  if (const Json* ref = j.find("reference"); ref && !ref->is_null()) r.reference = PreparedSolution::from_json(*ref);
  r.options = EvalOptions::from_json(object_at(j, "options"));
  r.workloads = util::string_list(&j.at("workloads"), "evaluate request: \"workloads\"");
  r.time_reference = util::string_list(j.find("time_reference"), "evaluate request: \"time_reference\"");
  if (const Json* o = j.find("oracle"); o && !o->is_null())
    for (const auto& [w, seeds] : o->as_object())
      for (const auto& s : seeds.as_array()) r.oracle[w].push_back(OracleSeed::from_json(s));
  return m;
}
template <>
ProbeExternal take<ProbeExternal>(const Json& j) {
  return {ExternalTensor::from_json(object_at(j, "tensor"))};
}
template <>
Compile take<Compile>(const Json& j) {
  return {compile_request_from_json(object_at(j, "request"))};
}
template <>
Prepare take<Prepare>(const Json& j) {
  Prepare m;
  m.workload = j.get_string("workload");
  for (const auto& s : j.at("seeds").as_array())
    m.seeds.push_back({static_cast<int>(s.at("index").as_int()), static_cast<std::uint64_t>(s.at("seed").as_int())});
  m.handover = j.at("handover").as_string();
  return m;
}
template <>
Baseline take<Baseline>(const Json& j) {
  Baseline m;
  m.modes = util::string_list(j.find("modes"), "\"modes\"");
  m.warmup = static_cast<int>(j.get_int("warmup", m.warmup));
  m.trials = static_cast<int>(j.get_int("trials", m.trials));
  return m;
}

template <>
Hello take<Hello>(const Json& j) {
  Hello m;
  m.role = j.get_string("role");
  m.pid = static_cast<int>(j.get_int("pid"));
  if (const Json* d = j.find("device")) {
    if (d->is_object()) m.device = DeviceInfo::from_json(*d);
    else if (d->is_string()) m.device_name = d->as_string();
  }
  m.torch = j.get_string("torch");
  m.started_s = j.get_number("started_s");
  return m;
}
template <>
Pong take<Pong>(const Json& j) {
  return {static_cast<int>(j.get_int("pid"))};
}
template <>
Failed take<Failed>(const Json& j) {
  return {status_of(j), j.get_string("message")};
}
template <>
Fatal take<Fatal>(const Json& j) {
  return {status_of(j), j.get_string("message")};
}
template <>
WorkloadStarted take<WorkloadStarted>(const Json& j) {
  return {j.at("workload").as_string()};
}
template <>
Phase take<Phase>(const Json& j) {
  return {j.at("workload").as_string(), FlowPhase::from_json(j)};
}
template <>
ReferenceTimed take<ReferenceTimed>(const Json& j) {
  return {j.at("workload").as_string(), TimingStats::from_json(object_at(j, "timing"))};
}
template <>
WorkloadFinished take<WorkloadFinished>(const Json& j) {
  return {WorkloadResult::from_json(object_at(j, "result"))};
}
template <>
Finished take<Finished>(const Json& j) {
  Finished m{EvalResult::from_json(object_at(j, "result")), j.get_bool("restart")};
  if (const Json* p = j.find("phases"); p && !p->is_null()) m.phases = PhaseTimes::from_json(*p);
  return m;
}
template <>
ExternalOk take<ExternalOk>(const Json&) { return {}; }
template <>
Compiled take<Compiled>(const Json& j) {
  return {artifact_from_json(object_at(j, "artifact"))};
}
template <>
CompileFailed take<CompileFailed>(const Json& j) {
  return {j.get_string("message"), j.get_string("log")};
}
template <>
Prepared take<Prepared>(const Json& j) {
  Prepared m;
  m.workload = j.get_string("workload");
  m.handover = j.get_string("handover");
  for (const auto& s : j.at("seeds").as_array()) m.seeds.push_back(OracleSeed::from_json(s));
  m.device = j.get_string("device");
  m.torch = j.get_string("torch");
  return m;
}
template <>
Baselines take<Baselines>(const Json& j) {
  Baselines m;
  m.device = j.get_string("device");
  m.torch = j.get_string("torch");
  m.cached = j.get_bool("cached");
  for (const auto& [k, v] : j.as_object())
    if (k != "event" && k != "device" && k != "torch" && k != "cached") m.modes[k] = v;
  return m;
}

template <class Variant>
Json encode(const Variant& v, const char* tag) {
  return std::visit(
      [&](const auto& m) {
        Json j = Json::obj({{tag, std::string(m.kName)}});
        put(j, m);
        return j;
      },
      v);
}

// The alternative of `Variant` named `name`, decoded from `j`; nullopt for
// a name no alternative has.
template <class Variant, std::size_t... I>
std::optional<Variant> decode(std::string_view name, const Json& j, std::index_sequence<I...>) {
  std::optional<Variant> out;
  ((!out && std::variant_alternative_t<I, Variant>::kName == name
        ? (out.emplace(take<std::variant_alternative_t<I, Variant>>(j)), 0)
        : 0),
   ...);
  return out;
}

template <class Variant>
Variant decode(const Json& j, const char* tag, const char* what, Status status) {
  if (!j.is_object()) throw Error(status, fmt::format("{}: a message that is not a JSON object", what));
  const Json* t = j.find(tag);
  if (!t || !t->is_string()) throw Error(status, fmt::format("{}: a message without \"{}\"", what, tag));
  const std::string& name = t->as_string();
  std::optional<Variant> out;
  try {
    out = decode<Variant>(name, j, std::make_index_sequence<std::variant_size_v<Variant>>());
  } catch (const std::exception& e) {
    throw Error(status, fmt::format("{}: a malformed \"{}\" message: {}", what, name, e.what()));
  }
  if (!out) throw Error(status, fmt::format("{}: unknown {} \"{}\"", what, tag, name));
  return std::move(*out);
}

}  // namespace

Json to_json(const Request& r) { return encode(r, "op"); }
Json to_json(const Reply& r) { return encode(r, "event"); }

Request request_from_json(const Json& j) {
  return decode<Request>(j, "op", "worker request", Status::invalid_argument);
}

Reply reply_from_json(const Json& j) { return decode<Reply>(j, "event", "ksearch-worker", Status::subprocess); }

std::string_view name_of(const Reply& r) {
  return std::visit([](const auto& m) { return m.kName; }, r);
}
std::string_view name_of(const Request& r) {
  return std::visit([](const auto& m) { return m.kName; }, r);
}

}  // namespace ks::eval::msg
