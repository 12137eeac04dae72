// cuBLASLt for the GEMM steps of launch plans (docs/launch-plan.md, "GEMM
// steps"), opened with dlopen at run time as the driver and NVRTC are: a
// machine without it runs every plan that has no GEMM step, and a plan that
// has one fails with a message naming what was tried.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "eval/cuda/launch_plan.hpp"

namespace ks::eval::cuda {

struct CublasLtApi;

// The process's cuBLASLt: $KSEARCH_LIBCUBLASLT, else libcublasLt.so.13 or .12
// from the loader path or the toolkit. Throws ks::Error(Status::no_device).
const CublasLtApi& cublaslt();

// One operand's buffer as the executor knows it: its address and size
// (unchecked only where the size is unknown: a caller's buffer given without).
struct GemmBuffer {
  CUdeviceptr addr = 0;
  std::uint64_t bytes = 0;
  bool size_known = true;
};

struct GemmPointers {
  CUdeviceptr a = 0, b = 0, c = 0, d = 0, bias = 0;
};

// The pointers of a GEMM step's operands, each checked to hold the extent the
// step reaches (ResolvedGemm::bytes_*). `buffer` finds a buffer by name.
// Throws ks::Error(Status::invalid_argument): "<where>: cuBLASLt GEMM ...
// reaches N bytes into `x`, which has M; ...".
GemmPointers gemm_operands(const ResolvedGemm& g, const std::function<GemmBuffer(const std::string&)>& buffer,
                           const std::string& where);

// A cuBLASLt handle, for the GEMM steps of one program.
class CublasLtHandle {
 public:
  CublasLtHandle();  // loads cuBLASLt; throws ks::Error(Status::no_device)
  ~CublasLtHandle();
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
  void* get() const { return handle_; }

 private:
  void* handle_ = nullptr;
};

// The workspace every step may use; steps that may run at the same time
// (other streams) need workspaces of their own.
inline constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;

// One GEMM step bound to its buffers: descriptors made, and the algorithm
// picked (the step's `algo`-th in cuBLASLt's ranking for this problem, or its
// last where the ranking is shorter,
// these pointers' alignment and the workspace), once; enqueue() only
// launches it.
class GemmStep {
 public:
  using Pointers = GemmPointers;
  // Throws ks::Error(Status::invalid_argument) when cuBLASLt has no algorithm
  // for the GEMM. An `algo` past the algorithms it offers takes the last.
  GemmStep(const CublasLtHandle& handle, const ResolvedGemm& gemm, const Pointers& p, std::size_t workspace_bytes);
  ~GemmStep();
  GemmStep(const GemmStep&) = delete;
  GemmStep& operator=(const GemmStep&) = delete;

  // Throws ks::Error(Status::cuda) with cuBLASLt's status.
  void enqueue(CUdeviceptr workspace, CUstream stream) const;
  int algorithms_offered() const { return offered_; }
  int algorithm_chosen() const { return chosen_; }  // the index used

 private:
  struct Descriptors;
  std::unique_ptr<Descriptors> desc_;
  const CublasLtHandle& handle_;
  Pointers p_;
  std::size_t workspace_bytes_;
  int offered_ = 0;
  int chosen_ = 0;
};

}  // namespace ks::eval::cuda
