// The native KernelBench level-1 problems: shapes (HEAD, 423217d), tensors,
// trusted CUDA references, straightforward starting kernels, CPU references
// and the published PyTorch times. Kernel sources live in kernels/ and are
// compiled in (level1_embedded.hpp); docs/tasks/kernelbench.md lists the
// problems and where their inputs differ from KernelBench's.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ksearch/error.hpp"
#include "tasks/kernelbench/level1.hpp"
#include "tasks/kernelbench/level1_embedded.hpp"
#include "util/expr.hpp"

namespace ks::tasks::kernelbench {
namespace {

using K = Distribution::Kind;

Distribution dist(K kind, std::string p0, std::string p1) {
  Distribution d;
  d.kind = kind;
  d.p0 = std::move(p0);
  d.p1 = std::move(p1);
  return d;
}

// torch.rand: uniform on [0, 1).
TensorSpec rand_input(std::string name, std::vector<std::string> shape) {
  TensorSpec t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.dist = dist(K::uniform, "0", "1");
  return t;
}

TensorSpec input(std::string name, std::vector<std::string> shape, Distribution d) {
  TensorSpec t = rand_input(std::move(name), std::move(shape));
  t.dist = std::move(d);
  return t;
}

TensorSpec output(std::vector<std::string> shape) {
  TensorSpec t;
  t.name = "output";
  t.shape = std::move(shape);
  t.is_output = true;
  return t;
}

Json kernel(std::string name, std::vector<Json> grid, std::vector<Json> block, std::vector<Json> args) {
  return Json::obj({{"name", std::move(name)},
                    {"grid", Json(std::move(grid))},
                    {"block", Json(std::move(block))},
                    {"args", Json(std::move(args))}});
}

Json plan(std::vector<Json> kernels, std::vector<Json> scratch = {}) {
  Json p = Json::obj({{"kernels", Json(std::move(kernels))}});
  if (!scratch.empty()) p["scratch"] = Json(std::move(scratch));
  return p;
}

Json f64(std::string e) { return Json::obj({{"f64", std::move(e)}}); }
Json f32(std::string e) { return Json::obj({{"f32", std::move(e)}}); }
Json i32(std::string e) { return Json::obj({{"i32", std::move(e)}}); }

// A grid-stride launch over n elements: enough blocks, but not absurdly many.
Json strided_grid(const std::string& n) { return Json(fmt::format("min(cdiv({}, 256), 1048576)", n)); }

Solution solution(std::string name, std::string file, std::string source, Json launch_plan, std::string description) {
  Solution s;
  s.name = std::move(name);
  s.language = Language::cuda;
  s.sources.push_back({std::move(file), std::move(source)});
  s.launch_plan = LaunchPlan::from_json(launch_plan, s.language);
  s.description = std::move(description);
  return s;
}

std::string with_define(const std::string& define, std::string_view source) {
  return define + "\n" + std::string(source);
}

const std::vector<float>& in(const HostTensors& t, const char* name) {
  auto it = t.find(name);
  if (it == t.end()) throw Error(Status::invalid_argument, fmt::format("CPU reference: no input \"{}\"", name));
  return it->second;
}

std::int64_t dim(const DimValues& d, const char* name) {
  auto it = d.find(name);
  if (it == d.end()) throw Error(Status::invalid_argument, fmt::format("CPU reference: no dimension \"{}\"", name));
  return it->second;
}

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

constexpr const char* kRandNote =
    "Inputs are uniform on [0, 1) like torch.rand, but drawn by libksearch's own generator, so the values "
    "differ from KernelBench's torch.rand stream.";

// ---------------------------------------------------------------------------
// Elementwise activations on x [batch_size, dim]

struct Activation {
  int id;
  const char* stem;
  const char* torch;    // the forward, in PyTorch
  const char* ref_op;   // KB_REF_OP(v), double
  const char* start_op; // KB_OP(v), float
  double eager_ms, compile_ms;
  double (*cpu)(double);
};

double relu(double v) { return v > 0 ? v : 0; }
double leaky_relu(double v) { return v > 0 ? v : 0.01 * v; }
double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }
double tanh_(double v) { return std::tanh(v); }
double swish(double v) { return v / (1 + std::exp(-v)); }
double gelu(double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }
double selu(double v) {
  return 1.0507009873554804934193349852946 * (v > 0 ? v : 1.6732632423543772848170429916717 * (std::exp(v) - 1));
}
double hardsigmoid(double v) { return std::min(std::max(v + 3, 0.0), 6.0) / 6; }
double softplus(double v) { return v > 20 ? v : std::log1p(std::exp(v)); }
double softsign(double v) { return v / (1 + std::fabs(v)); }
double elu(double v) { return v > 0 ? v : std::exp(v) - 1; }
double hardtanh(double v) { return std::min(std::max(v, -1.0), 1.0); }

const Activation kActivations[] = {
    {19, "19_ReLU", "torch.relu(x)", "(v > 0.0 ? v : 0.0)", "fmaxf(v, 0.0f)", 4.28, 4.35, relu},
    {20, "20_LeakyReLU", "torch.nn.functional.leaky_relu(x, negative_slope=0.01)", "(v > 0.0 ? v : 0.01 * v)",
     "(v > 0.0f ? v : 0.01f * v)", 4.28, 4.28, leaky_relu},
    {21, "21_Sigmoid", "torch.sigmoid(x)", "(1.0 / (1.0 + exp(-v)))", "(1.0f / (1.0f + expf(-v)))", 4.32, 4.3,
     sigmoid},
    {22, "22_Tanh", "torch.tanh(x)", "tanh(v)", "tanhf(v)", 4.31, 4.33, tanh_},
    {25, "25_Swish", "x * torch.sigmoid(x)", "(v / (1.0 + exp(-v)))", "(v / (1.0f + expf(-v)))", 10.5, 4.28, swish},
    {26, "26_GELU_", "torch.nn.functional.gelu(x)  # exact (erf) form", "(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)))",
     "(0.5f * v * (1.0f + erff(v * 0.70710678f)))", 4.3, 4.27, gelu},
    {27, "27_SELU_", "torch.selu(x)",
     "(1.0507009873554804934 * (v > 0.0 ? v : 1.6732632423543772848 * (exp(v) - 1.0)))",
     "(1.05070098f * (v > 0.0f ? v : 1.67326324f * (expf(v) - 1.0f)))", 4.3, 4.3, selu},
    {28, "28_HardSigmoid", "torch.nn.functional.hardsigmoid(x)  # min(max(x + 3, 0), 6) / 6",
     "(fmin(fmax(v + 3.0, 0.0), 6.0) / 6.0)", "(fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f)", 4.34, 4.3, hardsigmoid},
    {29, "29_Softplus", "torch.nn.functional.softplus(x)  # beta 1, threshold 20",
     "(v > 20.0 ? v : log1p(exp(v)))", "(v > 20.0f ? v : log1pf(expf(v)))", 4.31, 4.3, softplus},
    {30, "30_Softsign", "x / (1 + torch.abs(x))", "(v / (1.0 + fabs(v)))", "(v / (1.0f + fabsf(v)))", 14.8, 4.3,
     softsign},
    {31, "31_ELU", "torch.nn.functional.elu(x, alpha=1.0)", "(v > 0.0 ? v : exp(v) - 1.0)",
     "(v > 0.0f ? v : expf(v) - 1.0f)", 4.3, 4.38, elu},
    {32, "32_HardTanh", "torch.nn.functional.hardtanh(x, min_val=-1., max_val=1.)", "fmin(fmax(v, -1.0), 1.0)",
     "fminf(fmaxf(v, -1.0f), 1.0f)", 4.34, 4.29, hardtanh},
};

Level1Problem activation_problem(const Activation& a) {
  Level1Problem p;
  p.id = a.id;
  p.stem = a.stem;
  if (a.id == 31) p.init_inputs = "[1.0]";  // alpha
  p.summary = fmt::format("out = {} on x [4096, 393216]", a.torch);
  p.pytorch = fmt::format("class Model(nn.Module):\n    def forward(self, x):\n        return {}\n\n"
                          "batch_size = 4096\ndim = 393216\nx = torch.rand(batch_size, dim)",
                          a.torch);
  p.dims = {{"batch_size", 4096}, {"dim", 393216}};
  p.tests = {{"small", {{"batch_size", 3}, {"dim", 1000}}}, {"tiny", {{"batch_size", 1}, {"dim", 7}}}};
  p.tensors = {rand_input("x", {"batch_size", "dim"}), output({"batch_size", "dim"})};
  p.bytes = "8*batch_size*dim";
  p.reference = solution(
      "reference", "ref_elementwise.cu",
      with_define(fmt::format("#define KB_REF_OP(v) {}", a.ref_op), embedded::kb_ref_elementwise_cu),
      plan({kernel("kb_ref_elementwise", {strided_grid("batch_size*dim")}, {256}, {"x", "output", "batch_size*dim"})}),
      "Trusted reference: the activation in double precision, rounded to float once.");
  p.start = solution(
      "straightforward (starting point)", "kernel.cu",
      with_define(fmt::format("#define KB_OP(v) {}", a.start_op), embedded::kb_start_elementwise_cu),
      plan({kernel("kb_elementwise", {"cdiv(batch_size*dim, 256)"}, {256}, {"x", "output", "batch_size*dim"})}),
      "One thread per element, FP32.");
  p.eager_ms = a.eager_ms;
  p.compile_ms = a.compile_ms;
  p.inputs_note = kRandNote;
  auto f = a.cpu;
  p.cpu = [f](const HostTensors& inputs, const DimValues&, HostTensors& out) {
    const auto& x = in(inputs, "x");
    auto& y = out["output"];
    y.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(f(x[i]));
  };
  return p;
}

// ---------------------------------------------------------------------------
// Matrix products

struct Gemm {
  int id;
  const char* stem;
  const char* torch;
  std::vector<std::pair<std::string, std::int64_t>> dims;
  DimValues test;
  std::vector<std::string> a_shape, b_shape, out_shape;
  std::string M, N, K, batch;  // the product's sizes, as expressions over dims
  double eager_ms, compile_ms;
};

Level1Problem gemm_problem(const Gemm& g) {
  Level1Problem p;
  p.id = g.id;
  p.stem = g.stem;
  std::string dims_text;
  for (const auto& [k, v] : g.dims) dims_text += fmt::format("{} = {}\n", k, v);
  p.summary = fmt::format("{}: A {} @ B {}", g.torch, fmt::join(g.a_shape, "x"), fmt::join(g.b_shape, "x"));
  p.pytorch = fmt::format("class Model(nn.Module):\n    def forward(self, A, B):\n        return {}\n\n{}"
                          "A = torch.rand({})\nB = torch.rand({})",
                          g.torch, dims_text, fmt::join(g.a_shape, ", "), fmt::join(g.b_shape, ", "));
  p.dims = g.dims;
  p.tests = {{"small", g.test}};
  p.tensors = {rand_input("A", g.a_shape), rand_input("B", g.b_shape), output(g.out_shape)};
  const std::string M = g.M, N = g.N, Kd = g.K, b = g.batch;
  p.flops = fmt::format("2*({})*({})*({})*({})", b, M, N, Kd);
  p.bytes = fmt::format("4*({})*(({})*({}) + ({})*({}) + ({})*({}))", b, M, Kd, Kd, N, M, N);
  const std::vector<Json> args = {"A", "B", "output", Json(M), Json(N), Json(Kd)};
  const std::vector<Json> grid = {Json(fmt::format("cdiv({}, 16)", N)), Json(fmt::format("cdiv({}, 16)", M)), Json(b)};
  p.reference = solution("reference", "ref_gemm.cu", std::string(embedded::kb_ref_gemm_cu),
                         plan({kernel("kb_ref_gemm", grid, {16, 16}, args)}),
                         "Trusted reference: 16x16 shared-memory tiles, products accumulated in double.");
  if (g.id == 4) {
    p.start = solution("straightforward (starting point)", "kernel.cu", std::string(embedded::kb_start_matvec_cu),
                       plan({kernel("kb_matvec", {Json(fmt::format("cdiv(({})*32, 256)", M))}, {256},
                                    {"A", "B", "output", Json(M), Json(Kd)})}),
                       "One warp per row, FP32 accumulation.");
  } else {
    p.start = solution("straightforward (starting point)", "kernel.cu", std::string(embedded::kb_start_gemm_cu),
                       plan({kernel("kb_gemm", grid, {16, 16}, args)}),
                       "16x16 shared-memory tiles, one output per thread, FP32 accumulation.");
  }
  p.eager_ms = g.eager_ms;
  p.compile_ms = g.compile_ms;
  p.inputs_note = kRandNote;
  p.cpu = [M, N, Kd, b](const HostTensors& inputs, const DimValues& d, HostTensors& out) {
    util::Vars v(d.begin(), d.end());
    auto e = [&](const std::string& s) { return sz(util::eval_int_expr(s, v)); };
    const std::size_t m = e(M), n = e(N), k = e(Kd), batch = e(b);
    const auto& A = in(inputs, "A");
    const auto& B = in(inputs, "B");
    auto& C = out["output"];
    C.assign(batch * m * n, 0.0f);
    for (std::size_t z = 0; z < batch; ++z)
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          double acc = 0;
          for (std::size_t q = 0; q < k; ++q)
            acc += double(A[(z * m + i) * k + q]) * double(B[(z * k + q) * n + j]);
          C[(z * m + i) * n + j] = static_cast<float>(acc);
        }
  };
  return p;
}

