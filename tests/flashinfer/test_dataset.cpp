// FlashInfer-Trace datasets: the loader on a small dataset fixture written
// in the documented layout (tests/fixtures/flashinfer_trace): listing,
// definitions with a native task, with a reference given as a solution file,
// and without a reference; and every kind of malformed input.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "emu/kernel_table.hpp"
#include "flashinfer_test_util.hpp"
#include "ksearch/error.hpp"
#include "ksearch/tasks.hpp"
#include "support/test_util.hpp"
#include "tasks/flashinfer/dataset.hpp"
#include "tasks/flashinfer/flashinfer.hpp"
#include "util/fs.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

const fs::path kFixture = test::source_dir() / "tests" / "fixtures" / "flashinfer_trace";
const fs::path kGqa = kFixture / "definitions/gqa_paged/gqa_paged_decode_h32_kv4_d128_ps1.json";
const fs::path kGather = kFixture / "definitions/gather/gather_scale_d64.json";

// A copy of the fixture to break.
fs::path copy_fixture(const std::string& name) {
  fs::path dir = test::scratch_dir(name);
  fs::copy(kFixture, dir, fs::copy_options::recursive);
  return dir;
}

void edit(const fs::path& file, const std::string& from, const std::string& to) {
  std::string s = util::read_file(file);
  const auto at = s.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, file.string(), " has no \"", from, "\"");
  s.replace(at, from.size(), to);
  util::write_file_atomic(file, s);
}

}  // namespace

TEST_CASE("dataset: ksearch tasks --dataset lists the definitions and where their references come from") {
  auto list = list_dataset_tasks(kFixture);
  REQUIRE(list.size() == 3);
  CHECK(list[0].name == "flashinfer/gather_scale_d64");
  CHECK(list[0].description.find("8 workloads; native reference: solution file") != std::string::npos);
  CHECK(list[1].name == "flashinfer/gqa_paged_decode_h32_kv4_d128_ps1");
  CHECK(list[1].description.find("3 workloads; native reference: built-in") != std::string::npos);
  CHECK(list[2].description.find("native reference: none") != std::string::npos);
  CHECK_THROWS_WITH_AS(list_dataset_tasks(kFixture / "definitions"), doctest::Contains("has no definitions/ folder"), Error);
}

TEST_CASE("dataset: a native definition keeps its native task and takes the dataset's workloads") {
  CHECK(tasks::flashinfer::is_definition_file(kGqa));
  CHECK_FALSE(tasks::flashinfer::is_definition_file(test::source_dir() / "tests/fixtures/tasks/scale3/task.json"));
  auto task = load_task(kGqa.string());
  const TaskSpec& t = task->spec();
  const TaskSpec native = tasks::flashinfer::make_gqa_decode_spec();
  CHECK(t.name == native.name);
  CHECK(t.references.at(Language::cuda).id == native.references.at(Language::cuda).id);
  CHECK(t.baselines.at(Language::cuda).id == native.baselines.at(Language::cuda).id);
  CHECK(t.prompts.at(Language::cuda) == native.prompts.at(Language::cuda));
  REQUIRE(t.workloads.size() == 3);
  CHECK(t.feedback_workloads.empty());  // three workloads: all of them
  const WorkloadSpec& w0 = t.workloads[0];
  CHECK(w0.name == "gqa-0000-fixture");
  CHECK(w0.benchmark);
  CHECK(w0.dims.at("num_qo_heads") == 32);  // const axes from the definition
  CHECK(w0.dims.at("num_kv_indices") == 15);
  REQUIRE(w0.data.count("kv_indptr"));
  CHECK(fs::path(w0.data.at("kv_indptr").file).is_absolute());
  CHECK(w0.dist_overrides.at("sm_scale").kind == Distribution::Kind::constant);
  // The inputs come from the files; the scalar from the workload.
  auto in = core::generate_host_inputs(t, w0);
  CHECK(in.at("kv_indptr").at(0) == 0);
  CHECK(in.at("kv_indptr").at(1) == 5);
  CHECK(in.at("kv_indptr").at(3) == 15);
  CHECK(in.at("sm_scale").scalar == doctest::Approx(0.0883883476));
  // The third workload leaves offsets and pages to the native generators.
  CHECK(t.workloads[2].data.empty());
  CHECK(core::distribution_of(*t.find_tensor("kv_indices"), t.workloads[2]).kind == Distribution::Kind::permutation);
  // The native reference (emulated) agrees with the CPU reference on the dataset's workloads.
  ks_emu::KernelTable ref;
  ks_emu_register_gqa_reference(ref);
  Tolerance tol = t.tolerance;
  tol.atol = 1e-3;
  tol.rtol = 8e-3;
  for (const auto& w : t.workloads) {
    INFO(w.name);
    CHECK(test::compare_outputs(t, test::run_emulated(t, w, ref, t.references.at(Language::cuda).launch_plan),
                                test::cpu_outputs(t, w), tol) == "");
  }
}

