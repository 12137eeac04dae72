// Parsing candidate answers (lib/core/response/parse.hpp): every accepted
// form, and a clear, model-facing error for every malformed one.
#include <doctest/doctest.h>

#include <string>

#include "core/response/parse.hpp"
#include "ksearch/error.hpp"

using ks::LaunchPlan;
using ks::Language;
using ks::Solution;
using ks::core::CodeBlock;
using ks::core::extract_code_blocks;
using ks::core::format_candidate;
using ks::core::parse_candidate;

namespace {

const char* kKernel = "extern \"C\" __global__ void row_softmax(const float* x, float* y, int R, int C) {}\n";
const char* kPlan = R"({"kernels": [{"name": "row_softmax", "grid": ["R"], "block": [256], "args": ["x", "y", "R", "C"]}]})";

std::string fenced_answer() {
  return std::string("Each block handles one row; a warp reduction finds the max.\n\n```cuda kernel.cu\n") + kKernel +
         "```\n\n```json launch_plan\n" + kPlan + "\n```\n";
}

// The message of the ks::Error(parse) that parsing `answer` throws.
std::string parse_error(const std::string& answer, Language lang = Language::cuda) {
  try {
    parse_candidate(answer, lang);
  } catch (const ks::Error& e) {
    CHECK(e.status() == ks::Status::parse);
    return e.what();
  }
  FAIL("expected a parse error for:\n" << answer);
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("parse: fenced source and launch plan") {
  Solution s = parse_candidate(fenced_answer(), Language::cuda);
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].path == "kernel.cu");
  CHECK(s.sources[0].content == kKernel);
  CHECK(s.launch_plan.kernels.at(0).name == "row_softmax");
  CHECK(s.params.empty());
  CHECK(s.language == Language::cuda);
  CHECK(s.description == "Each block handles one row; a warp reduction finds the max.");
  CHECK(s.id == s.compute_id());
}

TEST_CASE("parse: tagged blocks, with CDATA and a fence inside a tag") {
  std::string answer = std::string("<description>Tiled row softmax.</description>\n<file name=\"kernel.cu\"><![CDATA[\n") +
                       kKernel + "]]></file>\n<file name=\"util.cuh\">\n```cuda\n#define TILE 64\n```\n</file>\n" +
                       "<launch_plan>\n" + kPlan + "\n</launch_plan>\n";
  Solution s = parse_candidate(answer, Language::cuda);
  REQUIRE(s.sources.size() == 2);
  CHECK(s.sources[0].path == "kernel.cu");
  CHECK(s.sources[0].content == kKernel);
  CHECK(s.sources[1].path == "util.cuh");
  CHECK(s.sources[1].content == "#define TILE 64\n");
  CHECK(s.description == "Tiled row softmax.");
  CHECK(s.launch_plan.kernels.size() == 1);
}

TEST_CASE("parse: the original K-Search file tags are sources") {
  std::string answer = std::string("<header_file name=\"kernel.h\">\n#pragma once\n</header_file>\n") +
                       "<cuda_file name=\"kernel.cu\">\n" + kKernel + "</cuda_file>\n```json\n" + kPlan + "\n```\n";
  Solution s = parse_candidate(answer, Language::cuda);
  REQUIRE(s.sources.size() == 2);
  CHECK(s.sources[0].path == "kernel.h");
  CHECK(s.sources[1].path == "kernel.cu");
}

TEST_CASE("parse: unnamed sources get numbered names; a repeated name is the model's revision") {
  std::string answer = std::string("```cuda\n#define A 1\n```\n```cu\n#define B 2\n```\n") +
                       "```cuda helpers.cuh\nold\n```\n```cuda title=\"helpers.cuh\"\nnew\n```\n" +
                       "```json launch_plan\n" + kPlan + "\n```\n";
  Solution s = parse_candidate(answer, Language::cuda);
  REQUIRE(s.sources.size() == 3);
  CHECK(s.sources[0].path == "kernel.cu");
  CHECK(s.sources[1].path == "kernel_2.cu");
  CHECK(s.sources[2].path == "helpers.cuh");
  CHECK(s.sources[2].content == "new\n");
}

TEST_CASE("parse: a file name is plain text; the code keeps its bytes") {
  // The name goes into solution.json (UTF-8 only) and the solution id: it
  // must read back as parsed, or a resume finds another id.
  std::string answer = std::string("```cuda kern\xE9l\x1b[1m.cu\n// caf\xE9\n") + kKernel + "```\n```json launch_plan\n" +
                       kPlan + "\n```\n";
  Solution s = parse_candidate(answer, Language::cuda);
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].path == "kern\xEF\xBF\xBDl.cu");
  CHECK(s.sources[0].content == std::string("// caf\xE9\n") + kKernel);
}