// ---------------------------------------------------------------------------
// The others, one by one

Level1Problem scalar_multiplication() {
  Level1Problem p;
  p.id = 5;
  p.stem = "5_Matrix_scalar_multiplication";
  p.summary = "out = A * s with A [65536, 16384] and the scalar s = 3.14";
  p.pytorch =
      "class Model(nn.Module):\n    def forward(self, A, s: float):\n        return A * s\n\n"
      "M = 16384 * 4\nN = 4096 * 4\nA = torch.rand(M, N)\ns = 3.14";
  p.dims = {{"M", 65536}, {"N", 16384}};
  p.tests = {{"small", {{"M", 7}, {"N", 300}}}};
  // The Python float s of get_inputs() becomes a one-element tensor holding
  // it in float32, as every oracle task passes scalar inputs.
  p.tensors = {rand_input("A", {"M", "N"}), input("s", {}, dist(K::constant, "3.14", "0")), output({"M", "N"})};
  p.bytes = "8*M*N";
  p.reference = solution("reference", "ref_scale.cu", std::string(embedded::kb_ref_scale_cu),
                         plan({kernel("kb_ref_scale", {strided_grid("M*N")}, {256}, {"A", "s", "output", "M*N"})}),
                         "Trusted reference: the product in double, rounded once (the same as a float product).");
  p.start = solution("straightforward (starting point)", "kernel.cu", std::string(embedded::kb_start_scale_cu),
                     plan({kernel("kb_scale", {"cdiv(M*N, 256)"}, {256}, {"A", "s", "output", "M*N"})}),
                     "One thread per element.");
  p.eager_ms = 2.85;
  p.compile_ms = 2.85;
  p.inputs_note = std::string(kRandNote) + " The scalar s = 3.14 is passed as a one-element float32 tensor \"s\".";
  p.cpu = [](const HostTensors& inputs, const DimValues&, HostTensors& out) {
    const auto& A = in(inputs, "A");
    const double s = in(inputs, "s").at(0);
    auto& y = out["output"];
    y.resize(A.size());
    for (std::size_t i = 0; i < A.size(); ++i) y[i] = static_cast<float>(A[i] * s);
  };
  return p;
}

