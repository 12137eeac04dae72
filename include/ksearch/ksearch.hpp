// A header-only C++ wrapper of the C ABI (ksearch.h): handles that release
// themselves and an exception carrying the status. It uses nothing but the
// C functions, so a program built with it depends only on the stable ABI,
// whatever compiler and standard library built libksearch. (The native C++
// API, ksearch/search.hpp and friends, is richer but ties the program to
// the library's C++ ABI.)
//
//   ks_search_options o = ks::abi::search_options();
//   o.task = "examples/tasks/softmax";
//   o.llm.source = KS_LLM_OFFLINE;
//   ks::abi::Result r = ks::abi::search(o);
//   ks::abi::Kernel k = ks::abi::Kernel::from_result(r);
//   k.launch({{"R", 4096}, {"C", 1024}}, {{"x", d_x}, {"y", d_y}}, stream);
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ksearch/ksearch.h"

namespace ks::abi {

class Error : public std::runtime_error {
 public:
  Error(ks_status status, const std::string& message)
      : std::runtime_error(std::string(ks_status_string(status)) + ": " + message), status_(status) {}
  ks_status status() const noexcept { return status_; }

 private:
  ks_status status_;
};

inline void check(ks_status s) {
  if (s != KS_OK) throw Error(s, ks_last_error_message());
}

template <typename T, void (*Destroy)(T*)>
struct Deleter {
  void operator()(T* p) const noexcept { Destroy(p); }
};

// ---- Options ----------------------------------------------------------------

inline ks_search_options search_options() {
  ks_search_options o;
  check(ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION));
  return o;
}

inline ks_resume_options resume_options() {
  ks_resume_options o;
  check(ks_resume_options_init(&o, KS_RESUME_OPTIONS_VERSION));
  return o;
}

// ---- Searching ---------------------------------------------------------------

class CancelToken {
 public:
  CancelToken() {
    ks_cancel_token* t = nullptr;
    check(ks_cancel_token_create(&t));
    token_.reset(t);
  }
  void cancel() noexcept { ks_cancel_token_cancel(token_.get()); }
  bool cancelled() const noexcept { return ks_cancel_token_is_cancelled(token_.get()) != 0; }
  ks_cancel_token* get() const noexcept { return token_.get(); }

 private:
  std::unique_ptr<ks_cancel_token, Deleter<ks_cancel_token, ks_cancel_token_destroy>> token_;
};

class Result {
 public:
  explicit Result(ks_result* r) : r_(r) {}
  bool has_best() const { return ks_result_has_best(get()) != 0; }
  double best_latency_ms() const { return ks_result_best_latency_ms(get()); }
  double best_speedup() const { return ks_result_best_speedup(get()); }
  int rounds() const { return ks_result_rounds(get()); }
  std::string run_dir() const { return ks_result_run_dir(get()); }
  std::string stop_reason() const { return ks_result_stop_reason(get()); }
  std::string best_solution_id() const { return ks_result_best_solution_id(get()); }
  std::string best_solution_json() const { return ks_result_best_solution_json(get()); }
  std::string json() const { return ks_result_json(get()); }
  ks_stop_reason stop_reason_code() const { return ks_result_stop_reason_code(get()); }
  bool cancelled() const { return stop_reason_code() == KS_STOP_CANCELLED; }
  const ks_result* get() const noexcept { return r_.get(); }

 private:
  std::unique_ptr<ks_result, Deleter<ks_result, ks_result_destroy>> r_;
};

// Runs a search. A run stopped by a callback or a cancel token returns its
// result too (cancelled() is then true); other failures throw Error.
inline Result search(const ks_search_options& options) {
  ks_result* r = nullptr;
  ks_status s = ks_search_run(&options, &r);
  if (s != KS_OK && s != KS_E_CANCELLED) check(s);
  return Result(r);
}

inline Result resume(const std::string& run_dir, const ks_resume_options* options = nullptr) {
  ks_result* r = nullptr;
  ks_status s = ks_search_resume(run_dir.c_str(), options, &r);
  if (s != KS_OK && s != KS_E_CANCELLED) check(s);
  return Result(r);
}