TEST_CASE("dataset: a definition with a reference solution file becomes a task with a feedback subset") {
  auto task = load_task(kGather.string());
  const TaskSpec& t = task->spec();
  CHECK(t.name == "flashinfer/gather_scale_d64");
  // Python candidates run against the C++ reference on the CPU; Triton needs a CUDA one.
  CHECK(t.languages == std::vector<Language>{Language::cpp, Language::python});
  CHECK(t.python.get_string("function") == "run");
  CHECK(t.python.get_string("module") == "main.py");
  std::vector<std::string> names;
  for (const auto& ts : t.tensors) names.push_back(ts.name);
  CHECK(names == std::vector<std::string>{"x", "index", "scale", "y"});
  CHECK(t.find_tensor("scale")->scalar);
  CHECK(t.find_tensor("x")->dist.kind == Distribution::Kind::normal);  // FlashInfer's rule for floats
  CHECK(t.workloads.size() == 8);
  REQUIRE(t.feedback_workloads.size() == 6);
  CHECK(t.feedback_workloads.front() == "gather-0000-fixture");  // the smallest
  CHECK(t.feedback_workloads.back() == "gather-0007-fixture");   // the largest
  CHECK(t.tolerance.rule == Tolerance::Rule::abs_or_rel);
  CHECK(t.prompts.at(Language::cpp).find("return scale * x[index.long()]") != std::string::npos);
}

TEST_CASE("dataset: a workloads file's last line counts without a newline; blank lines keep the line numbers") {
  const fs::path dir = copy_fixture("dataset_last_line");
  const fs::path wl = dir / "workloads/gather/gather_scale_d64.jsonl";
  std::string text = util::read_file(wl);
  REQUIRE(text.size() > 1);
  REQUIRE(text.back() == '\n');
  text.pop_back();                   // a file written without a final newline: still 8 workloads
  util::write_file_atomic(wl, "\n" + text);  // and a blank first line
  CHECK(load_task((dir / "definitions/gather/gather_scale_d64.json").string())->spec().workloads.size() == 8);
  CHECK(list_dataset_tasks(dir)[0].description.find("8 workloads") != std::string::npos);
  // A broken line is named by its line in the file, the blank one counted.
  edit(wl, "\"gather-0001-fixture\"", "\"gather-0000-fixture\"");
  CHECK_THROWS_WITH_AS(load_task((dir / "definitions/gather/gather_scale_d64.json").string()),
                       doctest::Contains("gather_scale_d64.jsonl line 3: workload \"gather-0000-fixture\" appears twice"),
                       Error);
}

TEST_CASE("dataset: a definition without a native reference says so and where to put one") {
  try {
    load_task((kFixture / "definitions/rmsnorm/rmsnorm_h128.json").string());
    FAIL("loaded a definition without a reference");
  } catch (const Error& e) {
    CHECK(e.status() == Status::not_found);
    const std::string msg = e.what();
    CHECK(msg.find("has no native reference in libksearch") != std::string::npos);
    CHECK(msg.find("gqa_paged_decode_h32_kv4_d128_ps1") != std::string::npos);
    CHECK(msg.find("ksearch/references/rmsnorm/rmsnorm_h128.json") != std::string::npos);
  }
}