Level1Problem diagonal_matmul() {
  Level1Problem p;
  p.id = 12;
  p.stem = "12_Matmul_with_diagonal_matrices_";
  p.summary = "out = diag(A) @ B = A.unsqueeze(1) * B with A [4096], B [4096, 4096]";
  p.pytorch = "class Model(nn.Module):\n    def forward(self, A, B):\n        return A.unsqueeze(1) * B  # diag(A) @ B\n\n"
              "M = 4096\nN = 4096\nA = torch.rand(N)\nB = torch.rand(N, M)";
  p.dims = {{"M", 4096}, {"N", 4096}};
  p.tests = {{"small", {{"M", 37}, {"N", 21}}}};
  p.tensors = {rand_input("A", {"N"}), rand_input("B", {"N", "M"}), output({"N", "M"})};
  p.bytes = "4*(N + 2*N*M)";
  p.reference = solution("reference", "ref_scale.cu", std::string(embedded::kb_ref_scale_cu),
                         plan({kernel("kb_ref_diag_matmul", {strided_grid("N*M")}, {256}, {"A", "B", "output", "N", "M"})}),
                         "Trusted reference: one product per element, in double.");
  p.start = solution("straightforward (starting point)", "kernel.cu", std::string(embedded::kb_start_diag_matmul_cu),
                     plan({kernel("kb_diag_matmul", {"cdiv(N*M, 256)"}, {256}, {"A", "B", "output", "N", "M"})}),
                     "One thread per element.");
  p.eager_ms = 2.68;
  p.compile_ms = 2.69;
  p.inputs_note = kRandNote;
  p.cpu = [](const HostTensors& inputs, const DimValues& d, HostTensors& out) {
    const auto& A = in(inputs, "A");
    const auto& B = in(inputs, "B");
    const std::size_t n = sz(dim(d, "N")), m = sz(dim(d, "M"));
    auto& y = out["output"];
    y.resize(n * m);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j) y[i * m + j] = static_cast<float>(double(A[i]) * B[i * m + j]);
  };
  return p;
}

