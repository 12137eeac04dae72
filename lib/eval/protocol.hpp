// The framed protocol between the evaluator and its ksearch-worker processes
// (and a task's reference oracle, which speaks it too), and the catalogue of
// every message that travels in it: one struct per request ("op") and per
// reply ("event"), each with the one codec both sides use.
//
// A frame is the magic "KSW1", the payload length as a 32-bit little-endian
// integer, and the payload: one compact JSON message. The magic makes a
// corrupted stream (a candidate writing to the wrong descriptor) fail loudly
// at the next frame instead of being misread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "eval/flow.hpp"
#include "eval/messages.hpp"
#include "eval/phases.hpp"
#include "ksearch/error.hpp"
#include "ksearch/json.hpp"
#include "ksearch/task.hpp"

namespace ks::eval {

inline constexpr std::string_view kFrameMagic = "KSW1";
inline constexpr std::size_t kFrameHeaderBytes = 8;
// Results and requests are small; a larger length means a corrupt stream.
inline constexpr std::size_t kMaxFrameBytes = 256u << 20;

// The exit code of a worker that reached its memory limit (RLIMIT_AS): an
// allocation failed, or a fault followed one. The parent reports the
// candidate as `memory_limit`, not as a crash.
inline constexpr int kWorkerExitMemoryLimit = 86;

std::string encode_frame(const Json& message);

// Reassembles frames from bytes that arrive in arbitrary pieces.
class FrameDecoder {
 public:
  void feed(std::string_view bytes);
  // The next complete message, or nullopt when more bytes are needed.
  // Throws ks::Error(Status::subprocess) on a bad magic, an oversized length
  // or a payload that is not JSON.
  std::optional<Json> next();
  // Bytes received but not yet returned as a message.
  std::size_t pending() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  std::size_t pos_ = 0;
};

// Writes one frame; false when the reader has gone.
bool write_frame(int fd, const Json& message);

// Blocking read of one frame (the worker's side). nullopt on a clean end of
// stream; throws ks::Error(Status::subprocess) on a torn or corrupt frame.
std::optional<Json> read_frame(int fd);

// The messages. A request carries {"op": NAME, ...}, a reply {"event": NAME,
// ...}; NAME is the struct's kName. Decoding is strict about what it needs
// and names the message and the field it missed; docs/evaluation.md ("The
// worker protocol") lists them all.
namespace msg {

// ---- Requests: the evaluator (or the oracle client) to a worker.

// Answered with Pong by every worker.
struct Ping {
  static constexpr std::string_view kName = "ping";
};
// Ends the worker's request loop (closing its stdin does the same).
struct Exit {
  static constexpr std::string_view kName = "exit";
};
// Run worker: evaluate one candidate. The task travels once per worker,
// under `task_key`; later requests name the key alone.
struct Evaluate {
  static constexpr std::string_view kName = "evaluate";
  std::string task_key;
  std::optional<TaskSpec> task;
  RunRequest run;  // `run.reference` travels as null for an oracle task
};
// Run worker: can it map this reference-oracle tensor? ExternalOk or Failed.
struct ProbeExternal {
  static constexpr std::string_view kName = "probe_external";
  ExternalTensor tensor;
};
// Compile worker: Compiled or CompileFailed.
struct Compile {
  static constexpr std::string_view kName = "compile";
  CompileRequest request;
};
// Reference oracle: the inputs and reference outputs of these seeds. Prepared.
struct Prepare {
  static constexpr std::string_view kName = "prepare";
  struct Seed {
    int index = 0;
    std::uint64_t seed = 0;
  };
  std::string workload;
  std::vector<Seed> seeds;
  std::string handover;  // "cuda_ipc" or "file"
};
// Reference oracle: time the reference module in these modes. Baselines.
struct Baseline {
  static constexpr std::string_view kName = "baseline";
  std::vector<std::string> modes;  // "eager", "compile"
  int warmup = 5;
  int trials = 100;
};

using Request = std::variant<Ping, Exit, Evaluate, ProbeExternal, Compile, Prepare, Baseline>;

Json to_json(const Request& r);
// Throws ks::Error(Status::invalid_argument) for an unknown op or a malformed
// request, naming it (the worker answers that as a Failed reply).
Request request_from_json(const Json& j);

// ---- Replies: a worker to the evaluator.

// The first message of every worker.
struct Hello {
  static constexpr std::string_view kName = "hello";
  std::string role;  // "run", "compile", "oracle"
  int pid = 0;
  std::optional<DeviceInfo> device;  // a run worker's device
  std::string device_name;           // an oracle's device, in words
  std::string torch;                 // an oracle's PyTorch version
  // When the worker's main() began, in monotonic_seconds(); 0 when not
  // said (an oracle). The parent's spawn to here is sandbox_setup_s.
  double started_s = 0;
};
struct Pong {
  static constexpr std::string_view kName = "pong";
  int pid = 0;
};
// A request failed as a whole; the worker goes on serving.
struct Failed {
  static constexpr std::string_view kName = "error";
  Status status = Status::internal;
  std::string message;
};
// The worker cannot start (its last message).
struct Fatal {
  static constexpr std::string_view kName = "fatal";
  Status status = Status::internal;
  std::string message;
};
// Progress of an Evaluate, sent the moment it happens.
struct WorkloadStarted {
  static constexpr std::string_view kName = "workload_started";
  std::string workload;
};
struct Phase {
  static constexpr std::string_view kName = "phase";
  std::string workload;
  FlowPhase phase;
};
struct ReferenceTimed {
  static constexpr std::string_view kName = "reference_timed";
  std::string workload;
  TimingStats timing;
};
struct WorkloadFinished {
  static constexpr std::string_view kName = "workload_finished";
  WorkloadResult result;
};
// The end of an Evaluate. `restart`: the worker's device may be unusable.
// `phases`: where the worker's time went (the flow's phases, wall_s from the
// request's arrival to this message), absent from a worker that did not say.
struct Finished {
  static constexpr std::string_view kName = "finished";
  EvalResult result;
  bool restart = false;
  std::optional<PhaseTimes> phases;
};
struct ExternalOk {
  static constexpr std::string_view kName = "external_ok";
};
struct Compiled {
  static constexpr std::string_view kName = "compiled";
  Artifact artifact;
};
// The candidate does not compile: the compiler's message and log.
struct CompileFailed {
  static constexpr std::string_view kName = "compile_failed";
  std::string message;
  std::string log;
};
struct Prepared {
  static constexpr std::string_view kName = "prepared";
  std::string workload;
  std::string handover;
  std::vector<OracleSeed> seeds;
  std::string device;
  std::string torch;
};
// Reference-module timings by mode: {"eager": {"mean_ms", ...}, "compile":
// {...} or {"error": ...}}.
struct Baselines {
  static constexpr std::string_view kName = "baseline";
  std::string device;
  std::string torch;
  bool cached = false;
  Json modes = Json::object();
};

using Reply = std::variant<Hello, Pong, Failed, Fatal, WorkloadStarted, Phase, ReferenceTimed, WorkloadFinished,
                           Finished, ExternalOk, Compiled, CompileFailed, Prepared, Baselines>;

Json to_json(const Reply& r);
// Throws ks::Error(Status::subprocess) for an unknown event or a malformed
// reply, naming it: a worker runs candidates, so what it says is checked.
Reply reply_from_json(const Json& j);

// The reply's event name (its kName).
std::string_view name_of(const Reply& r);
std::string_view name_of(const Request& r);

}  // namespace msg

}  // namespace ks::eval