TEST_CASE("parse: longer fences hold inner fences; indented fences lose their indentation") {
  std::string answer = std::string("1. The kernel:\n\n   ````cuda kernel.cu\n   // usage:\n   ```\n   x\n   ```\n") +
                       "   int v;\n   ````\n\n2. The plan:\n\n   ```json launch_plan\n   " + kPlan + "\n   ```\n";
  Solution s = parse_candidate(answer, Language::cuda);
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].content == "// usage:\n```\nx\n```\nint v;\n");
  CHECK(s.launch_plan.kernels.size() == 1);
}

TEST_CASE("parse: an unlabelled JSON plan and an unlabelled code block are recognised") {
  std::string answer = std::string("```\n") + kKernel + "```\n```\n" + kPlan + "\n```\n";
  Solution s = parse_candidate(answer, Language::cuda);
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].path == "kernel.cu");
  CHECK(s.launch_plan.kernels.size() == 1);
}

TEST_CASE("parse: a plan fenced as ```launch_plan without json") {
  std::string answer = std::string("```cuda\n") + kKernel + "```\n```launch_plan\n" + kPlan + "\n```\n";
  CHECK(parse_candidate(answer, Language::cuda).launch_plan.kernels.size() == 1);
}

TEST_CASE("parse: a tag mentioned in prose does not swallow the answer") {
  std::string answer = std::string("I will not use the <file name=\"x\"> form here.\n\n") + fenced_answer();
  Solution s = parse_candidate(answer, Language::cuda);
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].path == "kernel.cu");
}

TEST_CASE("parse: host C++ with a call plan") {
  std::string answer =
      "```cpp kernel.cpp\nvoid add(const float* a, float* b, long n) {}\n```\n"
      "```json call_plan\n{\"calls\": [{\"fn\": \"add\", \"args\": [\"a\", \"b\", \"N\"]}]}\n```\n";
  Solution s = parse_candidate(answer, Language::cpp);
  CHECK(s.language == Language::cpp);
  CHECK(s.sources[0].path == "kernel.cpp");
  CHECK(s.launch_plan.calls.size() == 1);
}

TEST_CASE("parse: tunable parameters inside the plan or in their own block") {
  std::string space = R"({"space": {"BLOCK": {"values": [128, 256]}}, "constraints": ["BLOCK % 32 == 0"]})";
  SUBCASE("inside the plan") {
    std::string plan = R"({"kernels": [{"name": "k", "grid": ["R"], "block": ["BLOCK"], "args": []}], "params": )" +
                       space + "}";
    Solution s = parse_candidate(std::string("```cuda\n") + kKernel + "```\n```json launch_plan\n" + plan + "\n```\n",
                                 Language::cuda);
    CHECK_FALSE(s.launch_plan.to_json().contains("params"));
    CHECK(s.params.find("BLOCK") != nullptr);
  }
  SUBCASE("in a params block, also wrapped in {\"params\": ...}") {
    Solution s = parse_candidate(fenced_answer() + "```json params\n{\"params\": " + space + "}\n```\n", Language::cuda);
    CHECK(s.params.constraints.size() == 1);
  }
  SUBCASE("declared twice") {
    std::string plan = R"({"kernels": [{"name": "k"}], "params": )" + space + "}";
    std::string answer = std::string("```cuda\n") + kKernel + "```\n```json launch_plan\n" + plan +
                         "\n```\n```json params\n" + space + "\n```\n";
    CHECK(contains(parse_error(answer), "declared twice"));
  }
  SUBCASE("invalid declarations name the parameter") {
    std::string msg = parse_error(fenced_answer() + "```json params\n{\"space\": {\"BLOCK\": {\"values\": []}}}\n```\n");
    CHECK(contains(msg, "tunable parameters"));
    CHECK(contains(msg, "BLOCK"));
  }
}