Level1Problem softmax_problem(bool log) {
  Level1Problem p;
  p.id = log ? 24 : 23;
  p.stem = log ? "24_LogSoftmax" : "23_Softmax";
  const char* op = log ? "torch.log_softmax(x, dim=1)" : "torch.softmax(x, dim=1)";
  p.summary = fmt::format("out = {} on x [4096, 393216]", op);
  p.pytorch = fmt::format("class Model(nn.Module):\n    def forward(self, x):\n        return {}\n\n"
                          "batch_size = 4096\ndim = 393216\nx = torch.rand(batch_size, dim)",
                          op);
  p.dims = {{"batch_size", 4096}, {"dim", 393216}};
  p.tests = {{"small", {{"batch_size", 3}, {"dim", 1000}}}, {"tiny", {{"batch_size", 2}, {"dim", 5}}}};
  p.tensors = {rand_input("x", {"batch_size", "dim"}), output({"batch_size", "dim"})};
  p.bytes = "8*batch_size*dim";
  p.reference = solution("reference", "ref_rows.cu", std::string(embedded::kb_ref_rows_cu),
                         plan({kernel("kb_ref_softmax", {"batch_size"}, {256}, {"x", "output", "dim", i32(log ? "1" : "0")})}),
                         "Trusted reference: one block per row, maximum and sum of exponentials in double.");
  p.start = solution("straightforward (starting point)", "kernel.cu",
                     with_define(fmt::format("#define LOG_OUTPUT {}", log ? 1 : 0), embedded::kb_start_softmax_cu),
                     plan({kernel("kb_softmax", {"batch_size"}, {256}, {"x", "output", "dim"})}),
                     "One block per row, three passes, FP32.");
  p.eager_ms = log ? 8.48 : 8.52;
  p.compile_ms = log ? 6.68 : 6.55;
  p.inputs_note = kRandNote;
  p.cpu = [log](const HostTensors& inputs, const DimValues& d, HostTensors& out) {
    const auto& x = in(inputs, "x");
    const std::size_t rows = sz(dim(d, "batch_size")), cols = sz(dim(d, "dim"));
    auto& y = out["output"];
    y.resize(rows * cols);
    for (std::size_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * cols;
      double m = *std::max_element(row, row + cols), s = 0;
      for (std::size_t j = 0; j < cols; ++j) s += std::exp(row[j] - m);
      for (std::size_t j = 0; j < cols; ++j)
        y[r * cols + j] = static_cast<float>(log ? (row[j] - m) - std::log(s) : std::exp(row[j] - m) / s);
    }
  };
  return p;
}

Level1Problem rms_norm() {
  Level1Problem p;
  p.id = 36;
  p.stem = "36_RMSNorm_";
  p.init_inputs = "[features]";
  p.summary = "out = x / sqrt(mean(x^2, dim=1) + 1e-5) on x [112, 64, 512, 512]";
  p.pytorch = "class Model(nn.Module):\n    def __init__(self, num_features, eps=1e-5): ...\n"
              "    def forward(self, x):\n        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)\n"
              "        return x / rms\n\nbatch_size = 112\nfeatures = 64\ndim1 = 512\ndim2 = 512\n"
              "x = torch.rand(batch_size, features, dim1, dim2)";
  p.dims = {{"batch_size", 112}, {"features", 64}, {"dim1", 512}, {"dim2", 512}};
  p.tests = {{"small", {{"batch_size", 2}, {"features", 5}, {"dim1", 3}, {"dim2", 7}}}};
  p.tensors = {rand_input("x", {"batch_size", "features", "dim1", "dim2"}),
               output({"batch_size", "features", "dim1", "dim2"})};
  p.bytes = "8*batch_size*features*dim1*dim2";
  p.reference = solution(
      "reference", "ref_axis.cu", std::string(embedded::kb_ref_axis_cu),
      plan({kernel("kb_ref_rms_norm", {strided_grid("batch_size*dim1*dim2")}, {256},
                   {"x", "output", "batch_size", "features", "dim1*dim2", f64("0.00001")})}),
      "Trusted reference: one thread per (batch, position), the mean of squares in double.");
  p.start = solution("straightforward (starting point)", "kernel.cu", std::string(embedded::kb_start_rms_norm_cu),
                     plan({kernel("kb_rms_norm", {"cdiv(batch_size*dim1*dim2, 256)"}, {256},
                                  {"x", "output", "batch_size", "features", "dim1*dim2", f32("0.00001")})}),
                     "One thread per (batch, position), FP32.");
  p.eager_ms = 14.2;
  p.compile_ms = 7.84;
  p.inputs_note = kRandNote;
  p.cpu = [](const HostTensors& inputs, const DimValues& d, HostTensors& out) {
    const auto& x = in(inputs, "x");
    const std::size_t b = sz(dim(d, "batch_size")), f = sz(dim(d, "features")),
                      inner = sz(dim(d, "dim1") * dim(d, "dim2"));
    auto& y = out["output"];
    y.resize(x.size());
    for (std::size_t o = 0; o < b; ++o)
      for (std::size_t i = 0; i < inner; ++i) {
        double q = 0;
        for (std::size_t k = 0; k < f; ++k) q += double(x[(o * f + k) * inner + i]) * x[(o * f + k) * inner + i];
        const double rms = std::sqrt(q / double(f) + 1e-5);
        for (std::size_t k = 0; k < f; ++k) y[(o * f + k) * inner + i] = static_cast<float>(x[(o * f + k) * inner + i] / rms);
      }
  };
  return p;
}

