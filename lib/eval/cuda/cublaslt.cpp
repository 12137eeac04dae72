// GEMM steps through cuBLASLt. The plan is row-major, cuBLASLt column-major:
// a row-major R x C matrix is a column-major C x R one, so D = op(A) op(B)
// runs as D^T = op(B)^T op(A)^T, that is with A and B swapped, m and n
// swapped, and each operand's transpose flag kept.
#include "eval/cuda/cublaslt.hpp"

#include <cublasLt.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "eval/cuda/cuda_api.hpp"
#include "ksearch/error.hpp"

namespace ks::eval::cuda {

#define KS_CUBLASLT_ENTRIES(X)                                                                              \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusString)                    \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)               \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute)         \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                                     \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct CublasLtApi {
#define KS_DECLARE(fn) decltype(&::fn) fn = nullptr;
  KS_CUBLASLT_ENTRIES(KS_DECLARE)
#undef KS_DECLARE
  std::string library;
};

namespace {

std::unique_ptr<CublasLtApi> load_cublaslt() {
  std::string lib, tried;
  void* handle = open_toolkit_library("", "KSEARCH_LIBCUBLASLT",
                                      {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, lib, tried);
  if (!handle)
    throw Error(Status::no_device,
                "cuBLASLt could not be loaded, and this launch plan has a GEMM step, which runs on it; install the "
                "CUDA toolkit's cuBLAS or set KSEARCH_LIBCUBLASLT (or write the GEMM as a kernel). Tried:" + tried);
  auto api = std::make_unique<CublasLtApi>();
  api->library = lib;
  std::string missing;
#define KS_LOAD(fn)                                                               \
  api->fn = reinterpret_cast<decltype(&::fn)>(::dlsym(handle, #fn));              \
  if (!api->fn) missing += std::string(missing.empty() ? "" : ", ") + #fn;
  KS_CUBLASLT_ENTRIES(KS_LOAD)
#undef KS_LOAD
  if (!missing.empty())
    throw Error(Status::no_device, fmt::format("cuBLASLt library {} lacks {}; cuBLAS 12 or newer is needed", lib,
                                               missing));
  return api;
}

std::string status_text(const CublasLtApi& api, cublasStatus_t s) {
  const char* text = api.cublasLtGetStatusString(s);
  return fmt::format("{} ({})", text ? text : "unknown status", static_cast<int>(s));
}

void check(const CublasLtApi& api, cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(Status::cuda, fmt::format("{} failed: {}", call, status_text(api, s)));
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f32: return CUDA_R_32F;
    default: throw Error(Status::invalid_argument, fmt::format("a GEMM step cannot take {} operands", to_string(t)));
  }
}

cublasLtEpilogue_t epilogue_of(ks::LaunchPlan::Gemm::Epilogue e) {
  using E = ks::LaunchPlan::Gemm::Epilogue;
  switch (e) {
    case E::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case E::relu: return CUBLASLT_EPILOGUE_RELU;
    case E::gelu: return CUBLASLT_EPILOGUE_GELU;
    case E::bias: return CUBLASLT_EPILOGUE_BIAS;
    case E::relu_bias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case E::gelu_bias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The alignment cuBLASLt may assume for an operand: of its address and, over
// a batch, of the stride between items (at most the 256 it assumes unasked).
std::uint32_t alignment(CUdeviceptr p, std::int64_t batch, std::int64_t stride, DType t) {
  std::uint64_t bits = p | 256;
  if (batch > 1) bits |= static_cast<std::uint64_t>(stride) * dtype_size(t);
  return static_cast<std::uint32_t>(bits & (~bits + 1));
}

}  // namespace

GemmPointers gemm_operands(const ResolvedGemm& g, const std::function<GemmBuffer(const std::string&)>& buffer,
                           const std::string& where) {
  GemmPointers p;
  const std::pair<const std::string*, std::uint64_t> need[] = {
      {&g.a, g.bytes_a()}, {&g.b, g.bytes_b()}, {&g.c, g.bytes_c()}, {&g.d, g.bytes_d()}, {&g.bias, g.bytes_bias()}};
  CUdeviceptr* slots[] = {&p.a, &p.b, &p.c, &p.d, &p.bias};
  for (std::size_t i = 0; i < 5; ++i) {
    const auto& [name, bytes] = need[i];
    if (name->empty()) continue;
    const GemmBuffer buf = buffer(*name);
    if (buf.size_known && bytes > buf.bytes)
      throw Error(Status::invalid_argument,
                  fmt::format("{}: {} reaches {} bytes into `{}`, which has {}; check m, n, k, the leading "
                              "dimensions, batch and strides",
                              where, g.describe(), bytes, *name, buf.bytes));
    *slots[i] = buf.addr;
  }
  return p;
}

const CublasLtApi& cublaslt() {
  static Loaded<CublasLtApi> slot;  // never freed: steps may run until exit
  return get_loaded(slot, [] { return load_cublaslt(); });
}

CublasLtHandle::CublasLtHandle() {
  const CublasLtApi& api = cublaslt();
  cublasLtHandle_t h = nullptr;
  check(api, api.cublasLtCreate(&h), "cublasLtCreate");
  handle_ = h;
}

CublasLtHandle::~CublasLtHandle() {
  if (handle_) cublaslt().cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

struct GemmStep::Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;  // in cuBLASLt's terms
  cublasLtMatmulAlgo_t algo{};
  float alpha = 1, beta = 0;

  ~Descriptors() {
    const CublasLtApi& api = cublaslt();
    for (auto* l : {a, b, c, d})
      if (l) api.cublasLtMatrixLayoutDestroy(l);
    if (op) api.cublasLtMatmulDescDestroy(op);
  }
};

GemmStep::GemmStep(const CublasLtHandle& handle, const ResolvedGemm& g, const Pointers& p,
                   std::size_t workspace_bytes)
    : desc_(std::make_unique<Descriptors>()), handle_(handle), p_(p), workspace_bytes_(workspace_bytes) {
  const CublasLtApi& api = cublaslt();
  Descriptors& d = *desc_;
  const cublasComputeType_t compute =
      g.compute == ks::LaunchPlan::Gemm::Compute::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check(api, api.cublasLtMatmulDescCreate(&d.op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  auto set_op = [&](cublasLtMatmulDescAttributes_t attr, const void* v, std::size_t size) {
    check(api, api.cublasLtMatmulDescSetAttribute(d.op, attr, v, size), "cublasLtMatmulDescSetAttribute");
  };
  // Swapped operands (the comment at the top): cuBLASLt's A is the plan's B.
  const cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_op(CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a);
  set_op(CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b);
  const cublasLtEpilogue_t epi = epilogue_of(g.epilogue);
  set_op(CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  if (!g.bias.empty()) {
    const void* bias = reinterpret_cast<const void*>(p.bias);
    const cudaDataType_t bias_type = data_type(g.d_type);
    const std::int64_t bias_stride = 0;  // one bias for every batch item
    set_op(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    set_op(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
    set_op(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_stride, sizeof bias_stride);
  }
  // A row-major rows x cols operand is column-major cols x rows.
  auto layout = [&](cublasLtMatrixLayout_t& l, DType t, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                    std::int64_t stride) {
    check(api,
          api.cublasLtMatrixLayoutCreate(&l, data_type(t), static_cast<std::uint64_t>(cols),
                                         static_cast<std::uint64_t>(rows), ld),
          "cublasLtMatrixLayoutCreate");
    if (g.batch > 1) {
      const std::int32_t count = static_cast<std::int32_t>(g.batch);
      check(api, api.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
            "cublasLtMatrixLayoutSetAttribute");
      check(api,
            api.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                 sizeof stride),
            "cublasLtMatrixLayoutSetAttribute");
    }
  };
  layout(d.a, g.b_type, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b);
  layout(d.b, g.a_type, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a);
  layout(d.c, g.d_type, g.m, g.n, g.ldc, g.stride_c);
  layout(d.d, g.d_type, g.m, g.n, g.ldd, g.stride_d);
  d.alpha = static_cast<float>(g.alpha);
  d.beta = static_cast<float>(g.beta);

  cublasLtMatmulPreference_t pref = nullptr;
  check(api, api.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  struct PrefGuard {
    const CublasLtApi& api;
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { api.cublasLtMatmulPreferenceDestroy(p); }
  } guard{api, pref};
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* v, std::size_t size) {
    check(api, api.cublasLtMatmulPreferenceSetAttribute(pref, attr, v, size), "cublasLtMatmulPreferenceSetAttribute");
  };
  const std::uint64_t ws = workspace_bytes;
  set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  const std::array<std::uint32_t, 4> align{alignment(p.b, g.batch, g.stride_b, g.b_type),
                                           alignment(p.a, g.batch, g.stride_a, g.a_type),
                                           alignment(p.c, g.batch, g.stride_c, g.d_type),
                                           alignment(p.d, g.batch, g.stride_d, g.d_type)};
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align[0], sizeof align[0]);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align[1], sizeof align[1]);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align[2], sizeof align[2]);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align[3], sizeof align[3]);

  // The ranking's head does not depend on how many are asked for; 16 names
  // what there is when `algo` is past the end.
  std::vector<cublasLtMatmulHeuristicResult_t> found(std::max<std::size_t>(16, static_cast<std::size_t>(g.algo) + 1));
  int returned = 0;
  cublasStatus_t s = api.cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle.get()), d.op, d.a, d.b,
                                                        d.c, d.d, pref, static_cast<int>(found.size()), found.data(),
                                                        &returned);
  if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED)
    check(api, s, "cublasLtMatmulAlgoGetHeuristic");
  offered_ = s == CUBLAS_STATUS_SUCCESS ? returned : 0;
  if (offered_ == 0)
    throw Error(Status::invalid_argument,
                fmt::format("{}: cuBLASLt has no algorithm for this GEMM on this GPU ({}); check the dtypes, "
                            "leading dimensions and strides, or write it as a kernel",
                            g.describe(), status_text(api, s)));
  // A small problem has a shorter ranking than a large one; one tunable
  // index serves every shape, so an index past the end takes the last.
  chosen_ = std::min(g.algo, offered_ - 1);
  d.algo = found[static_cast<std::size_t>(chosen_)].algo;
}

GemmStep::~GemmStep() = default;

void GemmStep::enqueue(CUdeviceptr workspace, CUstream stream) const {
  const CublasLtApi& api = cublaslt();
  const Descriptors& d = *desc_;
  check(api,
        api.cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_.get()), d.op, &d.alpha,
                           reinterpret_cast<const void*>(p_.b), d.a, reinterpret_cast<const void*>(p_.a), d.b,
                           &d.beta, reinterpret_cast<const void*>(p_.c), d.c, reinterpret_cast<void*>(p_.d), d.d,
                           &d.algo, reinterpret_cast<void*>(workspace), workspace_bytes_,
                           reinterpret_cast<cudaStream_t>(stream)),
        "cublasLtMatmul");
}

}  // namespace ks::eval::cuda
