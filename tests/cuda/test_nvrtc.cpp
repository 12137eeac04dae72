// The NVRTC compiler: real compilations for sm_90a on a machine without a GPU
// (NVRTC needs none), the cubin cache, kernel discovery from the cubin, name
// expressions, precompiled headers and the source assembly rules.
#include <doctest/doctest.h>

#include <filesystem>

#include "eval/cuda/cubin.hpp"
#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/embedded.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
using namespace ks::eval;
using namespace ks::eval::cuda;

namespace {

bool nvrtc_present() {
  try {
    nvrtc();
    return true;
  } catch (const Error& e) {
    MESSAGE("skipped: " << e.what());
    return false;
  }
}

Solution cuda_solution(std::string source, Json plan = Json()) {
  Solution s;
  s.name = "test";
  s.language = Language::cuda;
  s.sources = {{"kernel.cu", std::move(source)}};
  s.launch_plan = ks::LaunchPlan::from_json(plan);
  return s;
}

CompileRequest request(Solution s, const std::string& cache, std::string arch = "sm_90a") {
  CompileRequest r;
  r.solution = std::move(s);
  r.arch = std::move(arch);
  r.cache_dir = cache;
  return r;
}

CudaCompiler compiler(bool pch = false) {
  CudaCompilerOptions o;
  o.use_pch = pch;
  return CudaCompiler(o);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* kHeaderHeavy = R"(#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <cuda/pipeline>
#include <cuda/barrier>
#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>

namespace cg = cooperative_groups;

extern "C" __global__ void bf16_sum(const __nv_bfloat16* x, float* out, int n) {
  using BlockReduce = cub::BlockReduce<float, 128>;
  __shared__ typename BlockReduce::TempStorage tmp;
  auto block = cg::this_thread_block();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? __bfloat162float(x[i]) : 0.0f;
  float s = BlockReduce(tmp).Sum(v);
  block.sync();
  if (threadIdx.x == 0) atomicAdd(out, s);
}

extern "C" __global__ void wmma_tile(const half* a, const half* b, float* c) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
)";

}  // namespace

TEST_CASE("nvrtc: compiles a candidate using bf16, mma, pipeline, cooperative groups and cub") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_headers");
  auto c = compiler();
  Artifact a = c.compile(request(cuda_solution(kHeaderHeavy), dir.string()));
  CHECK_FALSE(a.cache_hit);
  CHECK(std::filesystem::exists(a.path));
  CHECK(std::find(a.kernels.begin(), a.kernels.end(), "bf16_sum") != a.kernels.end());
  CHECK(std::find(a.kernels.begin(), a.kernels.end(), "wmma_tile") != a.kernels.end());
  // ptxas's resource report reaches the log, for the model to read.
  CHECK(contains(a.log, "Used"));
  CHECK(contains(a.log, "registers"));
  CHECK(a.compile_s > 0);
}

TEST_CASE("nvrtc: a broken candidate gives the full compiler log") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_broken");
  auto c = compiler();
  const char* src = "extern \"C\" __global__ void k(float* y) {\n  y[0] = undefined_name;\n  y[1] = 2\n}\n";
  try {
    c.compile(request(cuda_solution(src), dir.string()));
    FAIL("should not compile");
  } catch (const CompileError& e) {
    CHECK(contains(e.what(), "kernel.cu(2): error: identifier \"undefined_name\" is undefined"));
    CHECK(contains(e.log(), "undefined_name"));
    CHECK(contains(e.log(), "expected a \";\""));  // the second error is there too
  }
  // The failure is cached: the same candidate is not compiled twice.
  int before = c.counters().compiled;
  CHECK_THROWS_AS(c.compile(request(cuda_solution(src), dir.string())), CompileError);
  CHECK(c.counters().compiled == before);
  CHECK(c.counters().cache_hits == 1);
}