Level1Problem layer_norm() {
  Level1Problem p;
  p.id = 40;
  p.stem = "40_LayerNorm";
  p.init_inputs = "[(features, dim1, dim2)]";
  p.parameters = 2;
  p.summary = "out = nn.LayerNorm((64, 256, 256))(x) on x [16, 64, 256, 256]";
  p.pytorch = "class Model(nn.Module):\n    def __init__(self, normalized_shape):\n"
              "        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # eps 1e-5, weight 1, bias 0\n"
              "    def forward(self, x):\n        return self.ln(x)\n\n"
              "batch_size = 16\nfeatures = 64\ndim1 = 256\ndim2 = 256\n"
              "x = torch.rand(batch_size, features, dim1, dim2)\nnormalized_shape = (features, dim1, dim2)";
  p.dims = {{"batch_size", 16}, {"features", 64}, {"dim1", 256}, {"dim2", 256}};
  p.tests = {{"small", {{"batch_size", 2}, {"features", 3}, {"dim1", 5}, {"dim2", 7}}}};
  const std::vector<std::string> norm = {"features", "dim1", "dim2"};
  p.tensors = {rand_input("x", {"batch_size", "features", "dim1", "dim2"}),
               input("ln_weight", norm, dist(K::constant, "1", "0")), input("ln_bias", norm, dist(K::constant, "0", "0")),
               output({"batch_size", "features", "dim1", "dim2"})};
  p.bytes = "4*(2*batch_size*features*dim1*dim2 + 2*features*dim1*dim2)";
  const std::string row = "features*dim1*dim2";
  p.reference = solution(
      "reference", "ref_rows.cu", std::string(embedded::kb_ref_rows_cu),
      plan({kernel("kb_ref_row_stats", {"batch_size"}, {256}, {"x", "stats", Json(row), f64("0.00001")}),
            kernel("kb_ref_layer_norm_apply", {strided_grid("batch_size*" + row)}, {256},
                   {"x", "stats", "ln_weight", "ln_bias", "output", "batch_size", Json(row)})},
           {Json::obj({{"name", "stats"}, {"dtype", "f64"}, {"shape", Json(std::vector<Json>{"batch_size", "2"})}})}),
      "Trusted reference: mean and variance per row in double (two passes), then the affine normalisation.");
  p.start = solution(
      "straightforward (starting point)", "kernel.cu", std::string(embedded::kb_start_layer_norm_cu),
      plan({kernel("ln_stats", {"batch_size"}, {256}, {"x", "stats", Json(row), f32("0.00001")}),
            kernel("ln_apply", {Json("cdiv(batch_size*" + row + ", 256)")}, {256},
                   {"x", "stats", "ln_weight", "ln_bias", "output", "batch_size", Json(row)})},
           {Json::obj({{"name", "stats"}, {"dtype", "f32"}, {"shape", Json(std::vector<Json>{"batch_size", "2"})}})}),
      "One block per row for the statistics (FP32, two passes), one thread per element to normalise.");
  p.eager_ms = 8.12;
  p.compile_ms = 0.46;
  p.inputs_note = std::string(kRandNote) +
                  " ln_weight = 1 and ln_bias = 0, exactly as PyTorch initialises nn.LayerNorm (so these parameters "
                  "are the same as KernelBench's).";
  p.cpu = [](const HostTensors& inputs, const DimValues& d, HostTensors& out) {
    const auto& x = in(inputs, "x");
    const auto& w = in(inputs, "ln_weight");
    const auto& bias = in(inputs, "ln_bias");
    const std::size_t rows = sz(dim(d, "batch_size")), cols = w.size();
    auto& y = out["output"];
    y.resize(x.size());
    for (std::size_t r = 0; r < rows; ++r) {
      const float* v = x.data() + r * cols;
      double mean = 0, var = 0;
      for (std::size_t j = 0; j < cols; ++j) mean += v[j];
      mean /= double(cols);
      for (std::size_t j = 0; j < cols; ++j) var += (v[j] - mean) * (v[j] - mean);
      const double rstd = 1 / std::sqrt(var / double(cols) + 1e-5);
      for (std::size_t j = 0; j < cols; ++j) y[r * cols + j] = static_cast<float>((v[j] - mean) * rstd * w[j] + bias[j]);
    }
  };
  return p;
}