TEST_CASE("dataset: malformed definitions and workloads are errors that name the problem") {
  const std::string wl_gqa = "workloads/gqa_paged/gqa_paged_decode_h32_kv4_d128_ps1.jsonl";
  const std::string def_gqa = "definitions/gqa_paged/gqa_paged_decode_h32_kv4_d128_ps1.json";
  struct Case {
    const char* name;
    std::string file, from, to, error;
  };
  const Case cases[] = {
      {"dotdot", wl_gqa, "\"path\": \"blob/", "\"path\": \"../blob/", "must not leave the dataset root"},
      {"absolute", wl_gqa, "\"path\": \"blob/", "\"path\": \"/blob/", "must be relative to the dataset root"},
      {"missing_blob", wl_gqa, "gqa-0000-fixture.safetensors", "nothere.safetensors", "not found under the dataset root"},
      {"wrong_key", wl_gqa, "\"tensor_key\": \"kv_indices\"", "\"tensor_key\": \"nope\"", "has no tensor \"nope\""},
      {"wrong_shape", wl_gqa, "\"num_kv_indices\": 15", "\"num_kv_indices\": 16", "the definition needs i32 of 16"},
      {"missing_axis", wl_gqa, "\"num_pages\": 64, ", "", "gives no value for the var axis \"num_pages\""},
      {"bad_type", wl_gqa, "\"q\": {\"type\": \"random\"}", "\"q\": {\"type\": \"zeros\"}", "\"type\" must be random, scalar or safetensors"},
      {"scalar_for_tensor", wl_gqa, "\"q\": {\"type\": \"random\"}", "\"q\": {\"type\": \"scalar\", \"value\": 1}", "a scalar value for a tensor input"},
      {"unknown_input", wl_gqa, "\"q\": {\"type\": \"random\"}", "\"qq\": {\"type\": \"random\"}", "not an input of the definition"},
      {"bad_line", wl_gqa, "{\"definition\"", "{definition", "line 1: not a JSON object"},
      {"other_definition", wl_gqa, "\"definition\": \"gqa_paged", "\"definition\": \"xgqa_paged", "the trace is for definition"},
      {"bad_dtype", def_gqa, "\"dtype\": \"bfloat16\"", "\"dtype\": \"float4_e2m1\"", "dtype \"float4_e2m1\" is not supported"},
      {"bad_axis", def_gqa, "\"type\": \"var\"", "\"type\": \"variable\"", "\"type\" must be \"const\" or \"var\""},
      {"unknown_axis", def_gqa, "\n        \"len_indptr\"\n", "\n        \"len_indptr2\"\n", "is not an axis of the definition"},
      {"not_native_dtype", def_gqa, "\"shape\": null,\n      \"dtype\": \"float32\"",
       "\"shape\": null,\n      \"dtype\": \"float64\"", "differs from libksearch's native definition"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const fs::path dir = copy_fixture(std::string("dataset_bad_") + c.name);
    edit(dir / c.file, c.from, c.to);
    CHECK_THROWS_WITH_AS(load_task((dir / def_gqa).string()), doctest::Contains(c.error.c_str()), Error);
  }
  // Outside the layout.
  const fs::path loose = test::scratch_dir("dataset_loose");
  fs::copy_file(kGqa, loose / kGqa.filename());
  CHECK_THROWS_WITH_AS(tasks::flashinfer::load_definition(loose / kGqa.filename()),
                       doctest::Contains("is not in a dataset's layout"), Error);
  // No workloads file.
  const fs::path no_wl = copy_fixture("dataset_no_workloads");
  fs::remove(no_wl / wl_gqa);
  CHECK_THROWS_WITH_AS(load_task((no_wl / def_gqa).string()), doctest::Contains("no workloads file at"), Error);
}