TEST_CASE("nvrtc: a candidate that includes a file outside its sources is refused before NVRTC reads it") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_include_refused");
  auto c = compiler();
  const int before = c.counters().compiled;
  for (const char* src : {"#include \"/etc/passwd\"\nextern \"C\" __global__ void k(float* y) { y[0] = 1; }\n",
                          "#include <../../../../etc/hostname>\nextern \"C\" __global__ void k(float* y) {}\n"}) {
    try {
      c.compile(request(cuda_solution(src), dir.string()));
      FAIL("should be refused");
    } catch (const CompileError& e) {
      CHECK(contains(e.what(), "refused before compiling: kernel.cu:1"));
      CHECK_FALSE(contains(e.log(), "root:"));
    }
  }
  CHECK(c.counters().compiled == before);  // NVRTC never ran
}

TEST_CASE("nvrtc: an unknown option is a compile error naming it") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_option");
  auto c = compiler();
  auto r = request(cuda_solution("extern \"C\" __global__ void k() {}\n"), dir.string());
  r.flags = {"--no-such-option"};
  CHECK_THROWS_WITH_AS(c.compile(r), doctest::Contains("no-such-option"), CompileError);
}

TEST_CASE("nvrtc: the cache hits on a repeat and misses on any change") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_cache");
  auto c = compiler();
  const std::string src = "extern \"C\" __global__ void k(float* y, int n) { if (n > 0) y[0] = SCALE; }\n";
  auto base = request(cuda_solution(src), dir.string());
  base.params = {{"SCALE", 2}};
  Artifact first = c.compile(base);
  CHECK_FALSE(first.cache_hit);
  Artifact again = c.compile(base);
  CHECK(again.cache_hit);
  CHECK(again.path == first.path);
  CHECK(again.kernels == first.kernels);
  CHECK(again.log == first.log);
  CHECK(c.counters().compiled == 1);

  auto changed_source = base;
  changed_source.solution.sources[0].content += "// edited\n";
  auto changed_flags = base;
  changed_flags.flags = {"--use_fast_math"};
  auto changed_arch = base;
  changed_arch.arch = "sm_80";
  auto changed_params = base;
  changed_params.params = {{"SCALE", 3}};
  for (const auto* r : {&changed_source, &changed_flags, &changed_arch, &changed_params}) {
    Artifact a = c.compile(*r);
    CHECK_FALSE(a.cache_hit);
    CHECK(a.path != first.path);
  }
  CHECK(c.counters().compiled == 5);
  // The name and description are not part of the code.
  auto renamed = base;
  renamed.solution.name = "other";
  renamed.solution.description = "same code";
  CHECK(c.compile(renamed).cache_hit);
}

TEST_CASE("nvrtc: kernels and their parameter layouts are read from the cubin") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_elf");
  auto c = compiler();
  const char* src = R"(struct Pair { float a[5]; };
__device__ __noinline__ float helper(float v) { return v * 2.0f; }
extern "C" __global__ void many(const float* x, float* y, int r, long long c, float s, Pair p, char ch) {
  y[0] = helper(x[0]) + p.a[2] + ch + r + c + s;
}
extern "C" __global__ void none() {}
__global__ void cpp_linkage(double* d) { d[0] = 1; }
// Launch bounds add byte-valued records to the kernel's .nv.info section.
extern "C" __global__ void __launch_bounds__(256) bounded(float* y, int n) { if (n) y[0] = n; }
)";
  Artifact a = c.compile(request(cuda_solution(src), dir.string()));
  auto kernels = inspect_cubin(util::read_file(a.path));
  std::map<std::string, CubinKernel> by_name;
  for (auto& k : kernels) by_name[plan_name_of(k.demangled)] = k;
  REQUIRE(by_name.size() == 4);  // the helper is no entry point
  REQUIRE(by_name.count("many"));
  REQUIRE(by_name["many"].params);
  std::vector<std::uint32_t> sizes, offsets;
  for (const auto& p : *by_name["many"].params) {
    sizes.push_back(p.size);
    offsets.push_back(p.offset);
  }
  CHECK(sizes == std::vector<std::uint32_t>{8, 8, 4, 8, 4, 20, 1});
  CHECK(offsets == std::vector<std::uint32_t>{0, 8, 16, 24, 32, 36, 56});
  REQUIRE(by_name["none"].params);
  CHECK(by_name["none"].params->empty());
  REQUIRE(by_name["bounded"].params);
  CHECK(by_name["bounded"].params->size() == 2);
  REQUIRE(by_name.count("cpp_linkage"));
  CHECK(by_name["cpp_linkage"].symbol == "_Z11cpp_linkagePd");
  CHECK(by_name["cpp_linkage"].demangled == "cpp_linkage(double*)");
  CHECK_THROWS_AS(inspect_cubin("not an elf file at all, but long enough to hold a header....."), Error);
}