Level1Problem reduction(int op) {
  static const char* stems[] = {"47_Sum_reduction_over_a_dimension", "48_Mean_reduction_over_a_dimension",
                                "49_Max_reduction_over_a_dimension"};
  static const char* torch[] = {"torch.sum(x, dim=1, keepdim=True)", "torch.mean(x, dim=1)", "torch.max(x, dim=1)[0]"};
  Level1Problem p;
  p.id = 47 + op;
  p.stem = stems[op];
  p.init_inputs = "[1]";
  p.summary = fmt::format("out = {} on x [128, 4096, 4095]", torch[op]);
  p.pytorch = fmt::format("class Model(nn.Module):\n    def forward(self, x):\n        return {}\n\n"
                          "batch_size = 128\ndim1 = 4096\ndim2 = 4095\nx = torch.rand(batch_size, dim1, dim2)",
                          torch[op]);
  p.dims = {{"batch_size", 128}, {"dim1", 4096}, {"dim2", 4095}};
  p.tests = {{"small", {{"batch_size", 2}, {"dim1", 37}, {"dim2", 19}}}};
  p.tensors = {rand_input("x", {"batch_size", "dim1", "dim2"}),
               output(op == 0 ? std::vector<std::string>{"batch_size", "1", "dim2"}
                              : std::vector<std::string>{"batch_size", "dim2"})};
  p.bytes = "4*(batch_size*dim1*dim2 + batch_size*dim2)";
  p.reference = solution("reference", "ref_axis.cu", std::string(embedded::kb_ref_axis_cu),
                         plan({kernel("kb_ref_reduce_axis", {strided_grid("batch_size*dim2")}, {256},
                                      {"x", "output", "batch_size", "dim1", "dim2", i32(std::to_string(op))})}),
                         "Trusted reference: one thread per output, walking the axis in order, in double.");
  p.start = solution("straightforward (starting point)", "kernel.cu",
                     with_define(fmt::format("#define REDUCE_OP {}", op), embedded::kb_start_reduce_axis_cu),
                     plan({kernel("kb_reduce_axis", {"cdiv(batch_size*dim2, 256)"}, {256},
                                  {"x", "output", "batch_size", "dim1", "dim2"})}),
                     "One thread per output, FP32.");
  static const double eager[] = {3.11, 2.88, 3.14}, compiled[] = {3.38, 3.57, 3.53};
  p.eager_ms = eager[op];
  p.compile_ms = compiled[op];
  p.inputs_note = kRandNote;
  p.cpu = [op](const HostTensors& inputs, const DimValues& d, HostTensors& out) {
    const auto& x = in(inputs, "x");
    const std::size_t b = sz(dim(d, "batch_size")), len = sz(dim(d, "dim1")), inner = sz(dim(d, "dim2"));
    auto& y = out["output"];
    y.resize(b * inner);
    for (std::size_t o = 0; o < b; ++o)
      for (std::size_t i = 0; i < inner; ++i) {
        double acc = op == 2 ? x[o * len * inner + i] : 0.0;
        for (std::size_t k = 0; k < len; ++k) {
          const double v = x[(o * len + k) * inner + i];
          acc = op == 2 ? std::max(acc, v) : acc + v;
        }
        y[o * inner + i] = static_cast<float>(op == 1 ? acc / double(len) : acc);
      }
  };
  return p;
}

