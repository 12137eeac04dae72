// Python candidates (languages `triton` and `python`): a Python module whose
// entry point the task's calling convention names (docs/python-candidates.md).
//
// The "compile" step checks the solution's files and stores them, with the
// task's tensors and calling convention, as one JSON artifact in the cache;
// no Python runs in it. Loading starts a Python candidate process: the
// embedded runner (candidate_runner.py) under the interpreter of
// $KSEARCH_PYTHON, spawned like a host C++ candidate's process
// (eval/host/candidate_process.hpp) and speaking the same protocol. The run
// worker keeps the buffers, the reference, the checks and the clock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "eval/backend.hpp"
#include "eval/host/candidate_process.hpp"

namespace ks::eval::python {

// The interpreter Python candidates and the KernelBench oracle run under:
// $KSEARCH_PYTHON, else `python3`, as an absolute path found in PATH; ""
// when there is none.
std::string python_interpreter();

// What the interpreter has, read once per process by running it.
struct PythonFacts {
  std::string python;          // the interpreter's path
  std::string version;         // "3.12.3"
  std::string torch;           // PyTorch's version, "" when it does not import
  std::string torch_cuda;      // the CUDA PyTorch was built for, "" for a CPU build
  bool cuda_available = false; // torch.cuda.is_available()
  std::string triton;          // Triton's version, "" when it does not import
  std::string problem;         // why the interpreter could not be asked, "" when it answered
};
const PythonFacts& python_facts();

// "" when candidates in `language` can run here (on the GPU when `gpu`);
// otherwise what is missing and how to fix it, for an error before the
// first LLM request.
std::string python_problem(Language language, bool gpu);

// Stores Python solutions as artifacts under `cache_dir` (content-addressed).
std::unique_ptr<Compiler> make_python_compiler(std::string cache_dir);

// How a Python candidate's process reaches one CUDA buffer of the worker.
struct CudaShare {
  std::uint64_t serial = 0;  // the allocation's number, which the process keeps its mapping under
  int fd = -1;               // a POSIX descriptor of the allocation (CUDA VMM), the device's: sent, never closed here
  std::size_t size = 0;      // the allocation's mapped size
  std::string ipc;           // without a descriptor: its legacy CUDA IPC handle (64 bytes, hex)
  std::size_t offset = 0;    // the buffer's offset in the allocation
};

// How a Python candidate's process reaches the evaluation device's buffers.
struct PythonDevice {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;  // cpu: the host backend's memfd blocks; cuda
  // CUDA: the allocation that holds a buffer. A descriptor, sent over the
  // process's socket, reaches that process alone; a legacy IPC handle, any
  // process of the user that knows its 64 bytes.
  std::function<CudaShare(const Buffer&)> share;
  // CUDA: CUDA_VISIBLE_DEVICES for the process, the worker's GPU alone ("GPU-<uuid>").
  std::string visible_devices;
  // CUDA: finishes the worker's own queued work (inputs, poison, the cache
  // flush) before the candidate's process runs: two contexts share no stream.
  std::function<void()> synchronize;
};

// Loads a Python artifact: starts its process with `isolate` (memory limit,
// environment; its interpreter, python_interpreter() when empty), imports
// the module and finds its entry point. Throws RunError (compile_error for
// a syntax error, an import error or a missing entry point).
std::unique_ptr<Program> load_python_program(const Artifact& artifact, const host::CandidateProcessOptions& isolate,
                                             const PythonDevice& device);

}  // namespace ks::eval::python