// ---- Kernels ------------------------------------------------------------------

struct Dim {
  std::string name;
  std::int64_t value;
};

struct Tensor {
  std::string name;
  std::uint64_t device_ptr;
  std::uint64_t bytes = 0;  // 0: not checked
};

struct Scalar {
  std::string name;
  double value;
};

class Kernel {
 public:
  static Kernel load(const ks_kernel_load_options& options) {
    ks_kernel* k = nullptr;
    check(ks_kernel_load(&options, &k));
    return Kernel(k);
  }
  static ks_kernel_load_options load_options() {
    ks_kernel_load_options o;
    check(ks_kernel_load_options_init(&o, KS_KERNEL_LOAD_OPTIONS_VERSION));
    return o;
  }
  // The best solution of a search, into the current CUDA context.
  static Kernel from_result(const Result& r) {
    ks_kernel_load_options o = load_options();
    o.result = r.get();
    return load(o);
  }
  // The best solution of a run folder.
  static Kernel from_run(const std::string& run_dir) {
    ks_kernel_load_options o = load_options();
    o.run_dir = run_dir.c_str();
    return load(o);
  }
  // A solution file (solution JSON or an LLM-style answer) of a task.
  static Kernel from_file(const std::string& path, const std::string& task) {
    ks_kernel_load_options o = load_options();
    o.solution_path = path.c_str();
    o.task = task.c_str();
    return load(o);
  }

  // Enqueues the plan for `dims` on `stream` (a CUstream; null: the default one).
  void launch(const std::vector<Dim>& dims, const std::vector<Tensor>& tensors, void* stream = nullptr,
              const char* workload = nullptr, const std::vector<Scalar>& scalars = {}) {
    Args a(dims, tensors, stream, workload, scalars);
    check(ks_kernel_launch(get(), &a.args));
  }
  // What launch() would do, as JSON (see ks_kernel_resolve).
  std::string resolve(const std::vector<Dim>& dims, const char* workload = nullptr,
                      const std::vector<Scalar>& scalars = {}) {
    Args a(dims, {}, nullptr, workload, scalars);
    char* json = nullptr;
    check(ks_kernel_resolve(get(), &a.args, &json));
    std::string out(json);
    ks_string_free(json);
    return out;
  }

  std::string solution_id() const { return ks_kernel_solution_id(get()); }
  std::string task() const { return ks_kernel_task(get()); }
  std::string arch() const { return ks_kernel_arch(get()); }
  std::size_t module_count() const { return ks_kernel_module_count(get()); }
  ks_kernel* get() const noexcept { return k_.get(); }

 private:
  explicit Kernel(ks_kernel* k) : k_(k) {}

  // The C structs, pointing into the caller's vectors for the call's length.
  struct Args {
    std::vector<ks_kernel_dim> dims;
    std::vector<ks_kernel_tensor> tensors;
    std::vector<ks_kernel_scalar> scalars;
    ks_kernel_launch_args args;
    Args(const std::vector<Dim>& d, const std::vector<Tensor>& t, void* stream, const char* workload,
         const std::vector<Scalar>& s) {
      check(ks_kernel_launch_args_init(&args, KS_KERNEL_LAUNCH_ARGS_VERSION));
      for (const auto& x : d) dims.push_back({x.name.c_str(), x.value});
      for (const auto& x : t) tensors.push_back({x.name.c_str(), x.device_ptr, x.bytes});
      for (const auto& x : s) scalars.push_back({x.name.c_str(), x.value});
      args.scalars = scalars.data();
      args.scalar_count = scalars.size();
      args.dims = dims.data();
      args.dim_count = dims.size();
      args.tensors = tensors.data();
      args.tensor_count = tensors.size();
      args.stream = stream;
      args.workload = workload;
    }
  };

  std::unique_ptr<ks_kernel, Deleter<ks_kernel, ks_kernel_destroy>> k_;
};

}  // namespace ks::abi