TEST_CASE("nvrtc: the plan is checked against the module right after compiling") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_plan");
  auto c = compiler();
  const char* src = R"(template <int F> __global__ void scale(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] *= F;
}
__global__ void plain_cpp(float* y) { y[0] = 1; }
extern "C" __global__ void row_max(const float* x, float* y, int n) { y[0] = x[n - 1]; }
)";
  auto ok_plan = Json::parse(R"js({"kernels": [
      {"name": "scale<2>", "grid": ["cdiv(N, 128)"], "block": [128], "args": ["y", "N"]},
      {"name": "scale< 3 >", "grid": [1], "block": [128], "args": ["y", "N"]},
      {"name": "plain_cpp", "grid": [1], "block": [1], "args": ["y"]},
      {"name": "row_max", "grid": [1], "block": [1], "args": ["x", "y", "N"]}]})js");
  Artifact a = c.compile(request(cuda_solution(src, ok_plan), dir.string()));
  CHECK(a.lowered_names.at("scale<2>") == "_Z5scaleILi2EEvPfi");
  CHECK(a.lowered_names.at("scale< 3 >") == "_Z5scaleILi3EEvPfi");
  CHECK(a.lowered_names.at("plain_cpp") == "_Z9plain_cppPf");
  CHECK(a.lowered_names.at("row_max") == "row_max");

  auto unknown = Json::parse(R"js({"kernels": [{"name": "row_sum", "grid": [1], "block": [1], "args": ["x", "y", "N"]}]})js");
  try {
    c.compile(request(cuda_solution(src, unknown), dir.string()));
    FAIL("the plan names a kernel the module lacks");
  } catch (const CompileError& e) {
    CHECK(contains(e.what(), "kernel `row_sum` not found in module; kernels are: "));
    CHECK(contains(e.what(), "row_max"));
    CHECK(contains(e.what(), "plain_cpp"));
  }
  auto wrong_count = Json::parse(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [1], "args": ["x", "y"]}]})js");
  CHECK_THROWS_WITH_AS(c.compile(request(cuda_solution(src, wrong_count), dir.string())),
                       doctest::Contains("kernel `row_max` takes 3 parameters but the plan passes 2 arguments"),
                       CompileError);
  auto bad_template = Json::parse(R"js({"kernels": [{"name": "scale<2, 3>", "grid": [1], "block": [1], "args": ["y", "N"]}]})js");
  CHECK_THROWS_AS(c.compile(request(cuda_solution(src, bad_template), dir.string())), CompileError);
  // A stored plan off the schema (recorded before plans were checked when read)
  // reaches the compiler, which reports its problem.
  Solution malformed = cuda_solution(src);
  malformed.launch_plan = ks::LaunchPlan::as_written(
      Json::parse(R"js({"kernels": [{"name": "row_max", "grid": [1], "args": []}]})js"), Language::cuda);
  CHECK_THROWS_WITH_AS(c.compile(request(malformed, dir.string())), doctest::Contains("\"block\" is missing"),
                       CompileError);
}

TEST_CASE("nvrtc: sm_90a unlocks Hopper-only instructions") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_sm90a");
  auto c = compiler();
  const char* src = "extern \"C\" __global__ void k() { asm volatile(\"wgmma.fence.sync.aligned;\"); }\n";
  CHECK_NOTHROW(c.compile(request(cuda_solution(src), dir.string(), "sm_90a")));
  CHECK_THROWS_AS(c.compile(request(cuda_solution(src), dir.string(), "sm_90")), CompileError);
}

