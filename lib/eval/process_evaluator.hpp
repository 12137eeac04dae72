// Evaluators: ProcessEvaluator runs candidates in ksearch-worker processes
// (one per device; crashes and hangs kill only the worker); InProcessEvaluator
// runs the same flow in the calling process, for trusted kernels.
#pragma once

#include <memory>

#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace ks::eval {

std::unique_ptr<Evaluator> make_process_evaluator(const EvaluatorConfig& config);
std::unique_ptr<Evaluator> make_in_process_evaluator(const EvaluatorConfig& config);

// Whether the CUDA backend was compiled into this library.
bool cuda_backend_built();

}  // namespace ks::eval
