#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <set>
#include <variant>

#include "util/process.hpp"

#include <filesystem>

#include "eval/fixtures.hpp"
#include "eval/messages.hpp"
#include "eval/process_evaluator.hpp"
#include "eval/protocol.hpp"
#include "eval/worker_client.hpp"
#include "ksearch/error.hpp"
#include "support/test_util.hpp"

using namespace ks;
using namespace ks::eval;

TEST_CASE("protocol: frames round-trip, whole or one byte at a time") {
  Json a = Json::obj({{"op", "evaluate"}, {"n", 42}, {"text", std::string(100000, 'x')}});
  Json b = Json::obj({{"event", "pong"}});
  std::string bytes = encode_frame(a) + encode_frame(b);
  CHECK(bytes.substr(0, 4) == "KSW1");

  FrameDecoder whole;
  whole.feed(bytes);
  CHECK(whole.next() == a);
  CHECK(whole.next() == b);
  CHECK_FALSE(whole.next().has_value());

  FrameDecoder trickle;
  std::vector<Json> got;
  for (char c : bytes) {
    trickle.feed(std::string_view(&c, 1));
    while (auto m = trickle.next()) got.push_back(*m);
  }
  REQUIRE(got.size() == 2);
  CHECK(got[0] == a);
  CHECK(got[1] == b);
  CHECK(trickle.pending() == 0);
}

TEST_CASE("protocol: a corrupt stream fails loudly") {
  SUBCASE("bad magic") {
    FrameDecoder d;
    d.feed("hello world, not a frame");
    CHECK_THROWS_WITH_AS(d.next(), doctest::Contains("bad frame magic"), ks::Error);
  }
  SUBCASE("length over the limit") {
    FrameDecoder d;
    std::string h = "KSW1";
    h += std::string("\xff\xff\xff\x7f", 4);
    d.feed(h);
    CHECK_THROWS_WITH_AS(d.next(), doctest::Contains("exceeds the limit"), ks::Error);
  }
  SUBCASE("payload that is not JSON") {
    FrameDecoder d;
    std::string h = "KSW1";
    h += std::string("\x03\x00\x00\x00", 4);
    d.feed(h + "{{{");
    CHECK_THROWS_WITH_AS(d.next(), doctest::Contains("not JSON"), ks::Error);
  }
}

TEST_CASE("protocol: read_frame over a pipe, clean and torn ends") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  Json m = Json::obj({{"op", "ping"}});
  REQUIRE(write_frame(fds[1], m));
  std::string frame = encode_frame(m);
  REQUIRE(::write(fds[1], frame.data(), 5) == 5);  // a torn frame
  ::close(fds[1]);
  auto first = read_frame(fds[0]);
  REQUIRE(first.has_value());
  CHECK(*first == m);
  CHECK_THROWS_WITH_AS(read_frame(fds[0]), doctest::Contains("stream ended inside a frame"), ks::Error);
  ::close(fds[0]);

  REQUIRE(::pipe(fds) == 0);
  ::close(fds[1]);
  CHECK_FALSE(read_frame(fds[0]).has_value());  // clean end of stream
  ::close(fds[0]);
}

