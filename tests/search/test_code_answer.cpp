// The strategies' one failed-round path (search/code_answer.hpp): an
// outage and an unreadable answer each take a round, only the latter is
// evidence; a candidate takes none here (its evaluation will).
#include <doctest/doctest.h>

#include "search/code_answer.hpp"
#include "tune/fake_context.hpp"
#include "tune/tunable_task.hpp"

using ks::EvalStatus;
using ks::LlmResponse;
using ks::core::CodeAnswer;
using ks::core::read_code_answer;

TEST_CASE("code answer: outage, unreadable answer, candidate") {
  ks::SearchConfig cfg;
  cfg.language = ks::Language::cuda;
  cfg.max_rounds = 10;
  ks::test::FakeContext ctx(ks::test::make_tunable_task(), cfg, ks::test::tunable_eval);

  LlmResponse outage;
  outage.error = "HTTP 503";
  CodeAnswer a = read_code_answer(ctx, "generate step 1", outage);
  CHECK(a.outage());
  CHECK_FALSE(a.candidate);
  REQUIRE(ctx.attempts.size() == 1);
  CHECK(ctx.attempts[0].action == "generate step 1");
  CHECK(ctx.attempts[0].result.status == EvalStatus::generation_failed);
  CHECK(ctx.attempts[0].result.log == "the LLM request failed: HTTP 503");
  REQUIRE(a.failed);  // the failed round's result, which a searcher is handed
  CHECK(a.failed->status == EvalStatus::generation_failed);
  CHECK(a.failed->log == ctx.attempts[0].result.log);

  LlmResponse prose;
  prose.ok = true;
  prose.text = "I would tile the rows in shared memory.";
  a = read_code_answer(ctx, "debug step 2", prose);
  CHECK_FALSE(a.outage());
  CHECK_FALSE(a.candidate);
  REQUIRE(a.unreadable);
  REQUIRE(ctx.attempts.size() == 2);
  CHECK(ctx.attempts[1].action == "debug step 2");
  CHECK(a.unreadable->status == EvalStatus::generation_failed);
  CHECK(a.unreadable->log == ctx.attempts[1].result.log);
  CHECK(a.unreadable->log.find("has no source code block") != std::string::npos);  // what the answer lacks
  REQUIRE(a.failed);
  CHECK(a.failed->log == a.unreadable->log);

  LlmResponse code;
  code.ok = true;
  code.text =
      "One block per row.\n\n```cuda kernel.cu\nextern \"C\" __global__ void k() {}\n```\n\n"
      "```json launch_plan\n{\"kernels\": [{\"name\": \"k\", \"grid\": [1], \"block\": [32], \"args\": []}]}\n```\n";
  a = read_code_answer(ctx, "improve step 3", code);
  REQUIRE(a.candidate);
  CHECK_FALSE(a.unreadable);
  CHECK_FALSE(a.outage());
  CHECK_FALSE(a.failed);
  CHECK(a.candidate->launch_plan.kernels.at(0).name == "k");
  CHECK(ctx.attempts.size() == 2);  // no round recorded for it
}
