#include "search/weak_check/candidates.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/elements.hpp"

namespace ks::core::weak {
namespace {

// Each output gets its own entry function or kernel, named by its position
// (tensor names need not be identifiers of the candidate's language).
std::string entry_name(std::size_t output_index) { return fmt::format("ks_weak_out{}", output_index); }

// The unsigned integer type as wide as one element, for bit patterns.
const char* bits_type(DType t, Language lang) {
  switch (dtype_size(t)) {
    case 1: return lang == Language::cuda ? "unsigned char" : "std::uint8_t";
    case 2: return lang == Language::cuda ? "unsigned short" : "std::uint16_t";
    case 4: return lang == Language::cuda ? "unsigned int" : "std::uint32_t";
    default: return lang == Language::cuda ? "unsigned long long" : "std::uint64_t";
  }
}

// The element `v` of dtype `t` as an integer literal of its bits, converted
// by the rule generated inputs follow (core/elements.hpp).
std::string bits_literal(DType t, double v) {
  unsigned char bytes[8] = {};
  store_element(bytes, t, 0, v);
  std::uint64_t bits = 0;
  std::memcpy(&bits, bytes, dtype_size(t));  // little-endian hosts and GPUs
  return fmt::format("0x{:x}ull", bits);
}

std::vector<const TensorSpec*> outputs_of(const TaskSpec& task) {
  std::vector<const TensorSpec*> out;
  for (const auto& t : task.tensors)
    if (t.is_output && !t.scalar) out.push_back(&t);
  return out;
}

// The input an echo copies into `output`: the first of its dtype with the
// same shape, else the first of its dtype; null when there is none.
const TensorSpec* echo_source(const TaskSpec& task, const TensorSpec& output) {
  const TensorSpec* first = nullptr;
  for (const auto& t : task.tensors) {
    if (t.is_output || t.scalar || t.dtype != output.dtype) continue;
    if (t.shape == output.shape) return &t;
    if (!first) first = &t;
  }
  return first;
}

constexpr const char* kHostPrelude = R"(// A trivial candidate of libksearch's weak-check detection (docs/evaluation.md,
// "Weak checks"): it computes nothing the task asks for.
#include <cstddef>
#include <cstdint>
#include <cstring>

template <class T, class Bits>
static void ks_weak_fill(T* out, std::int64_t n, Bits bits) {
  static_assert(sizeof(T) == sizeof(Bits), "one pattern per element");
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(out + i, &bits, sizeof bits);
}

template <class T>
static void ks_weak_echo(const T* in, T* out, std::int64_t n_in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (n_in > 0) std::memcpy(out + i, in + i % n_in, sizeof(T));
    else std::memset(out + i, 0, sizeof(T));
  }
}
)";

constexpr const char* kCudaPrelude = R"(// A trivial candidate of libksearch's weak-check detection (docs/evaluation.md,
// "Weak checks"): it computes nothing the task asks for. Elements are moved as
// bit patterns of their width, whatever their type.
)";

// What one output receives: a constant bit pattern, or a copy of an input.
struct Fill {
  const TensorSpec* output = nullptr;
  std::string bits;                  // the pattern, when not echoing
  const TensorSpec* input = nullptr; // echo from this input
};

std::string host_function(std::size_t index, const Fill& f) {
  const char* type = dtype_c_type(f.output->dtype, Language::cpp);
  const char* bits = bits_type(f.output->dtype, Language::cpp);
  if (f.input)
    return fmt::format("void {}(const {}* in, {}* out, std::int64_t n_in, std::int64_t n) {{ ks_weak_echo(in, out, "
                       "n_in, n); }}\n",
                       entry_name(index), type, type);
  return fmt::format("void {}({}* out, std::int64_t n) {{ ks_weak_fill(out, n, static_cast<{}>({})); }}\n",
                     entry_name(index), type, bits, f.bits);
}

std::string cuda_kernel(std::size_t index, const Fill& f) {
  const char* bits = bits_type(f.output->dtype, Language::cuda);
  const std::string loop = "for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; "
                           "i += (long long)gridDim.x * blockDim.x)";
  if (f.input)
    return fmt::format("extern \"C\" __global__ void {0}(const {1}* in, {1}* out, long long n_in, long long n) {{\n"
                       "  {2} out[i] = n_in > 0 ? in[i % n_in] : ({1})0;\n}}\n",
                       entry_name(index), bits, loop);
  return fmt::format("extern \"C\" __global__ void {0}({1}* out, long long n) {{\n  {2} out[i] = ({1}){3};\n}}\n",
                     entry_name(index), bits, loop, f.bits);
}

