// Task files: the shipped example, and one malformed file per kind of mistake.
#include <doctest/doctest.h>

#include <fstream>

#include "ksearch/error.hpp"
#include "ksearch/tasks.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

fs::path matmul_dir() { return ks::test::source_dir() / "examples" / "tasks" / "matmul"; }

// A valid task file's JSON, written with the sources it references, to be
// broken one field at a time.
const char* kValid = R"JSON({
  "format_version": 1,
  "name": "t/scale",
  "description": "y = 2x",
  "languages": ["cpp"],
  "dims": ["N"],
  "tensors": [
    {"name": "x", "dtype": "f32", "shape": ["N"], "dist": {"kind": "normal", "std": "1/sqrt(N)"}},
    {"name": "y", "dtype": "f32", "shape": ["N"], "role": "output"}
  ],
  "workloads": [
    {"name": "small", "dims": {"N": 8}},
    {"name": "big", "dims": {"N": 4096}, "seed": 3, "benchmark": true}
  ],
  "tolerance": {"atol": 1e-4, "rtol": 1e-4},
  "flops": "N",
  "bytes": "8*N",
  "references": {"cpp": {"sources": [{"file": "ref.cpp"}],
                         "launch_plan": {"file": "plan.json"}}},
  "prompts": {"cpp": {"file": "prompt.md"}},
  "starting_points": [{"name": "start", "sources": [{"file": "ref.cpp", "path": "kernel.cpp"}],
                       "launch_plan": {"calls": [{"fn": "scale", "args": ["x", "y", "N"]}]}}]
})JSON";

fs::path write_task(const std::string& name, const Json& j) {
  fs::path dir = ks::test::scratch_dir("taskfile_" + name);
  util::write_file_atomic(dir / "ref.cpp",
                            "#include <cstdint>\nvoid scale(const float* x, float* y, std::int64_t n) {\n"
                            "  for (std::int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];\n}\n");
  util::write_file_atomic(dir / "plan.json", R"({"calls": [{"fn": "scale", "args": ["x", "y", "N"]}]})");
  util::write_file_atomic(dir / "prompt.md", "Scale a vector by two.\n");
  util::write_file_atomic(dir / "task.json", j.dump(2));
  return dir;
}

// Applies `edit` to the valid task and expects loading to fail with `needle`.
template <class Edit>
void expect_error(const std::string& name, Edit edit, const std::string& needle,
                  Status status = Status::invalid_argument) {
  Json j = Json::parse(kValid);
  edit(j);
  fs::path dir = write_task(name, j);
  try {
    load_task_file(dir);
    FAIL("malformed task file \"" << name << "\" loaded");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.status() == status);
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
    CHECK(std::string(e.what()).find("task.json") != std::string::npos);  // names the file
  }
}

}  // namespace

TEST_CASE("task file: the matmul example loads completely") {
  TaskSpec t = load_task_file(matmul_dir());
  CHECK(t.name == "examples/matmul");
  // python: every task file with a reference takes PyTorch candidates too.
  CHECK(t.languages == std::vector<Language>{Language::cpp, Language::python});
  CHECK(t.dims == std::vector<std::string>{"M", "N", "K"});
  REQUIRE(t.tensors.size() == 3);
  CHECK(t.tensors[2].is_output);
  CHECK(t.benchmark_workloads().size() == 3);
  CHECK(t.test_workloads().size() == 3);
  REQUIRE(t.references.count(Language::cpp));
  const Solution& ref = t.references.at(Language::cpp);
  REQUIRE(ref.sources.size() == 1);
  CHECK(ref.sources[0].path == "reference.cpp");
  CHECK(ref.sources[0].content.find("matmul_reference") != std::string::npos);
  CHECK(ref.launch_plan.calls.size() == 1);
  CHECK(t.prompts.at(Language::cpp).find("C = A * B") != std::string::npos);
  REQUIRE(t.starting_points.size() == 1);
  CHECK(t.starting_points[0].params.find("BLOCK") != nullptr);
  CHECK(t.starting_points[0].task == t.name);
  CHECK(fs::equivalent(t.base_dir, matmul_dir()));
  CHECK(t.flops == "2*M*N*K");
  // A file path works as well as its folder.
  CHECK(load_task_file(matmul_dir() / "task.json").name == t.name);
}