Level1Problem conv2d() {
  Level1Problem p;
  p.id = 63;
  p.stem = "63_conv_standard_2D__square_input__square_kernel";
  p.init_inputs = "[in_channels, out_channels, kernel_size]";
  p.parameters = 1;
  p.summary = "out = nn.Conv2d(16, 128, 3, bias=False)(x) on x [16, 16, 1024, 1024]";
  p.pytorch = "class Model(nn.Module):\n    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,\n"
              "                 dilation=1, groups=1, bias=False):\n"
              "        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size), stride=stride,\n"
              "                                padding=padding, dilation=dilation, groups=groups, bias=bias)\n"
              "    def forward(self, x):\n        return self.conv2d(x)\n\n"
              "batch_size = 16\nin_channels = 16\nout_channels = 128\nkernel_size = 3\nwidth = 1024\nheight = 1024\n"
              "x = torch.rand(batch_size, in_channels, height, width)\n"
              "init inputs: [in_channels, out_channels, kernel_size]";
  p.dims = {{"batch_size", 16}, {"in_channels", 16}, {"out_channels", 128},
            {"kernel_size", 3}, {"width", 1024},     {"height", 1024}};
  p.tests = {{"small",
              {{"batch_size", 2}, {"in_channels", 3}, {"out_channels", 4}, {"kernel_size", 3}, {"width", 9}, {"height", 7}}}};
  const std::string P = "(height-kernel_size+1)", Q = "(width-kernel_size+1)";
  p.tensors = {rand_input("x", {"batch_size", "in_channels", "height", "width"}),
               input("conv2d_weight", {"out_channels", "in_channels", "kernel_size", "kernel_size"},
                     dist(K::uniform, "-1/sqrt(in_channels*kernel_size*kernel_size)",
                          "1/sqrt(in_channels*kernel_size*kernel_size)")),
               output({"batch_size", "out_channels", P, Q})};
  const std::string outputs = fmt::format("batch_size*out_channels*{}*{}", P, Q);
  p.flops = fmt::format("2*{}*in_channels*kernel_size*kernel_size", outputs);
  p.bytes = fmt::format("4*(batch_size*in_channels*height*width + out_channels*in_channels*kernel_size*kernel_size + {})",
                        outputs);
  const std::vector<Json> args = {"x",           "conv2d_weight", "output", "batch_size",  "in_channels",
                                  "height",      "width",         "out_channels", "kernel_size", "kernel_size"};
  p.reference = solution("reference", "ref_conv2d.cu", std::string(embedded::kb_ref_conv2d_cu),
                         plan({kernel("kb_ref_conv2d", {strided_grid(outputs)}, {256}, args)}),
                         "Trusted reference: direct convolution, one thread per output, products summed in double.");
  p.start = solution("straightforward (starting point)", "kernel.cu", std::string(embedded::kb_start_conv2d_cu),
                     plan({kernel("kb_conv2d", {Json(fmt::format("cdiv({}, 256)", outputs))}, {256}, args)}),
                     "Direct convolution, one thread per output, FP32.");
  p.eager_ms = 7.11;
  p.compile_ms = 12.7;
  p.inputs_note = std::string(kRandNote) +
                  " conv2d_weight is uniform on (-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels * "
                  "kernel_size^2, the distribution of PyTorch's default kaiming_uniform_(a=sqrt(5)) initialisation, "
                  "but not its values. The reference is true FP32 (double accumulation); PyTorch on an H100 runs "
                  "this convolution in TF32 unless torch.backends.cudnn.allow_tf32 is False.";
  p.cpu = [](const HostTensors& inputs, const DimValues& d, HostTensors& out) {
    const auto& x = in(inputs, "x");
    const auto& w = in(inputs, "conv2d_weight");
    const std::size_t N = sz(dim(d, "batch_size")), C = sz(dim(d, "in_channels")), K = sz(dim(d, "out_channels")),
                      R = sz(dim(d, "kernel_size")), H = sz(dim(d, "height")), W = sz(dim(d, "width"));
    const std::size_t OH = H - R + 1, OW = W - R + 1;
    auto& y = out["output"];
    y.resize(N * K * OH * OW);
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t k = 0; k < K; ++k)
        for (std::size_t pp = 0; pp < OH; ++pp)
          for (std::size_t q = 0; q < OW; ++q) {
            double acc = 0;
            for (std::size_t c = 0; c < C; ++c)
              for (std::size_t r = 0; r < R; ++r)
                for (std::size_t s = 0; s < R; ++s)
                  acc += double(x[((n * C + c) * H + pp + r) * W + q + s]) * w[((k * C + c) * R + r) * R + s];
            y[((n * K + k) * OH + pp) * OW + q] = static_cast<float>(acc);
          }
  };
  return p;
}

Level1Problem cumsum() {
  Level1Problem p;
  p.id = 89;
  p.stem = "89_cumsum";
  p.init_inputs = "[1]";
  p.summary = "out = torch.cumsum(x, dim=1) on x [32768, 32768]";
  p.pytorch = "class Model(nn.Module):\n    def forward(self, x):\n        return torch.cumsum(x, dim=self.dim)  # dim = 1\n\n"
              "batch_size = 32768\ninput_shape = (32768,)  # its entries are the dimensions input_shape_0, ...\n"
              "x = torch.rand(batch_size, *input_shape)";
  p.dims = {{"batch_size", 32768}, {"input_shape_0", 32768}};
  p.tests = {{"small", {{"batch_size", 3}, {"input_shape_0", 1000}}}};
  p.tensors = {rand_input("x", {"batch_size", "input_shape_0"}), output({"batch_size", "input_shape_0"})};
  p.bytes = "8*batch_size*input_shape_0";
  p.reference = solution("reference", "ref_axis.cu", std::string(embedded::kb_ref_axis_cu),
                         plan({kernel("kb_ref_cumsum", {"cdiv(batch_size, 256)"}, {256},
                                      {"x", "output", "batch_size", "input_shape_0"})}),
                         "Trusted reference: one thread per row, a running sum in double.");
  p.start = solution("straightforward (starting point)", "kernel.cu", std::string(embedded::kb_start_cumsum_cu),
                     plan({kernel("kb_cumsum", {"cdiv(batch_size, 256)"}, {256},
                                  {"x", "output", "batch_size", "input_shape_0"})}),
                     "One thread per row, a running FP32 sum.");
  p.eager_ms = 4.68;
  p.compile_ms = 4.7;
  p.inputs_note = kRandNote;
  p.cpu = [](const HostTensors& inputs, const DimValues& d, HostTensors& out) {
    const auto& x = in(inputs, "x");
    const std::size_t rows = sz(dim(d, "batch_size")), len = sz(dim(d, "input_shape_0"));
    auto& y = out["output"];
    y.resize(rows * len);
    for (std::size_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (std::size_t k = 0; k < len; ++k) y[r * len + k] = static_cast<float>(acc += x[r * len + k]);
    }
  };
  return p;
}