Solution make_solution(const TaskSpec& task, Language lang, const std::string& name, const std::string& description,
                       const std::vector<Fill>& fills) {
  Solution s;
  s.task = task.name;
  s.language = lang;
  s.name = "weak-check: " + name;
  s.description = description;
  std::string code = lang == Language::cuda ? kCudaPrelude : kHostPrelude;
  Json steps = Json::array();
  for (std::size_t i = 0; i < fills.size(); ++i) {
    const Fill& f = fills[i];
    const std::string n = element_count_expr(*f.output);
    Json args = Json::array();
    if (f.input) args.push_back(f.input->name);
    args.push_back(f.output->name);
    if (f.input) args.push_back(element_count_expr(*f.input));
    args.push_back(n);
    if (lang == Language::cuda) {
      code += "\n" + cuda_kernel(i, f);
      steps.push_back(Json::obj({{"name", entry_name(i)},
                                 {"grid", Json::arr({fmt::format("max(1, min(cdiv({}, 256), 4096))", n)})},
                                 {"block", Json::arr({256})},
                                 {"args", args}}));
    } else {
      code += "\n" + host_function(i, f);
      steps.push_back(Json::obj({{"fn", entry_name(i)}, {"args", args}}));
    }
  }
  s.sources.push_back({lang == Language::cuda ? "weak_check.cu" : "weak_check.cpp", code});
  s.launch_plan = LaunchPlan::from_json(Json::obj({{lang == Language::cuda ? "kernels" : "calls", steps}}), lang);
  s.finalize();
  return s;
}

constexpr const char* kMostCommonSource = R"(// libksearch's weak-check detection (docs/evaluation.md, "Weak checks"):
// after the reference has run, each output is overwritten with its own most
// common value, so that an exact comparison with the reference's outputs
// measures that value's share.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

template <class Bits, class T>
static void ks_weak_most_common(T* out, std::int64_t n, Bits negative_zero) {
  static_assert(sizeof(T) == sizeof(Bits), "one pattern per element");
  if (n <= 0) return;
  std::vector<Bits> v(static_cast<std::size_t>(n));
  std::memcpy(v.data(), out, sizeof(T) * v.size());
  for (Bits& b : v)
    if (b == negative_zero) b = 0;  // -0 counts as 0 (for integers negative_zero is 0 itself)
  std::sort(v.begin(), v.end());
  Bits best = v[0];
  std::size_t best_count = 0;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    if (j - i > best_count) {
      best_count = j - i;
      best = v[i];
    }
    i = j;
  }
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(out + i, &best, sizeof best);
}
)";

}  // namespace

std::string element_count_expr(const TensorSpec& tensor) {
  if (tensor.shape.empty()) return "1";
  std::string e;
  for (const auto& s : tensor.shape) e += (e.empty() ? "" : "*") + fmt::format("({})", s);
  return e;
}

std::vector<TrivialCandidate> trivial_candidates(const TaskSpec& task, Language lang) {
  const auto outputs = outputs_of(task);
  std::vector<TrivialCandidate> out;
  if (outputs.empty()) return out;
  auto constant = [&](double v) {
    std::vector<Fill> fills;
    for (const TensorSpec* o : outputs) fills.push_back({o, bits_literal(o->dtype, v), nullptr});
    return fills;
  };
  out.push_back({"zeros", "writes 0 to every output element",
                 make_solution(task, lang, "zeros", "every output element 0", constant(0.0))});
  out.push_back({"ones", "writes 1 to every output element",
                 make_solution(task, lang, "ones", "every output element 1", constant(1.0))});
  std::vector<Fill> echo = constant(0.0);
  std::string copies;
  for (Fill& f : echo) {
    f.input = echo_source(task, *f.output);
    if (f.input) copies += fmt::format("{}{} into {}", copies.empty() ? "" : ", ", f.input->name, f.output->name);
  }
  if (!copies.empty())
    out.push_back({"echo", fmt::format("copies an input into the output ({}), repeated or cut to its size", copies),
                   make_solution(task, lang, "echo", "inputs copied into the outputs", echo)});
  return out;
}

std::optional<Solution> most_common_value_probe(const TaskSpec& task, Language lang) {
  auto ref = task.references.find(lang);
  if (lang != Language::cpp || ref == task.references.end()) return std::nullopt;
  Solution s = ref->second;
  s.name = "weak-check: most common value";
  s.description = "the reference, then every output overwritten with its most common value";
  std::string code = kMostCommonSource;
  std::vector<LaunchPlan::Call> calls;
  const auto outputs = outputs_of(task);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const TensorSpec& o = *outputs[i];
    const std::string fn = fmt::format("ks_weak_most_common_out{}", i);
    const std::string neg_zero = dtype_is_float(o.dtype) ? bits_literal(o.dtype, -0.0) : "0";
    code += fmt::format("\nvoid {}({}* out, std::int64_t n) {{ ks_weak_most_common(out, n, static_cast<{}>({})); }}\n",
                        fn, dtype_c_type(o.dtype, Language::cpp), bits_type(o.dtype, Language::cpp), neg_zero);
    calls.push_back({fn, {LaunchPlan::Arg(o.name), LaunchPlan::Arg(element_count_expr(o))}});
  }
  s.sources.push_back({"ks_weak_most_common.cpp", code});
  LaunchPlan plan = s.launch_plan;
  plan.calls.insert(plan.calls.end(), calls.begin(), calls.end());
  for (auto& v : plan.variants)
    if (!v.calls.empty()) v.calls.insert(v.calls.end(), calls.begin(), calls.end());
  s.launch_plan = plan;
  s.finalize();
  return s;
}

}  // namespace ks::core::weak