TEST_CASE("task file: the valid test file loads") {
  fs::path dir = write_task("valid", Json::parse(kValid));
  TaskSpec t = load_task_file(dir);
  CHECK(t.name == "t/scale");
  CHECK(t.references.at(Language::cpp).name == "reference");
  CHECK(t.starting_points[0].sources[0].path == "kernel.cpp");
  CHECK(t.prompts.at(Language::cpp) == "Scale a vector by two.\n");
}

TEST_CASE("task file: errors name the malformed field") {
  // The file and its folder.
  CHECK_THROWS_WITH_AS(load_task_file("/nonexistent/task.json"), doctest::Contains("task file not found"), Error);
  {
    fs::path dir = ks::test::scratch_dir("taskfile_syntax");
    util::write_file_atomic(dir / "task.json", "{\"name\": ");
    try {
      load_task_file(dir);
      FAIL("broken JSON loaded");
    } catch (const Error& e) {
      CHECK(e.status() == Status::parse);
      CHECK(std::string(e.what()).find("not valid JSON") != std::string::npos);
    }
  }
  expect_error("not_object", [](Json& j) { j = Json::arr({1, 2}); }, "must hold a JSON object");
  expect_error("version", [](Json& j) { j["format_version"] = 2; }, "format_version");
  expect_error("unknown_field", [](Json& j) { j["tolerence"] = Json::object(); }, "\"tolerence\"");
  expect_error("name", [](Json& j) { j.erase("name"); }, "\"name\"");
  expect_error("languages", [](Json& j) { j["languages"] = Json::arr({"fortran"}); }, "\"languages\"");
  expect_error("dims", [](Json& j) { j["dims"] = Json::arr({1}); }, "\"dims\" entries must be strings");
  expect_error("dtype", [](Json& j) { j["tensors"][0]["dtype"] = "f128"; }, "unknown dtype \"f128\"");
  expect_error("shape_dim", [](Json& j) { j["tensors"][0]["shape"] = Json::arr({"N*M"}); },
               "unknown dimension \"M\"");
  expect_error("shape_syntax", [](Json& j) { j["tensors"][0]["shape"] = Json::arr({"N*"}); }, "shape");
  expect_error("role", [](Json& j) { j["tensors"][1]["role"] = "result"; }, "role must be");
  expect_error("no_output", [](Json& j) { j["tensors"][1]["role"] = "input"; }, "no tensor has role \"output\"");
  expect_error("dist_kind", [](Json& j) { j["tensors"][0]["dist"] = Json::obj({{"kind", "gamma"}}); },
               "unknown distribution kind \"gamma\"");
  expect_error("dist_param", [](Json& j) { j["tensors"][0]["dist"]["std"] = "1/K"; }, "unknown dimension \"K\"");
  expect_error("constant_value", [](Json& j) { j["tensors"][0]["dist"] = Json::obj({{"kind", "constant"}}); },
               "needs a \"value\"");
  expect_error("workload_dims", [](Json& j) { j["workloads"][0].erase("dims"); }, "\"dims\"");
  expect_error("workload_missing_dim", [](Json& j) { j["workloads"][0]["dims"] = Json::object(); },
               "does not set dimension \"N\"");
  expect_error("workload_unknown_dim", [](Json& j) { j["workloads"][0]["dims"]["Q"] = 3; },
               "unknown dimension \"Q\"");
  expect_error("workload_dim_value", [](Json& j) { j["workloads"][0]["dims"]["N"] = 0; }, "must be positive");
  expect_error("workload_dim_type", [](Json& j) { j["workloads"][0]["dims"]["N"] = 2.5; }, "must be an integer");
  expect_error("seed", [](Json& j) { j["workloads"][0]["seed"] = -1; }, "seed must be >= 0");
  expect_error("duplicate_workload", [](Json& j) { j["workloads"][1]["name"] = "small"; }, "declared twice");
  expect_error("no_benchmark", [](Json& j) { j["workloads"][1]["benchmark"] = false; }, "\"benchmark\": true");
  expect_error("override_unknown", [](Json& j) { j["workloads"][0]["dist"] = Json::obj({{"z", Json::obj({{"kind", "normal"}})}}); },
               "unknown tensor \"z\"");
  expect_error("tolerance", [](Json& j) { j["tolerance"]["atol"] = -1; }, "atol and rtol must be >= 0");
  expect_error("ratio", [](Json& j) { j["tolerance"]["min_matched_ratio"] = 0; }, "min_matched_ratio");
  expect_error("nan_policy", [](Json& j) { j["tolerance"]["nan_policy"] = "ignore"; }, "nan_policy");
  expect_error("flops", [](Json& j) { j["flops"] = "N*Z"; }, "flops");
  expect_error("no_reference", [](Json& j) { j.erase("references"); }, "no reference solution for language \"cpp\"");
  expect_error("reference_language", [](Json& j) {
    Json copy = j["references"]["cpp"];  // a copy: inserting may move the original
    j["references"]["java"] = copy;
  },
               "unknown language \"java\"");
  expect_error("reference_file", [](Json& j) { j["references"]["cpp"]["sources"][0]["file"] = "missing.cpp"; },
               "references.cpp.sources[0]: file \"missing.cpp\" not found");
  expect_error("reference_sources", [](Json& j) { j["references"]["cpp"]["sources"] = Json::array(); },
               "\"sources\" must be a non-empty array");
  expect_error("reference_source_form", [](Json& j) { j["references"]["cpp"]["sources"][0] = "ref.cpp"; },
               "references.cpp.sources[0]: must be");
  expect_error("plan_file", [](Json& j) { j["references"]["cpp"]["launch_plan"]["file"] = "nope.json"; },
               "references.cpp.launch_plan: file \"nope.json\" not found");
  expect_error("plan_shape", [](Json& j) { j["references"]["cpp"]["launch_plan"] = Json::obj({{"kernels", Json::array()}}); },
               "needs a call plan with \"calls\"");
  expect_error("file_extra", [](Json& j) { j["prompts"]["cpp"]["encoding"] = "utf8"; }, "unknown field \"encoding\"");
  expect_error("prompt_file", [](Json& j) { j["prompts"]["cpp"]["file"] = "nope.md"; },
               "prompts.cpp: file \"nope.md\" not found");
  expect_error("prompt_type", [](Json& j) { j["prompts"]["cpp"] = 3; }, "prompts.cpp: must be the prompt text");
  expect_error("start_language", [](Json& j) { j["starting_points"][0]["language"] = "cuda"; },
               "starting_points[0]");
}

