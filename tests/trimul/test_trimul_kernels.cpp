// Every kernel shipped with gpumode/trimul compiles with NVRTC for sm_90a,
// and its launch plan names kernels of the module with the right number of
// arguments: the reference, the tunable starting kernel at several
// admissible parameter points, and the demonstration candidates.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "core/response/parse.hpp"
#include "core/param_space.hpp"
#include "eval/cuda/cuda_backend.hpp"
#include "ksearch/error.hpp"
#include "support/test_util.hpp"
#include "tasks/gpumode/trimul.hpp"
#include "util/fs.hpp"

using namespace ks;
using namespace ks::tasks::gpumode;

namespace {

// The CUDA backend's NVRTC compiler, targeting sm_90a without a GPU; null
// (with a message) where NVRTC cannot be loaded.
eval::Compiler* compiler() {
  static std::unique_ptr<eval::Compiler> c = []() -> std::unique_ptr<eval::Compiler> {
    eval::CudaCompilerOptions opt;
    opt.arch = "sm_90a";
    opt.cache_dir = test::scratch_dir("trimul_kernels_cache").string();
    try {
      return eval::make_cuda_compiler(opt);
    } catch (const Error& e) {
      MESSAGE("skipped: " << e.what());
      return nullptr;
    }
  }();
  return c.get();
}

// Compiles through the product path (sources assembled as the evaluator
// does, parameter values as macros); the compiler itself rejects a plan whose
// kernels or argument counts do not match the module.
void check_compiles(const Solution& s, const util::Vars& params = {}) {
  eval::CompileRequest req;
  req.solution = s;
  req.arch = "sm_90a";
  req.params = std::map<std::string, std::int64_t>(params.begin(), params.end());
  req.tensors = make_trimul_spec().tensors;
  eval::Artifact art;
  try {
    art = compiler()->compile(req);
  } catch (const eval::CompileError& e) {
    FAIL(s.name << " does not compile: " << e.what() << "\n" << e.log());
  }
  INFO("compiler log:\n" << art.log);
  CHECK(!art.kernels.empty());
  std::size_t launched = 0;  // kernels (GEMM steps are not in the module)
  for (const auto& k : s.launch_plan.kernels) {
    if (k.gemm) continue;
    ++launched;
    CHECK(std::find(art.kernels.begin(), art.kernels.end(), k.name) != art.kernels.end());
  }
  // No register spills: ptxas reports "N bytes spill stores" for every kernel.
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t pos = 0; (pos = art.log.find(needle, pos)) != std::string::npos; pos += needle.size()) ++n;
    return n;
  };
  CHECK(count("bytes spill stores") >= launched);
  CHECK(count(" 0 bytes spill stores") == count("bytes spill stores"));
}

// The demonstration candidates: hand-written answers in the candidate format.
std::vector<std::filesystem::path> candidate_answers() {
  std::vector<std::filesystem::path> out;
  const auto dir = test::source_dir() / "examples" / "trimul" / "candidates";
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".md" && e.path().filename() != "README.md") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("trimul kernels: the FP32 reference compiles for sm_90a and matches its plan") {
  if (!compiler()) return;
  check_compiles(trimul_reference_solution());
}

TEST_CASE("trimul kernels: the starting kernel compiles at admissible parameter points") {
  if (!compiler()) return;
  const Solution start = trimul_starting_point();
  const auto space = core::ParamSpace(start.params);
  REQUIRE(!space.empty());
  // Three GEMM choices and their cuBLASLt algorithms (plan-only), then the code's parameters.
  CHECK(space.grid_size() == 2u * 2 * 2 * 4 * 4 * 2 * 2 * 2 * 2 * 2 * 3 * 3);

  // Defaults, every parameter at its smallest and at its largest value, and
  // two mixtures: the corners exercise each template path.
  std::vector<util::Vars> points = {space.defaults()};
  util::Vars lo, hi;
  for (const auto& p : space.params()) {
    lo[p.name] = p.values.front();
    hi[p.name] = p.values.back();
  }
  points.push_back(lo);
  points.push_back(hi);
  auto mixture = [&](util::Vars tiles) {
    util::Vars v = space.defaults();
    for (const auto& [k, x] : tiles) v[k] = x;
    return v;
  };
  points.push_back(mixture({{"PROJ_BM", 64}, {"PROJ_BN", 128}, {"TRI_BM", 128}, {"TRI_BN", 64}, {"BK", 32}, {"STAGES", 2}, {"VEC", 2}}));
  points.push_back(mixture({{"PROJ_BM", 128}, {"PROJ_BN", 64}, {"TRI_BM", 64}, {"TRI_BN", 128}, {"BK", 64}, {"STAGES", 3}, {"VEC", 4}}));

  const TaskSpec spec = make_trimul_spec();
  for (const auto& values : points) {
    std::string label;
    for (const auto& [k, v] : values) label += k + "=" + std::to_string(v) + " ";
    CAPTURE(label);
    // Admissible for every workload of the task (the constraints name N, C, H).
    for (const auto& w : spec.workloads) {
      std::string why;
      CHECK_MESSAGE(space.admissible(values, util::Vars(w.dims.begin(), w.dims.end()), &why), w.name, ": ", why);
    }
    check_compiles(start, values);
  }
}

TEST_CASE("trimul kernels: the constraints exclude shapes the starting kernel cannot handle") {
  const auto space = core::ParamSpace(trimul_starting_point().params);
  const util::Vars values = space.defaults();
  std::string why;
  CHECK_FALSE(space.admissible(values, {{"B", 1}, {"N", 36}, {"C", 128}, {"H", 128}}, &why));
  CHECK_FALSE(space.admissible(values, {{"B", 1}, {"N", 32}, {"C", 100}, {"H", 128}}, &why));
  CHECK_FALSE(space.admissible(values, {{"B", 1}, {"N", 32}, {"C", 128}, {"H", 96}}, &why));
  CHECK(space.admissible(values, {{"B", 3}, {"N", 48}, {"C", 64}, {"H", 128}}, &why));
}

TEST_CASE("trimul kernels: the demonstration candidates parse, compile and match their plans") {
  const auto answers = candidate_answers();
  REQUIRE(answers.size() >= 3);
  const bool have_nvrtc = compiler() != nullptr;
  for (const auto& path : answers) {
    INFO("answer " << path.filename().string());
    const Solution s = core::parse_candidate(util::read_file(path), Language::cuda);
    CHECK(!s.description.empty());
    REQUIRE(!s.launch_plan.empty());
    if (have_nvrtc) check_compiles(s);
  }
}

TEST_CASE("trimul kernels: the prompt's format example parses as an answer and compiles") {
  const Solution example = core::parse_candidate(trimul_prompt(), Language::cuda);
  REQUIRE(example.sources.size() == 1);
  CHECK(example.sources[0].content.find("row_stats") != std::string::npos);
  CHECK(example.launch_plan.kernels.size() == 2);
  if (!compiler()) return;
  check_compiles(example);
}