TEST_CASE("parse: malformed answers get errors phrased for the model") {
  SUBCASE("no code at all") {
    std::string msg = parse_error("I think we should use shared memory tiling.");
    CHECK(contains(msg, "no source code block"));
    CHECK(contains(msg, "```cuda kernel.cu"));
  }
  SUBCASE("only other languages") {
    std::string msg = parse_error("```python\nimport torch\n```\n");
    CHECK(contains(msg, "no source code block"));
    CHECK(contains(msg, "```python"));
  }
  SUBCASE("no plan") {
    std::string msg = parse_error(std::string("```cuda kernel.cu\n") + kKernel + "```\n");
    CHECK(contains(msg, "no launch plan"));
    CHECK(contains(msg, "```json launch_plan"));
    CHECK(contains(msg, "\"kernels\""));
  }
  SUBCASE("no call plan for host code") {
    std::string msg = parse_error("```cpp\nvoid f() {}\n```\n", Language::cpp);
    CHECK(contains(msg, "no call plan"));
    CHECK(contains(msg, "\"calls\""));
  }
  SUBCASE("plan JSON invalid: the parser's message and the offending text") {
    std::string msg = parse_error(std::string("```cuda\n") + kKernel +
                                  "```\n```json launch_plan\n{\"kernels\": [{\"name\": \"k\",]}\n```\n");
    CHECK(contains(msg, "not valid JSON"));
    CHECK(contains(msg, "{\"kernels\": [{\"name\": \"k\",]}"));
  }
  SUBCASE("plan is not an object") {
    std::string msg = parse_error(std::string("```cuda\n") + kKernel + "```\n```json launch_plan\n[1, 2]\n```\n");
    CHECK(contains(msg, "must be a JSON object"));
    CHECK(contains(msg, "array"));
  }
  SUBCASE("a host call plan for a CUDA task") {
    std::string msg = parse_error(std::string("```cuda\n") + kKernel +
                                  "```\n```json launch_plan\n{\"calls\": [{\"fn\": \"f\"}]}\n```\n");
    CHECK(contains(msg, "\"calls\""));
    CHECK(contains(msg, "needs a launch plan with \"kernels\""));
  }
  SUBCASE("a CUDA launch plan for a host task") {
    std::string msg = parse_error(std::string("```cpp\nvoid f() {}\n```\n```json call_plan\n") + kPlan + "\n```\n",
                                  Language::cpp);
    CHECK(contains(msg, "needs a call plan with \"calls\""));
  }
  SUBCASE("a plan without kernels lists what it has") {
    std::string msg = parse_error(std::string("```cuda\n") + kKernel +
                                  "```\n```json launch_plan\n{\"grid\": [1], \"block\": [32]}\n```\n");
    CHECK(contains(msg, "\"kernels\""));
    CHECK(contains(msg, "\"grid\", \"block\""));
  }
  SUBCASE("empty kernels") {
    std::string msg = parse_error(std::string("```cuda\n") + kKernel + "```\n```json launch_plan\n{\"kernels\": []}\n```\n");
    CHECK(contains(msg, "non-empty array"));
  }
  SUBCASE("a plan off the schema: the codec's message naming the field") {
    std::string msg = parse_error(std::string("```cuda\n") + kKernel +
                                  "```\n```json launch_plan\n{\"kernels\": [{\"name\": \"row_softmax\", \"grid\": [1], "
                                  "\"block\": [32], \"smem\": 64, \"args\": []}]}\n```\n");
    CHECK(contains(msg, "launch plan: kernels[0]: unknown field \"smem\""));
    msg = parse_error("```cpp\nvoid f() {}\n```\n```json call_plan\n{\"calls\": [{\"fn\": \"f\"}]}\n```\n", Language::cpp);
    CHECK(contains(msg, "call plan: calls[0] (\"f\") needs \"args\": an array"));
  }
  SUBCASE("an answer cut off inside the source") {
    std::string msg = parse_error("```cuda kernel.cu\n__global__ void k() {\n  int i = threadIdx.x;");
    CHECK(contains(msg, "never closed"));
    CHECK(contains(msg, "cut off"));
  }
  SUBCASE("an answer cut off inside the plan") {
    std::string msg = parse_error(std::string("```cuda\n") + kKernel + "```\n```json launch_plan\n{\"kernels\": [");
    CHECK(contains(msg, "never closed"));
  }
  SUBCASE("a tagged answer cut off") {
    std::string msg = parse_error("<file name=\"kernel.cu\">\n__global__ void k() {");
    CHECK(contains(msg, "never closed"));
  }
  SUBCASE("an empty source block") {
    std::string msg = parse_error(std::string("```cuda kernel.cu\n\n```\n```json launch_plan\n") + kPlan + "\n```\n");
    CHECK(contains(msg, "is empty"));
  }
}