TEST_CASE("protocol: the worker says hello, answers, reports bad requests and survives them") {
  auto dir = ks::test::scratch_dir("protocol_worker");
  WorkerProcess w(locate_worker(), {"--role", "run", "--device", "host", "--cache-dir", dir.string()});
  msg::Hello hello = w.wait_hello(30);
  CHECK(hello.role == "run");
  REQUIRE(hello.device.has_value());
  CHECK(hello.device->backend == "host");
  CHECK(hello.pid == w.pid());
  // It says when its main() began, so the parent can tell the sandbox's and
  // the exec's part of the start from the worker's own.
  CHECK(hello.started_s > 0);
  const auto start = w.start_times();
  CHECK(start.total_s > 0);
  CHECK(start.to_main_s > 0);
  CHECK(start.to_main_s <= start.total_s);

  // Safety nets: the replies are immediate when honest.
  auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(60); };
  auto failure = [&](const Json& frame) {
    w.send_frame(frame);
    Json reply;
    REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
    msg::Reply r = msg::reply_from_json(reply);
    REQUIRE(std::holds_alternative<msg::Failed>(r));
    return std::get<msg::Failed>(r);
  };
  msg::Failed f = failure(Json::obj({{"op", "no-such-op"}}));
  CHECK(f.status == Status::invalid_argument);
  CHECK(f.message.find("unknown op \"no-such-op\"") != std::string::npos);
  CHECK(failure(Json::obj({{"no-op", 1}})).message.find("without \"op\"") != std::string::npos);
  CHECK(failure(Json::arr({1, 2})).message.find("not a JSON object") != std::string::npos);
  // A malformed request names the op and the field it lacks.
  f = failure(Json::obj({{"op", "evaluate"}, {"task_key", "never-sent"}}));
  CHECK(f.message.find("malformed \"evaluate\"") != std::string::npos);
  CHECK(f.message.find("candidate") != std::string::npos);
  CHECK(failure(Json::obj({{"op", "evaluate"}, {"task_key", 7}})).message.find("malformed") != std::string::npos);
  // A compile request is no run worker's business.
  CompileRequest compile;
  compile.solution = ks::test::vadd_candidate(ks::test::kGoodBody);
  CHECK(failure(msg::to_json(msg::Compile{compile})).message.find("unknown op \"compile\"") != std::string::npos);

  // A well-formed request for a task this worker was never sent.
  msg::Evaluate e;
  e.task_key = "never-sent";
  e.run.candidate.solution = ks::test::vadd_candidate(ks::test::kGoodBody);
  e.run.reference.solution = ks::test::vadd_candidate(ks::test::kGoodBody, "reference");
  e.run.workloads = {"w0"};
  w.send(e);
  Json reply;
  REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
  msg::Reply r = msg::reply_from_json(reply);
  REQUIRE(std::holds_alternative<msg::Failed>(r));
  CHECK_MESSAGE(std::get<msg::Failed>(r).message.find("unknown task key") != std::string::npos,
                std::get<msg::Failed>(r).message);

  w.send(msg::Ping{});
  REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
  r = msg::reply_from_json(reply);
  REQUIRE(std::holds_alternative<msg::Pong>(r));
  CHECK(std::get<msg::Pong>(r).pid == w.pid());
}

TEST_CASE("protocol: garbage on the worker's stdin ends it with a clear message") {
  auto dir = ks::test::scratch_dir("protocol_garbage");
  util::Subprocess p({.argv = {locate_worker().string(), "--role", "run", "--device", "host",
                                     "--cache-dir", dir.string()}});
  FrameDecoder d;
  std::optional<Json> hello;
  for (int i = 0; i < 300 && !hello; ++i) {
    std::string chunk;
    util::read_some(p.stdout_fd(), chunk, 0, std::chrono::milliseconds(100));
    d.feed(chunk);
    hello = d.next();
  }
  REQUIRE(hello.has_value());
  std::string garbage = "this is not a frame at all";
  REQUIRE(util::write_all_fd(p.stdin_fd(), garbage.data(), garbage.size()));
  auto status = p.wait_for(std::chrono::seconds(60));
  REQUIRE(status.has_value());
  util::CommandResult r;
  util::decode_wait_status(*status, r);
  CHECK_FALSE(r.signaled);
  CHECK(r.exit_code == 1);
  std::string err;
  while (util::read_some(p.stderr_fd(), err, 0, std::chrono::milliseconds(50))) {
  }
  CHECK(err.find("bad frame magic") != std::string::npos);
}

TEST_CASE("protocol: a bad device or role is a clear start-up error") {
  auto dir = ks::test::scratch_dir("protocol_bad_device");
  WorkerProcess w(locate_worker(), {"--role", "run", "--device", "tpu:0", "--cache-dir", dir.string()});
  CHECK_THROWS_WITH_AS(w.wait_hello(30), doctest::Contains("bad device"), ks::Error);
}

