#include "core/inputs.hpp"

#include <math.h>  // ks_rng.h calls math functions unqualified

#include <fmt/format.h>

#include "core/elements.hpp"
#include "core/rng/ks_rng.h"
#include "core/rng/rng_stream.hpp"
#include "core/rng/structured.hpp"
#include "core/safetensors.hpp"
#include "ksearch/error.hpp"

namespace ks::core {

const Distribution& distribution_of(const TensorSpec& t, const WorkloadSpec& w) {
  auto it = w.dist_overrides.find(t.name);
  return it != w.dist_overrides.end() ? it->second : t.dist;
}

double scalar_value(const TensorSpec& t, const WorkloadSpec& w) {
  const Distribution& d = distribution_of(t, w);
  const util::Vars dims(w.dims.begin(), w.dims.end());
  double p0 = 0, p1 = 0;
  try {
    p0 = util::eval_double_expr(d.p0, dims);
    p1 = util::eval_double_expr(d.p1, dims);
  } catch (const Error& e) {
    throw Error(Status::invalid_argument,
                fmt::format("workload \"{}\": scalar \"{}\": {}", w.name, t.name, e.what()));
  }
  if (d.structured())
    throw Error(Status::invalid_argument, fmt::format("workload \"{}\": scalar \"{}\" cannot use the structured "
                                                      "distribution \"{}\"", w.name, t.name, to_string(d.kind)));
  const double v = ks_rng_value(static_cast<int>(d.kind), p0, p1, w.seed, rng_stream_of(t.name), 0);
  unsigned char buf[8] = {};
  store_element(buf, t.dtype, 0, v);
  return load_element(buf, t.dtype, 0);
}

std::map<std::string, double> scalar_values(const TaskSpec& task, const WorkloadSpec& w) {
  std::map<std::string, double> out;
  for (const auto& t : task.tensors)
    if (t.scalar) out[t.name] = scalar_value(t, w);
  return out;
}

std::vector<std::int64_t> tensor_shape(const TensorSpec& t, const util::Vars& dims) {
  std::vector<std::int64_t> shape;
  for (const auto& e : t.shape) shape.push_back(util::eval_int_expr(e, dims));
  return shape;
}

std::size_t element_count(const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::vector<unsigned char> input_data_bytes(const TensorSpec& t, const WorkloadSpec& w,
                                            const std::vector<std::int64_t>& shape,
                                            const std::filesystem::path& base_dir) {
  auto it = w.data.find(t.name);
  if (it == w.data.end())
    throw Error(Status::invalid_argument, fmt::format("workload \"{}\" gives no data for \"{}\"", w.name, t.name));
  const InputData& d = it->second;
  const std::size_t count = element_count(shape);
  const std::string where = fmt::format("workload \"{}\", input \"{}\"", w.name, t.name);
  if (!d.from_file()) {
    if (d.values.size() != count)
      throw Error(Status::invalid_argument, fmt::format("{}: {} values given, the tensor's shape {} has {} elements",
                                                        where, d.values.size(), shape_text(shape), count));
    std::vector<unsigned char> out(count * dtype_size(t.dtype));
    for (std::size_t i = 0; i < count; ++i) store_element(out.data(), t.dtype, i, d.values[i]);
    return out;
  }
  std::filesystem::path p = d.file;
  if (p.is_relative() && !base_dir.empty()) p = base_dir / p;
  try {
    const SafetensorsFile f = SafetensorsFile::open(p);
    const SafetensorsTensor& st = f.at(d.key);
    if (st.dtype != t.dtype)
      throw Error(Status::invalid_argument,
                  fmt::format("tensor \"{}\" has dtype {} but the task's input is {}", d.key, st.dtype_name,
                              to_string(t.dtype)));
    if (st.shape != shape)
      throw Error(Status::invalid_argument, fmt::format("tensor \"{}\" has shape {} but the workload needs {}", d.key,
                                                        shape_text(st.shape), shape_text(shape)));
    return f.read(st);
  } catch (const Error& e) {
    throw Error(e.status() == Status::not_found ? Status::invalid_argument : e.status(),
                fmt::format("{}: {}", where, e.what()));
  }
}

void generate_values(void* data, DType dtype, std::size_t count, Distribution::Kind kind, double p0, double p1,
                     std::uint64_t seed, std::uint64_t stream) {
  if (kind == Distribution::Kind::indptr || kind == Distribution::Kind::permutation) {
    const auto values = generate_structured(kind, count, p0, p1, seed, stream);
    for (std::size_t i = 0; i < count; ++i) store_element(data, dtype, i, static_cast<double>(values[i]));
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    store_element(data, dtype, i, ks_rng_value(static_cast<int>(kind), p0, p1, seed, stream, i));
}

double HostTensor::at(std::size_t i) const {
  if (spec && spec->scalar) return scalar;
  return load_element(bytes.data(), spec->dtype, i);
}

std::map<std::string, HostTensor> generate_host_inputs(const TaskSpec& task, const WorkloadSpec& w,
                                                       std::uint64_t seed_index) {
  std::map<std::string, HostTensor> out;
  const util::Vars dims(w.dims.begin(), w.dims.end());
  const std::uint64_t seed = ks_rng_derive_seed(w.seed, seed_index);
  for (const auto& t : task.tensors) {
    HostTensor h;
    h.spec = &t;
    if (t.scalar) {
      h.scalar = scalar_value(t, w);
      out[t.name] = std::move(h);
      continue;
    }
    h.shape = tensor_shape(t, dims);
    const std::size_t count = element_count(h.shape);
    if (!t.is_output && w.data.count(t.name)) {
      h.bytes = input_data_bytes(t, w, h.shape, task.base_dir);
    } else {
      h.bytes.assign(count * dtype_size(t.dtype), 0);
      if (!t.is_output) {
        const Distribution& d = distribution_of(t, w);
        generate_values(h.bytes.data(), t.dtype, count, d.kind, util::eval_double_expr(d.p0, dims),
                        util::eval_double_expr(d.p1, dims), seed, rng_stream_of(t.name));
      }
    }
    out[t.name] = std::move(h);
  }
  return out;
}

}  // namespace ks::core