TEST_CASE("task file: values that only a workload's dimensions reveal are checked at load") {
  expect_error("flops_div_zero", [](Json& j) { j["flops"] = "N/(N-8)"; }, "workload \"small\": flops \"N/(N-8)\"");
  expect_error("bytes_negative", [](Json& j) { j["bytes"] = "8*N - 100"; }, "bytes \"8*N - 100\" is negative");
  expect_error("shape_negative", [](Json& j) { j["tensors"][1]["shape"] = Json::arr({"N-9"}); },
               "tensor \"y\" has a negative extent \"N-9\"");
  expect_error("normal_std", [](Json& j) { j["tensors"][0]["dist"]["std"] = "-1"; }, "negative standard deviation");
  expect_error("uniform_bounds", [](Json& j) { j["tensors"][0]["dist"] = Json::obj({{"kind", "uniform"}, {"low", "N"}, {"high", "1"}}); },
               "workload \"small\": the uniform distribution of \"x\" has a lower bound above its upper bound (8, 1)");
  expect_error("int_range_bounds", [](Json& j) { j["tensors"][0]["dist"] = Json::obj({{"kind", "int_range"}, {"low", "3"}, {"high", "2"}}); },
               "lower bound above its upper bound");
  expect_error("cauchy_scale", [](Json& j) { j["tensors"][0]["dist"] = Json::obj({{"kind", "cauchy"}, {"scale", "0"}}); },
               "scale that is not positive");
  expect_error("override_std", [](Json& j) { j["workloads"][1]["dist"] = Json::obj({{"x", Json::obj({{"kind", "normal"}, {"std", "1-N"}})}}); },
               "workload \"big\": the normal distribution of \"x\" has a negative standard deviation");
  expect_error("dist_div_zero", [](Json& j) { j["tensors"][0]["dist"]["std"] = "1/(N-8)"; }, "distribution of \"x\"");
}