TEST_CASE("protocol: options and prepared solutions survive JSON") {
  EvalOptions o;
  o.seeds_per_workload = 3;
  o.only_workloads = {"a", "b"};
  o.flush_l2 = false;
  o.extra_compile_flags = {"-DX=1"};
  EvalOptions back = EvalOptions::from_json(o.to_json());
  CHECK(back.seeds_per_workload == 3);
  CHECK(back.only_workloads == o.only_workloads);
  CHECK_FALSE(back.flush_l2);
  CHECK(back.extra_compile_flags == o.extra_compile_flags);

  PreparedSolution p;
  p.solution.language = Language::cpp;
  p.solution.sources = {{"k.cpp", "int x;"}};
  p.solution.finalize();
  Artifact a;
  a.language = Language::cpp;
  a.path = "/tmp/x.so";
  a.kernels = {"ks_call_0_0"};
  p.builds.push_back({{{"BLOCK", 64}}, a});
  p.workload_build["w"] = 0;
  PreparedSolution q = PreparedSolution::from_json(p.to_json());
  CHECK(q.solution.id == p.solution.id);
  REQUIRE(q.builds.size() == 1);
  CHECK(q.builds[0].params.at("BLOCK") == 64);
  CHECK(q.builds[0].artifact.path == "/tmp/x.so");
  CHECK(q.build_for("w") != nullptr);
  CHECK(q.build_for("other") == nullptr);
}

TEST_CASE("protocol: option validation names the bad option") {
  EvalOptions o;
  o.seeds_per_workload = 0;
  CHECK_THROWS_WITH_AS(validate_options(o), doctest::Contains("seeds_per_workload"), ks::Error);
  o.seeds_per_workload = 1;  // one input set is too easy to match by accident
  CHECK_THROWS_WITH_AS(validate_options(o), doctest::Contains("seeds_per_workload must be >= 2, is 1"), ks::Error);
  o.seeds_per_workload = 100000000;
  CHECK_THROWS_WITH_AS(validate_options(o), doctest::Contains("seeds_per_workload must be <= 64"), ks::Error);
  o.seeds_per_workload = 2;
  CHECK_NOTHROW(validate_options(o));
  o = {};
  o.max_reps = 2;
  o.min_reps = 5;
  CHECK_THROWS_WITH_AS(validate_options(o), doctest::Contains("max_reps"), ks::Error);
  o = {};
  o.run_tests = o.run_benchmarks = false;
  CHECK_THROWS_WITH_AS(validate_options(o), doctest::Contains("nothing to evaluate"), ks::Error);
  o = {};
  o.timing = static_cast<ks::TimingMode>(7);  // a value cast from outside the set
  CHECK_THROWS_WITH_AS(validate_options(o), doctest::Contains("timing 7 is not one of default, upstream"), ks::Error);
  o.timing = ks::TimingMode::upstream;
  CHECK_NOTHROW(validate_options(o));
  CHECK(o.to_json().get_string("timing") == "upstream");
  CHECK(EvalOptions::from_json(o.to_json()).timing == ks::TimingMode::upstream);
  // A name is read where the options arrive as JSON (a request, a manifest,
  // options_json): a bad one is named there, with the good ones.
  CHECK(EvalOptions::from_json(Json::parse(R"({"timing": "default"})")).timing == ks::TimingMode::standard);
  CHECK(EvalOptions::from_json(Json::object()).timing == ks::TimingMode::standard);
  CHECK_THROWS_WITH_AS(EvalOptions::from_json(Json::parse(R"({"timing": "gpumode"})")),
                       doctest::Contains("unknown timing \"gpumode\" (known: default, upstream)"), ks::Error);
  CHECK_NOTHROW(validate_options(EvalOptions{}));
}