TEST_CASE("nvrtc: several files form one translation unit with correct line numbers") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_files");
  auto c = compiler();
  Solution s;
  s.language = Language::cuda;
  s.sources = {{"common.cuh", "#pragma once\n__device__ inline float twice(float v) { return 2 * v; }\n"},
               {"a.cu", "#include \"common.cuh\"\n__device__ float a_helper(float v) { return twice(v); }\n"},
               {"b.cu", "extern \"C\" __global__ void k(float* y) {\n  y[0] = a_helper(y[0]) + BIAS;\n}\n"}};
  auto r = request(s, dir.string());
  r.params = {{"BIAS", 3}};
  Artifact a = c.compile(r);
  CHECK(a.kernels == std::vector<std::string>{"k"});
  r.solution.sources[2].content = "extern \"C\" __global__ void k(float* y) {\n  y[0] = a_helper(y[0]) + BIAS;\n  oops;\n}\n";
  CHECK_THROWS_WITH_AS(c.compile(r), doctest::Contains("b.cu(3): error"), CompileError);
}

TEST_CASE("nvrtc: source assembly places parameters after the system includes") {
  std::vector<SourceFile> files{{"kernel.cu",
                                 "// header comment\n#include <cuda_fp16.h>\n/* block\n comment */\n"
                                 "#include <mma.h>\n\n#ifndef BLOCK\n#define BLOCK 64\n#endif\n"
                                 "__global__ void k() {}\n"}};
  ProgramSource p = assemble_source(files, {{"BLOCK", 128}, {"NEG", -2}});
  CHECK(p.name == "kernel.cu");
  const std::string expected =
      "// header comment\n#include <cuda_fp16.h>\n/* block\n comment */\n#include <mma.h>\n\n"
      ";\n#define BLOCK 128\n#define NEG (-2)\n#line 7 \"kernel.cu\"\n"
      "#ifndef BLOCK\n#define BLOCK 64\n#endif\n__global__ void k() {}\n";
  CHECK(p.text == expected);
  // A user header may depend on the parameters: the macros come before it.
  ProgramSource q = assemble_source({{"kernel.cu", "#include <cuda_fp16.h>\n#include \"cfg.h\"\nint x;\n"},
                                     {"cfg.h", "#define Y BLOCK\n"}},
                                    {{"BLOCK", 1}});
  CHECK(q.text == "#include <cuda_fp16.h>\n;\n#define BLOCK 1\n#line 2 \"kernel.cu\"\n#include \"cfg.h\"\nint x;\n");
  CHECK(q.headers.size() == 2);
  // Without parameters and with one file the source is passed unchanged.
  CHECK(assemble_source({{"k.cu", "int y;"}}, {}).text == "int y;");
  CHECK_THROWS_WITH_AS(assemble_source({{"only.cuh", "int z;"}}, {}), doctest::Contains("no .cu file"), Error);
  CHECK_THROWS_WITH_AS(assemble_source({{"k.cu", ""}}, {{"BAD-NAME", 1}}), doctest::Contains("not a valid macro name"), Error);
  CHECK_THROWS_WITH_AS(assemble_source({}, {}), doctest::Contains("no source files"), Error);
}