TEST_CASE("task file: a starting point's parameter declaration is checked at load") {
  auto params = [](const char* text) { return [text](Json& j) { j["starting_points"][0]["params"] = Json::parse(text); }; };
  expect_error("params_empty_values", params(R"({"space": {"B": {"values": []}}})"), "starting point \"start\"");
  expect_error("params_default", params(R"({"space": {"B": {"values": [1, 2], "default": 3}}})"), "starting point \"start\"");
  expect_error("params_constraint", params(R"({"space": {"B": {"values": [16, 32]}}, "constraints": ["N % B == 0"]})"),
               "workload \"small\"");
  expect_error("params_dim_name", params(R"({"space": {"N": {"values": [1, 2]}}})"), "parameter \"N\"");
  expect_error("params_tensor_name", params(R"({"space": {"x": {"values": [1, 2]}}})"),
               "parameter \"x\" has the name of a dimension or tensor");

  // A declaration that holds on every workload loads.
  Json j = Json::parse(kValid);
  j["starting_points"][0]["params"] = Json::parse(R"({"space": {"B": {"values": [2, 4, 8]}}, "constraints": ["N % B == 0"]})");
  CHECK_NOTHROW(load_task_file(write_task("params_fine", j)));
}

TEST_CASE("task file: weakened references load, round-trip and are checked") {
  Json j = Json::parse(kValid);
  j["weakened_references"] = Json::arr({Json::obj(
      {{"name", "no_scale"},
       {"description", "drops the factor 2"},
       {"sources", Json::arr({Json::obj({{"path", "copy.cpp"},
                                         {"content", "#include <cstdint>\nvoid copy(const float* x, float* y, "
                                                     "std::int64_t n) { for (std::int64_t i = 0; i < n; ++i) y[i] = "
                                                     "x[i]; }\n"}})})},
       {"launch_plan", Json::obj({{"calls", Json::arr({Json::obj({{"fn", "copy"}, {"args", Json::arr({"x", "y", "N"})}})})}})}})});
  TaskSpec t = load_task_file(write_task("weakened", j));
  REQUIRE(t.weakened_references.size() == 1);
  const Solution& w = t.weakened_references[0];
  CHECK(w.name == "no_scale");
  CHECK(w.language == Language::cpp);  // the task's only language
  CHECK(w.task == "t/scale");
  CHECK(w.description == "drops the factor 2");
  const TaskSpec back = TaskSpec::from_json(t.to_json());
  REQUIRE(back.weakened_references.size() == 1);
  CHECK(back.weakened_references[0].launch_plan.calls[0].fn == "copy");
  // A task without any writes no field, so the keys of its cached work stay as they were.
  CHECK_FALSE(load_task_file(write_task("no_weakened", Json::parse(kValid))).to_json().contains("weakened_references"));

  auto edit = [&](auto f) {
    return [j, f](Json& k) {
      k = j;
      f(k);
    };
  };
  expect_error("weakened_type", [](Json& k) { k["weakened_references"] = Json::obj({}); },
               "weakened_references: must be an array of solutions");
  expect_error("weakened_name", edit([](Json& k) { k["weakened_references"][0].erase("name"); }),
               "weakened_references[0]: needs a \"name\"");
  expect_error("weakened_file", edit([](Json& k) { k["weakened_references"][0]["sources"] = Json::arr({Json::obj({{"file", "nope.cpp"}})}); }),
               "weakened_references[0].sources[0]: file \"nope.cpp\" not found");
  expect_error("weakened_plan", edit([](Json& k) { k["weakened_references"][0]["launch_plan"] = Json::obj({{"kernels", Json::array()}}); }),
               "weakened_references[0].launch_plan");
  expect_error("weakened_language", edit([](Json& k) {
    k["weakened_references"][0]["language"] = "cuda";
    k["weakened_references"][0]["launch_plan"] = Json::parse(R"({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}]})");
  }),
               "weakened reference \"no_scale\" is written in cuda");
  expect_error("weakened_twice", edit([](Json& k) {
    Json copy = k["weakened_references"][0];
    k["weakened_references"].as_array().push_back(copy);
  }),
               "weakened reference \"no_scale\" is declared twice");
}