TEST_CASE("protocol: the CUDA compile worker compiles, reports errors, and carries on") {
  if (!cuda_backend_built()) {
    MESSAGE("this build has no CUDA backend: the compile role is not testable");
    return;
  }
  auto dir = ks::test::scratch_dir("protocol_compile_worker");
  WorkerProcess w(locate_worker(), {"--role", "compile", "--cache-dir", dir.string()});
  w.wait_hello(60);
  auto request = [&](const std::string& code) {
    CompileRequest r;
    r.solution.language = Language::cuda;
    r.solution.sources = {{"kernel.cu", code}};
    r.solution.launch_plan = LaunchPlan::from_json(Json::parse(
        R"J({"kernels": [{"name": "scale", "grid": ["cdiv(N, 256)"], "block": [256], "args": ["x", "y", "N"]}]})J"));
    r.solution.finalize();
    r.arch = "sm_90a";  // NVRTC needs no GPU for a given architecture
    r.cache_dir = (dir / "cuda").string();
    r.timeout_s = 120;
    return msg::Compile{r};
  };
  auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(120); };
  auto compile = [&](const std::string& code) {
    w.send(request(code));
    Json reply;
    REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
    return msg::reply_from_json(reply);
  };
  msg::Reply reply = compile("extern \"C\" __global__ void scale(const float* x, float* y, int n) {\n"
                             "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }\n");
  if (const auto* failed = std::get_if<msg::Failed>(&reply)) {
    MESSAGE("NVRTC is not usable here: " << failed->message);
    return;
  }
  REQUIRE(std::holds_alternative<msg::Compiled>(reply));
  const Artifact& a = std::get<msg::Compiled>(reply).artifact;
  CHECK(a.language == Language::cuda);
  CHECK(std::filesystem::exists(a.path));

  reply = compile("extern \"C\" __global__ void scale(const float* x, float* y, int n) { y[0] = undefined_name; }\n");
  REQUIRE(std::holds_alternative<msg::CompileFailed>(reply));
  CHECK(std::get<msg::CompileFailed>(reply).log.find("undefined_name") != std::string::npos);

  // A second good compilation in the same (long-lived) worker.
  reply = compile("extern \"C\" __global__ void scale(const float* x, float* y, int n) {\n"
                  "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] + x[i]; }\n");
  CHECK(std::holds_alternative<msg::Compiled>(reply));
}

