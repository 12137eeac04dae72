#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include "core/process.hpp"

#include <filesystem>

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
  Json hello = w.wait_hello(30);
  CHECK(hello.get_string("event") == "hello");
  CHECK(hello.at("device").get_string("backend") == "host");
  CHECK(hello.get_int("pid") == w.pid());

  auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(10); };
  Json reply;
  w.send(Json::obj({{"op", "no-such-op"}}));
  REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
  CHECK(reply.get_string("event") == "error");
  CHECK(reply.get_string("message").find("unknown op") != std::string::npos);

  w.send(Json::obj({{"op", "evaluate"}, {"task_key", "never-sent"}}));
  REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
  CHECK(reply.get_string("event") == "error");
  CHECK(reply.get_string("message").find("unknown task key") != std::string::npos);

  w.send(Json::obj({{"op", "ping"}}));
  REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
  CHECK(reply.get_string("event") == "pong");
}

TEST_CASE("protocol: garbage on the worker's stdin ends it with a clear message") {
  auto dir = ks::test::scratch_dir("protocol_garbage");
  ks::detail::Subprocess p({.argv = {locate_worker().string(), "--role", "run", "--device", "host",
                                     "--cache-dir", dir.string()}});
  FrameDecoder d;
  std::optional<Json> hello;
  for (int i = 0; i < 300 && !hello; ++i) {
    std::string chunk;
    ks::detail::read_some(p.stdout_fd(), chunk, 0, std::chrono::milliseconds(100));
    d.feed(chunk);
    hello = d.next();
  }
  REQUIRE(hello.has_value());
  std::string garbage = "this is not a frame at all";
  REQUIRE(ks::detail::write_all_fd(p.stdin_fd(), garbage.data(), garbage.size()));
  auto status = p.wait_for(std::chrono::seconds(10));
  REQUIRE(status.has_value());
  ks::detail::CommandResult r;
  ks::detail::decode_wait_status(*status, r);
  CHECK_FALSE(r.signaled);
  CHECK(r.exit_code == 1);
  std::string err;
  while (ks::detail::read_some(p.stderr_fd(), err, 0, std::chrono::milliseconds(50))) {
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
  o.timing = "gpumode";
  CHECK_THROWS_WITH_AS(validate_options(o), doctest::Contains("timing \"gpumode\" is not one of default, upstream"),
                       ks::Error);
  o.timing = "upstream";
  CHECK_NOTHROW(validate_options(o));
  CHECK(EvalOptions::from_json(o.to_json()).timing == "upstream");
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
    return Json::obj({{"op", "compile"}, {"request", compile_request_to_json(r)}});
  };
  auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(120); };
  Json reply;
  w.send(request("extern \"C\" __global__ void scale(const float* x, float* y, int n) {\n"
                 "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }\n"));
  REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
  if (reply.get_string("event") == "error") {
    MESSAGE("NVRTC is not usable here: " << reply.get_string("message"));
    return;
  }
  REQUIRE(reply.get_string("event") == "compiled");
  Artifact a = artifact_from_json(reply.at("artifact"));
  CHECK(a.language == Language::cuda);
  CHECK(std::filesystem::exists(a.path));

  w.send(request("extern \"C\" __global__ void scale(const float* x, float* y, int n) { y[0] = undefined_name; }\n"));
  REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
  CHECK(reply.get_string("event") == "compile_failed");
  CHECK(reply.get_string("log").find("undefined_name") != std::string::npos);

  // A second good compilation in the same (long-lived) worker.
  w.send(request("extern \"C\" __global__ void scale(const float* x, float* y, int n) {\n"
                 "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] + x[i]; }\n"));
  REQUIRE(w.receive(reply, deadline()) == WorkerProcess::Received::message);
  CHECK(reply.get_string("event") == "compiled");
}