std::vector<Level1Problem> build_problems() {
  std::vector<Level1Problem> out;
  const std::vector<Gemm> gemms = {
      {1, "1_Square_matrix_multiplication_", "torch.matmul(A, B)", {{"N", 4096}}, {{"N", 33}},
       {"N", "N"}, {"N", "N"}, {"N", "N"}, "N", "N", "N", "1", 2.66, 2.67},
      {2, "2_Standard_matrix_multiplication_", "torch.matmul(A, B)", {{"M", 2048}, {"K", 8192}, {"N", 4096}},
       {{"M", 37}, {"K", 45}, {"N", 29}}, {"M", "K"}, {"K", "N"}, {"M", "N"}, "M", "N", "K", "1", 2.61, 2.66},
      {3, "3_Batched_matrix_multiplication", "torch.bmm(A, B)",
       {{"batch_size", 128}, {"m", 512}, {"k", 1024}, {"n", 2048}},
       {{"batch_size", 3}, {"m", 17}, {"k", 33}, {"n", 20}}, {"batch_size", "m", "k"}, {"batch_size", "k", "n"},
       {"batch_size", "m", "n"}, "m", "n", "k", "batch_size", 5.33, 5.35},
      {4, "4_Matrix_vector_multiplication_", "torch.matmul(A, B)", {{"M", 2048}, {"K", 1048576}},
       {{"M", 19}, {"K", 1000}}, {"M", "K"}, {"K", "1"}, {"M", "1"}, "M", "1", "K", "1", 2.77, 2.79},
      {7, "7_Matmul_with_small_K_dimension_", "torch.matmul(A, B)", {{"M", 32768}, {"N", 32768}, {"K", 64}},
       {{"M", 40}, {"N", 33}, {"K", 64}}, {"M", "K"}, {"K", "N"}, {"M", "N"}, "M", "N", "K", "1", 4.06, 4.07},
      {8, "8_Matmul_with_irregular_shapes_", "torch.matmul(A, B)", {{"M", 8205}, {"K", 2949}, {"N", 5921}},
       {{"M", 31}, {"K", 29}, {"N", 23}}, {"M", "K"}, {"K", "N"}, {"M", "N"}, "M", "N", "K", "1", 6.38, 6.43},
      {9, "9_Tall_skinny_matrix_multiplication_", "torch.matmul(A, B)", {{"M", 32768}, {"N", 32}},
       {{"M", 50}, {"N", 32}}, {"M", "N"}, {"N", "M"}, {"M", "M"}, "M", "M", "N", "1", 2.59, 2.62},
  };
  for (const auto& g : gemms) out.push_back(gemm_problem(g));
  out.push_back(scalar_multiplication());
  out.push_back(diagonal_matmul());
  for (const auto& a : kActivations) out.push_back(activation_problem(a));
  out.push_back(softmax_problem(false));
  out.push_back(softmax_problem(true));
  out.push_back(rms_norm());
  out.push_back(layer_norm());
  for (int op = 0; op < 3; ++op) out.push_back(reduction(op));
  out.push_back(conv2d());
  out.push_back(cumsum());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (auto& p : out) {
    p.reference.task = p.start.task = level1_task_name(p);
    p.reference.finalize();
    p.start.finalize();
  }
  return out;
}

}  // namespace

const std::vector<Level1Problem>& level1_problems() {
  static const std::vector<Level1Problem> problems = build_problems();
  return problems;
}

const Level1Problem* find_level1_problem(std::string_view stem) {
  for (const auto& p : level1_problems())
    if (p.stem == stem) return &p;
  return nullptr;
}

std::string level1_task_name(const Level1Problem& p) { return "kernelbench/level1/" + p.stem; }

TaskSpec make_level1_spec(const Level1Problem& p) {
  TaskSpec spec;
  spec.name = level1_task_name(p);
  spec.description = fmt::format("KernelBench level 1 #{} (native, no Python): {}", p.id, p.summary);
  spec.languages = {Language::cuda};
  for (const auto& [k, v] : p.dims) spec.dims.push_back(k);
  spec.tensors = p.tensors;
  // Small correctness workloads first (libksearch's own), then KernelBench's
  // one shape, timed. KernelBench seeds its inputs from 42.
  std::uint64_t seed = 1;
  for (const auto& [name, dims] : p.tests) {
    WorkloadSpec w;
    w.name = name;
    w.dims = std::map<std::string, std::int64_t>(dims.begin(), dims.end());
    w.seed = seed++;
    spec.workloads.push_back(w);
  }
  WorkloadSpec bench;
  bench.name = "kernelbench";
  for (const auto& [k, v] : p.dims) bench.dims[k] = v;
  bench.seed = 42;
  bench.benchmark = true;
  spec.workloads.push_back(bench);
  // KernelBench HEAD (since #80): torch.allclose(ref, out, atol=1e-4, rtol=1e-4) in fp32.
  spec.tolerance.atol = 1e-4;
  spec.tolerance.rtol = 1e-4;
  spec.tolerance.rule = Tolerance::Rule::out_relative;
  spec.tolerance.nan_policy = Tolerance::NanPolicy::must_match;
  spec.flops = p.flops;
  spec.bytes = p.bytes;
  spec.references[Language::cuda] = p.reference;
  spec.starting_points.push_back(p.start);
  spec.targets = Json::obj(
      {{"metric", "mean latency per call of the PyTorch module, ms (KernelBench timing: CUDA events, L2 thrash)"},
       {"device", "NVIDIA H100 (Modal)"},
       {"eager_ms", p.eager_ms},
       {"torch_compile_ms", p.compile_ms},
       {"source", "KernelBench results/timing/H100_Modal baseline_time_torch.json and "
                  "baseline_time_torch_compile_inductor_default.json (423217d), fp32"}});
  spec.prompts[Language::cuda] = kernelbench_prompt(spec, p.pytorch, false, p.inputs_note);
  int inputs = 0;
  for (const auto& t : p.tensors) inputs += t.is_output ? 0 : 1;
  spec.python = kernelbench_python_convention(p.init_inputs, inputs - p.parameters, true);
  for (Language l : {Language::triton, Language::python}) {
    spec.languages.push_back(l);
    spec.prompts[l] = kernelbench_python_prompt(spec, p.pytorch, false, p.inputs_note, l);
  }
  return spec;
}

}  // namespace ks::tasks::kernelbench