namespace {

// One message of every kind, with something in every field.
std::vector<msg::Request> sample_requests() {
  std::vector<msg::Request> out{msg::Ping{}, msg::Exit{}};
  msg::Evaluate e;
  e.task_key = "task-1";
  e.task = ks::test::vadd_task();
  e.run.candidate.solution = ks::test::vadd_candidate(ks::test::kGoodBody);
  e.run.candidate.flags = {"-O2"};
  e.run.candidate.builds.push_back({{{"BLOCK", 128}}, Artifact{}});
  e.run.candidate.workload_build = {{"w0", 0}};
  e.run.reference.solution = ks::test::vadd_candidate(ks::test::kGoodBody, "reference");
  e.run.options.seeds_per_workload = 3;
  e.run.workloads = {"w0", "w1"};
  e.run.time_reference = {"w1"};
  out.push_back(e);
  msg::Evaluate oracle = e;  // an oracle task: no reference solution, the oracle's seeds
  oracle.task.reset();
  oracle.run.reference = {};
  OracleSeed seed;
  seed.seed = 11;
  seed.index = 1;
  seed.trial_seed = 42;
  seed.inputs.push_back({"file", "", "/tmp/x.bin", 0, 64});
  seed.outputs.push_back({"file", "", "/tmp/x.bin", 64, 32});
  oracle.run.oracle["w0"] = {seed};
  out.push_back(oracle);
  out.push_back(msg::ProbeExternal{{"cuda_ipc", "abcd", "", 0, 16}});
  CompileRequest c;
  c.solution = ks::test::vadd_candidate(ks::test::kGoodBody);
  c.arch = "sm_90a";
  c.flags = {"-lineinfo"};
  c.params = {{"BLOCK", 256}};
  c.timeout_s = 30;
  out.push_back(msg::Compile{c});
  out.push_back(msg::Prepare{"w0", {{0, 5}, {1, 6}}, "file"});
  out.push_back(msg::Baseline{{"eager", "compile"}, 3, 10});
  return out;
}

std::vector<msg::Reply> sample_replies() {
  DeviceInfo d;
  d.backend = "host";
  d.name = "a CPU";
  WorkloadResult w;
  w.name = "w0";
  w.status = EvalStatus::incorrect;
  w.message = "off by one";
  EvalResult r;
  r.status = EvalStatus::passed;
  r.solution_id = "s1";
  r.workloads = {w};
  r.metrics = Json::obj({{"run_s", 0.5}});
  TimingStats t;
  t.mean_ms = 1.5;
  t.count = 10;
  Artifact a;
  a.path = "/tmp/k.so";
  a.kernels = {"k"};
  a.language = Language::cpp;
  OracleSeed seed;
  seed.seed = 3;
  seed.inputs.push_back({"file", "", "/tmp/x.bin", 0, 8});
  msg::Finished measured{r, false};
  measured.phases = PhaseTimes{};
  (*measured.phases)[Phase::checks] = 0.125;
  measured.phases->wall_s = 0.5;
  Artifact cuda_artifact;
  cuda_artifact.path = "/tmp/k.cubin";
  cuda_artifact.pch = "used";
  return {msg::Hello{"run", 12, d, "", ""},
          msg::Hello{"compile", 13, std::nullopt, "", ""},
          msg::Hello{"oracle", 14, std::nullopt, "NVIDIA H100", "2.5.0"},
          msg::Pong{15},
          msg::Failed{Status::invalid_argument, "bad request"},
          msg::Fatal{Status::no_device, "no such device"},
          msg::WorkloadStarted{"w0"},
          msg::Phase{"w0", FlowPhase{"timing", "timing the kernel", 2.5, true}},
          msg::ReferenceTimed{"w0", t},
          msg::WorkloadFinished{w},
          msg::Finished{r, true},
          msg::ExternalOk{},
          msg::Compiled{a},
          msg::CompileFailed{"does not compile", "error: undefined_name"},
          msg::Prepared{"w0", "file", {seed}, "cuda:0", "2.5.0"},
          msg::Baselines{"cuda:0", "2.5.0", true, Json::obj({{"eager", Json::obj({{"mean_ms", 1.0}})}})},
          msg::Hello{.role = "run", .pid = 16, .device = d, .started_s = 12345.5},
          measured,
          msg::Compiled{cuda_artifact}};
}

}  // namespace