TEST_CASE("parse: extract_code_blocks reports styles, names and closure") {
  auto blocks = extract_code_blocks("text\n~~~python tool.py\nprint(1)\n~~~\n<params>{}</params>\n```json\n{");
  REQUIRE(blocks.size() == 3);
  CHECK(blocks[0].style == CodeBlock::Style::fenced);
  CHECK(blocks[0].tag == "python");
  CHECK(blocks[0].name == "tool.py");
  CHECK(blocks[0].content == "print(1)\n");
  CHECK(blocks[1].style == CodeBlock::Style::tagged);
  CHECK(blocks[1].tag == "params");
  CHECK(blocks[2].closed == false);
  // Inline code on one line is not a fence.
  CHECK(extract_code_blocks("```cuda``` is inline code\n").empty());
}

TEST_CASE("format_candidate: parse gives back what was formatted") {
  Solution s;
  s.language = Language::cuda;
  s.description = "Two kernels: a partial max and a normalisation.";
  s.sources = {{"kernel.cu", kKernel}, {"notes.cuh", "// a fence in a comment:\n```\n#define X 1\n"}};
  s.launch_plan = LaunchPlan::from_json(ks::Json::parse(kPlan));
  s.params = ks::Params::from_json(ks::Json::parse(R"({"space": {"BLOCK": {"values": [64, 128]}}})"));
  s.finalize();
  std::string text = format_candidate(s);
  CHECK(contains(text, "```json launch_plan"));
  CHECK(contains(text, "```json params"));
  CHECK(contains(text, "````cuda notes.cuh"));  // longer fence around the inner one
  Solution back = parse_candidate(text, Language::cuda);
  CHECK(back.sources.size() == 2);
  CHECK(back.sources[0].content == s.sources[0].content);
  CHECK(back.sources[1].path == "notes.cuh");
  CHECK(back.sources[1].content == s.sources[1].content);
  CHECK(back.launch_plan == s.launch_plan);
  CHECK(back.params == s.params);
  CHECK(back.description == s.description);
  CHECK(back.id == s.id);

  SUBCASE("a description of several paragraphs survives in a tag") {
    s.description = "First idea.\n\nSecond idea.";
    Solution again = parse_candidate(format_candidate(s), Language::cuda);
    CHECK(again.description == s.description);
  }
  SUBCASE("host solutions use a call plan label") {
    Solution h;
    h.language = Language::cpp;
    h.sources = {{"kernel.cpp", "void f() {}\n"}};
    h.launch_plan = LaunchPlan::from_json(ks::Json::parse(R"({"calls": [{"fn": "f", "args": []}]})"));
    std::string t = format_candidate(h);
    CHECK(contains(t, "```cpp kernel.cpp"));
    CHECK(contains(t, "```json call_plan"));
    CHECK(parse_candidate(t, Language::cpp).launch_plan == h.launch_plan);
  }
}

TEST_CASE("parse: Python answers (triton, python)") {
  auto contains = [](const std::string& s, const char* w) { return s.find(w) != std::string::npos; };
  // The first python block is the module; hex float literals become exact decimal floats.
  Solution s = parse_candidate(
      "A kernel.\n\n```python\nimport triton\nLOG2E = 0x1.71547652b82fep0\nEIGHT = 0x1p3\nBIG = 0x1p1024\n"
      "def custom_kernel(data):\n    return data[0]\n```\n",
      Language::triton);
  CHECK(s.language == Language::triton);
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].path == "main.py");
  CHECK(contains(s.sources[0].content, "LOG2E = 1.4426950408889634\n"));
  CHECK(contains(s.sources[0].content, "EIGHT = 8.0\n"));
  CHECK(contains(s.sources[0].content, "BIG = float('inf')\n"));
  CHECK(s.description == "A kernel.");
  // Named blocks are further files; an identifier holding 0x is left alone.
  s = parse_candidate("```python main.py\nimport helpers\nx0x1p3 = 1\n```\n```python helpers.py\nK = 2\n```\n",
                      Language::python);
  REQUIRE(s.sources.size() == 2);
  CHECK(s.sources[1].path == "helpers.py");
  CHECK(contains(s.sources[0].content, "x0x1p3 = 1"));
  // A bare module (a submission file) is read as it is.
  s = parse_candidate("#!POPCORN leaderboard trimul\nimport torch\n\ndef custom_kernel(data):\n    return data[0]\n",
                      Language::triton);
  CHECK(contains(s.sources[0].content, "#!POPCORN"));
  // Prose without code is refused, in words for the model.
  CHECK_THROWS_WITH_AS(parse_candidate("I would use a tiled kernel.", Language::python),
                       doctest::Contains("no Python code block"), ks::Error);
  // format_candidate gives back what parse reads.
  Solution back = parse_candidate(format_candidate(s), Language::triton);
  CHECK(back.sources[0].content == s.sources[0].content);
}