TEST_CASE("nvrtc: precompiled headers stay valid across parameter values") {
  if (!nvrtc_present()) return;
  if (!nvrtc().nvrtcGetPCHCreateStatus) {
    MESSAGE("skipped: NVRTC " << nvrtc().version_string() << " has no precompiled headers");
    return;
  }
  auto dir = test::scratch_dir("nvrtc_pch");
  auto c = compiler(true);
  auto src = std::string("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n") +
             "extern \"C\" __global__ void k(float* y) { y[0] = BLOCK; }\n";
  for (int block : {64, 128, 256}) {
    auto r = request(cuda_solution(src), dir.string());
    r.params = {{"BLOCK", block}};
    Artifact a = c.compile(r);
    CHECK_FALSE(a.cache_hit);
    CHECK_FALSE(contains(a.log, "precompiled header"));  // PCH chatter stays out of the log
    // Each artifact says what it did (the metrics count it: compile_pch_used).
    CHECK(a.pch == (block == 64 ? "created" : "used"));
  }
  // A cache hit runs no NVRTC, so no header was read or written.
  auto again = request(cuda_solution(src), dir.string());
  again.params = {{"BLOCK", 64}};
  Artifact hit = c.compile(again);
  CHECK(hit.cache_hit);
  CHECK(hit.pch.empty());
  auto n = c.counters();
  CHECK(n.compiled == 3);
  CHECK(n.pch_created == 1);
  CHECK(n.pch_used == 2);
  // This process's PCH folder lives under the cache.
  CHECK(std::filesystem::exists(dir / "pch" / std::to_string(::getpid())));
}

TEST_CASE("nvrtc: a compile time limit cancels NVRTC") {
  if (!nvrtc_present()) return;
  if (!nvrtc().nvrtcSetFlowCallback) {
    MESSAGE("skipped: NVRTC " << nvrtc().version_string() << " cannot cancel a compilation");
    return;
  }
  auto dir = test::scratch_dir("nvrtc_timeout");
  auto c = compiler();
  auto r = request(cuda_solution(kHeaderHeavy), dir.string());
  r.timeout_s = 0.05;
  CHECK_THROWS_WITH_AS(c.compile(r), doctest::Contains("time limit"), CompileError);
  // A timeout is not remembered as the candidate's fate.
  r.timeout_s = 0;
  CHECK_NOTHROW(c.compile(r));
}

TEST_CASE("nvrtc: the evaluation device's runtime kernels compile") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_runtime");
  auto c = compiler();
  Solution s;
  s.language = Language::cuda;
  s.sources = {{"ks_runtime.cu", std::string(embedded::runtime_kernels)},
               {"ks_rng.h", std::string(embedded::rng_header)}};
  auto r = request(s, dir.string());
  r.flags = {"-fmad=false"};
  Artifact a = c.compile(r);
  for (const char* dt : {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8", "i16", "bool", "f8e4m3", "f8e5m2"}) {
    CHECK(std::find(a.kernels.begin(), a.kernels.end(), std::string("ks_generate_") + dt) != a.kernels.end());
    CHECK(std::find(a.kernels.begin(), a.kernels.end(), std::string("ks_compare_") + dt) != a.kernels.end());
  }
}

TEST_CASE("nvrtc: without an architecture or a GPU the compiler says so") {
  if (!nvrtc_present()) return;
  std::string why;
  if (cuda_probe(&why)) {
    MESSAGE("skipped: a GPU is present, so the architecture is found");
    return;
  }
  auto c = compiler();
  auto r = request(cuda_solution("extern \"C\" __global__ void k() {}\n"), test::scratch_dir("nvrtc_noarch").string(), "");
  CHECK_THROWS_WITH_AS(c.compile(r), doctest::Contains("CUDA"), Error);
}

TEST_CASE("nvrtc: a runaway log is capped, keeping its start and its end") {
  if (!nvrtc_present()) return;
  auto dir = test::scratch_dir("nvrtc_log_cap");
  // Thousands of warnings, then an error: NVRTC's log is far beyond 32 KiB.
  std::string src = "__global__ void k(float* y) {\n";
  for (int i = 0; i < 3000; ++i) src += "  int unused_variable_number_" + std::to_string(i) + ";\n";
  src += "  y[0] = 1.0f;\n}\nthis_is_the_last_error;\n";
  auto c = compiler();
  try {
    c.compile(request(cuda_solution(src), dir.string()));
    FAIL("the source has an error");
  } catch (const CompileError& e) {
    CHECK(e.log().size() <= 33u * 1024);
    CHECK(contains(e.log(), "unused_variable_number_0\""));      // the start
    CHECK(contains(e.log(), "this_is_the_last_error"));          // the end
    CHECK(contains(e.log(), "bytes of compiler output left out"));
  }
}