TEST_CASE("protocol: every request and reply survives its codec") {
  std::set<std::size_t> kinds;
  for (const auto& r : sample_requests()) {
    kinds.insert(r.index());
    const Json j = msg::to_json(r);
    CAPTURE(j.dump());
    CHECK(j.get_string("op") == msg::name_of(r));
    msg::Request back = msg::request_from_json(j);
    CHECK(back.index() == r.index());
    CHECK(msg::to_json(back) == j);
    // Through a frame too, as it travels.
    FrameDecoder d;
    d.feed(encode_frame(j));
    CHECK(msg::to_json(msg::request_from_json(*d.next())) == j);
  }
  CHECK(kinds.size() == std::variant_size_v<msg::Request>);

  kinds.clear();
  for (const auto& r : sample_replies()) {
    kinds.insert(r.index());
    const Json j = msg::to_json(r);
    CAPTURE(j.dump());
    CHECK(j.get_string("event") == msg::name_of(r));
    msg::Reply back = msg::reply_from_json(j);
    CHECK(back.index() == r.index());
    CHECK(msg::to_json(back) == j);
  }
  CHECK(kinds.size() == std::variant_size_v<msg::Reply>);

  // Fields survive as values, not only as JSON.
  auto e = std::get<msg::Evaluate>(msg::request_from_json(msg::to_json(sample_requests()[2])));
  REQUIRE(e.task.has_value());
  CHECK(e.task->name == "test/vadd");
  CHECK(e.run.workloads == std::vector<std::string>{"w0", "w1"});
  CHECK(e.run.candidate.builds.at(0).params.at("BLOCK") == 128);
  auto o = std::get<msg::Evaluate>(msg::request_from_json(msg::to_json(sample_requests()[3])));
  CHECK(msg::to_json(sample_requests()[3]).at("reference").is_null());
  CHECK(o.run.oracle.at("w0").at(0).trial_seed == 42);
  auto f = std::get<msg::Finished>(msg::reply_from_json(msg::to_json(sample_replies()[10])));
  CHECK(f.restart);
  CHECK(f.result.workloads.at(0).message == "off by one");
  auto h = std::get<msg::Hello>(msg::reply_from_json(msg::to_json(sample_replies()[2])));
  CHECK_FALSE(h.device.has_value());
  CHECK(h.device_name == "NVIDIA H100");
  CHECK(h.started_s == 0);  // not said (an oracle)
  // Added fields: said when known, absent otherwise, so either side may be older.
  CHECK(std::get<msg::Hello>(msg::reply_from_json(msg::to_json(sample_replies()[16]))).started_s == 12345.5);
  CHECK_FALSE(msg::to_json(sample_replies()[10]).contains("phases"));
  CHECK_FALSE(f.phases.has_value());
  auto m = std::get<msg::Finished>(msg::reply_from_json(msg::to_json(sample_replies()[17])));
  REQUIRE(m.phases.has_value());
  CHECK((*m.phases)[Phase::checks] == 0.125);
  CHECK(m.phases->wall_s == 0.5);
  CHECK(std::get<msg::Compiled>(msg::reply_from_json(msg::to_json(sample_replies()[18]))).artifact.pch == "used");
  CHECK(std::get<msg::Compiled>(msg::reply_from_json(msg::to_json(sample_replies()[12]))).artifact.pch.empty());
}

TEST_CASE("protocol: a reply outside the catalogue is a clear error, never a crash") {
  auto rejects = [](const Json& j, const std::string& words) {
    try {
      msg::reply_from_json(j);
      FAIL("accepted " << j.dump());
    } catch (const ks::Error& e) {
      CHECK(e.status() == Status::subprocess);
      CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
    }
  };
  rejects(Json::obj({{"event", "launch_missiles"}}), "unknown event \"launch_missiles\"");
  rejects(Json::obj({{"op", "ping"}}), "without \"event\"");
  rejects(Json::obj({{"event", 3}}), "without \"event\"");
  rejects(Json("finished"), "not a JSON object");
  rejects(Json(), "not a JSON object");
  rejects(Json::obj({{"event", "finished"}}), "malformed \"finished\"");
  rejects(Json::obj({{"event", "finished"}, {"result", "not an object"}}), "malformed \"finished\"");
  rejects(Json::obj({{"event", "finished"}, {"result", EvalResult{}.to_json()}, {"phases", Json::obj({{"timing_s", -1}})}}),
          "malformed \"finished\"");
  rejects(Json::obj({{"event", "workload_started"}, {"workload", Json::arr({1})}}), "malformed \"workload_started\"");
  rejects(Json::obj({{"event", "compiled"}, {"artifact", Json::obj({{"language", "cobol"}})}}), "malformed \"compiled\"");
  rejects(Json::obj({{"event", "prepared"}, {"seeds", Json::arr({Json::obj({{"handover", "carrier pigeon"}})})}}),
          "malformed \"prepared\"");
  // Requests, on the worker's side, are invalid arguments.
  CHECK_THROWS_WITH_AS(msg::request_from_json(Json::obj({{"op", "format_disk"}})),
                       doctest::Contains("unknown op \"format_disk\""), ks::Error);
  CHECK_THROWS_WITH_AS(msg::request_from_json(Json::obj({{"op", "probe_external"}})),
                       doctest::Contains("malformed \"probe_external\""), ks::Error);
}
