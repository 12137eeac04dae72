// CPU references of the flashinfer suite: plain loops in double precision,
// for small workloads. They are independent of the CUDA references (no code
// shared), so agreement between the two checks both.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "core/elements.hpp"
#include "ksearch/error.hpp"
#include "tasks/flashinfer/flashinfer.hpp"

namespace ks::tasks::flashinfer {
namespace {

using core::HostTensor;

[[noreturn]] void bad(std::string_view definition, const std::string& what) {
  throw Error(Status::invalid_argument, fmt::format("{} CPU reference: {}", definition, what));
}

double bf(std::uint16_t h) { return core::bf16_to_float(h); }

HostTensor& tensor(std::string_view definition, std::map<std::string, HostTensor>& t, const char* name, DType dtype) {
  auto it = t.find(name);
  if (it == t.end()) bad(definition, fmt::format("no tensor \"{}\"", name));
  if (!it->second.spec || it->second.spec->dtype != dtype)
    bad(definition, fmt::format("tensor \"{}\" is not {}", name, to_string(dtype)));
  return it->second;
}

std::int64_t extent(const HostTensor& t, std::size_t i) { return t.shape.at(i); }

// Checks kv_indptr: starts at 0, monotone, within the page table.
void check_indptr(std::string_view definition, const std::int32_t* indptr, std::int64_t n, std::int64_t entries) {
  if (indptr[0] != 0) bad(definition, "kv_indptr must start at 0");
  for (std::int64_t i = 0; i < n; ++i)
    if (indptr[i + 1] < indptr[i]) bad(definition, "kv_indptr must not decrease");
  if (indptr[n] > entries) bad(definition, "kv_indptr ends past kv_indices");
}

}  // namespace

void gqa_decode_cpu(const PagedDecodeGqa& p, std::uint16_t* output, float* lse) {
  const std::int64_t group = p.num_qo_heads / p.num_kv_heads, D = p.head_dim;
  for (std::int64_t b = 0; b < p.batch_size; ++b) {
    const std::int32_t begin = p.kv_indptr[b], end = p.kv_indptr[b + 1];
    for (std::int64_t h = 0; h < p.num_qo_heads; ++h) {
      const std::int64_t kvh = h / group;
      const std::uint16_t* qh = p.q + (b * p.num_qo_heads + h) * D;
      std::vector<double> logits;
      for (std::int32_t j = begin; j < end; ++j) {
        const std::uint16_t* k = p.k_cache + (static_cast<std::int64_t>(p.kv_indices[j]) * p.num_kv_heads + kvh) * D;
        double dot = 0;
        for (std::int64_t d = 0; d < D; ++d) dot += bf(qh[d]) * bf(k[d]);
        logits.push_back(dot * static_cast<double>(p.sm_scale));
      }
      std::uint16_t* out = output + (b * p.num_qo_heads + h) * D;
      if (logits.empty()) {
        for (std::int64_t d = 0; d < D; ++d) out[d] = 0;
        lse[b * p.num_qo_heads + h] = -std::numeric_limits<float>::infinity();
        continue;
      }
      double m = logits[0];
      for (double l : logits) m = std::max(m, l);
      double s = 0;
      for (double l : logits) s += std::exp(l - m);
      std::vector<double> acc(static_cast<std::size_t>(D), 0.0);
      for (std::size_t t = 0; t < logits.size(); ++t) {
        const double w = std::exp(logits[t] - m) / s;
        const std::uint16_t* v =
            p.v_cache + (static_cast<std::int64_t>(p.kv_indices[begin + static_cast<std::int32_t>(t)]) * p.num_kv_heads + kvh) * D;
        for (std::int64_t d = 0; d < D; ++d) acc[static_cast<std::size_t>(d)] += w * bf(v[d]);
      }
      for (std::int64_t d = 0; d < D; ++d) out[d] = core::double_to_bf16(acc[static_cast<std::size_t>(d)]);
      lse[b * p.num_qo_heads + h] = static_cast<float>((m + std::log(s)) / std::log(2.0));
    }
  }
}

void mla_paged_cpu(const PagedMla& p, std::uint16_t* output, float* lse) {
  const std::int64_t H = p.num_qo_heads, C = p.head_dim_ckv, K = p.head_dim_kpe;
  for (std::int64_t b = 0; b < p.num_requests; ++b) {
    const std::int32_t kv_begin = p.kv_indptr[b], kv_len = p.kv_indptr[b + 1] - kv_begin;
    const std::int64_t q_begin = p.qo_indptr ? p.qo_indptr[b] : b;
    const std::int64_t q_len = p.qo_indptr ? p.qo_indptr[b + 1] - p.qo_indptr[b] : 1;
    for (std::int64_t i = 0; i < q_len; ++i) {
      const std::int64_t qi = q_begin + i;
      // Entries this query may attend: all, or up to its causal position.
      const std::int64_t visible = p.causal ? std::min<std::int64_t>(kv_len, kv_len - q_len + i + 1) : kv_len;
      for (std::int64_t h = 0; h < H; ++h) {
        const std::uint16_t* qn = p.q_nope + (qi * H + h) * C;
        const std::uint16_t* qp = p.q_pe + (qi * H + h) * K;
        std::uint16_t* out = output + (qi * H + h) * C;
        std::vector<double> logits;
        for (std::int64_t j = 0; j < visible; ++j) {
          const std::int64_t row = p.kv_indices[kv_begin + j];
          double dot = 0;
          for (std::int64_t d = 0; d < C; ++d) dot += bf(qn[d]) * bf(p.ckv_cache[row * C + d]);
          for (std::int64_t d = 0; d < K; ++d) dot += bf(qp[d]) * bf(p.kpe_cache[row * K + d]);
          logits.push_back(dot * static_cast<double>(p.sm_scale));
        }
        if (logits.empty()) {
          for (std::int64_t d = 0; d < C; ++d) out[d] = 0;
          lse[qi * H + h] = -std::numeric_limits<float>::infinity();
          continue;
        }
        double m = logits[0];
        for (double l : logits) m = std::max(m, l);
        double s = 0;
        for (double l : logits) s += std::exp(l - m);
        std::vector<double> acc(static_cast<std::size_t>(C), 0.0);
        for (std::size_t j = 0; j < logits.size(); ++j) {
          const double w = std::exp(logits[j] - m) / s;
          const std::int64_t row = p.kv_indices[kv_begin + static_cast<std::int64_t>(j)];
          for (std::int64_t d = 0; d < C; ++d) acc[static_cast<std::size_t>(d)] += w * bf(p.ckv_cache[row * C + d]);
        }
        for (std::int64_t d = 0; d < C; ++d) out[d] = core::double_to_bf16(acc[static_cast<std::size_t>(d)]);
        lse[qi * H + h] = static_cast<float>((m + std::log(s)) / std::log(2.0));
      }
    }
  }
}

void moe_route_cpu(const float* logits, const std::uint16_t* bias, std::int64_t num_experts, std::int64_t n_group,
                   std::int64_t topk_group, std::int64_t top_k, float routed_scaling_factor, std::int32_t* ids,
                   float* weights) {
  const std::int64_t per_group = num_experts / n_group;
  std::vector<float> s(static_cast<std::size_t>(num_experts)), sb(s.size());
  for (std::int64_t e = 0; e < num_experts; ++e) {
    s[static_cast<std::size_t>(e)] = 1.f / (1.f + std::exp(-logits[e]));
    sb[static_cast<std::size_t>(e)] = s[static_cast<std::size_t>(e)] + core::bf16_to_float(bias[e]);
  }
  // Group scores: the two largest sb of each group.
  std::vector<float> gscore(static_cast<std::size_t>(n_group));
  for (std::int64_t g = 0; g < n_group; ++g) {
    std::vector<float> v(sb.begin() + g * per_group, sb.begin() + (g + 1) * per_group);
    std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
    gscore[static_cast<std::size_t>(g)] = v[0] + v[1];
  }
  // The best groups, then the best experts among them; ties to the lower index.
  auto better = [](const std::vector<float>& v, std::int64_t a, std::int64_t b) {
    return v[static_cast<std::size_t>(a)] > v[static_cast<std::size_t>(b)] ||
           (v[static_cast<std::size_t>(a)] == v[static_cast<std::size_t>(b)] && a < b);
  };
  std::vector<std::int64_t> groups(static_cast<std::size_t>(n_group));
  for (std::int64_t g = 0; g < n_group; ++g) groups[static_cast<std::size_t>(g)] = g;
  std::sort(groups.begin(), groups.end(), [&](std::int64_t a, std::int64_t b) { return better(gscore, a, b); });
  std::vector<std::int64_t> cands;
  for (std::int64_t k = 0; k < topk_group; ++k)
    for (std::int64_t e = 0; e < per_group; ++e) cands.push_back(groups[static_cast<std::size_t>(k)] * per_group + e);
  std::sort(cands.begin(), cands.end(), [&](std::int64_t a, std::int64_t b) { return better(sb, a, b); });
  float sum = 0.f;
  for (std::int64_t k = 0; k < top_k; ++k) sum += s[static_cast<std::size_t>(cands[static_cast<std::size_t>(k)])];
  for (std::int64_t k = 0; k < top_k; ++k) {
    const std::int64_t e = cands[static_cast<std::size_t>(k)];
    ids[k] = static_cast<std::int32_t>(e);
    weights[k] = s[static_cast<std::size_t>(e)] / (sum + 1e-20f) * routed_scaling_factor;
  }
}

void moe_fp8_cpu(const MoeFp8& p, std::uint16_t* output) {
  const std::int64_t H = p.hidden, I = p.inter, B = p.block, E = p.num_experts;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(p.top_k));
  std::vector<float> w(static_cast<std::size_t>(p.top_k));
  std::vector<double> a(static_cast<std::size_t>(H)), c(static_cast<std::size_t>(I)), out(static_cast<std::size_t>(H));
  for (std::int64_t t = 0; t < p.seq_len; ++t) {
    moe_route_cpu(p.routing_logits + t * E, p.routing_bias, E, p.n_group, p.topk_group, p.top_k,
                  p.routed_scaling_factor, ids.data(), w.data());
    for (std::int64_t k = 0; k < H; ++k)
      a[static_cast<std::size_t>(k)] = static_cast<double>(core::f8e4m3_to_float(p.hidden_states[t * H + k])) *
                                       p.hidden_states_scale[(k / B) * p.seq_len + t];
    std::fill(out.begin(), out.end(), 0.0);
    for (std::int64_t slot = 0; slot < p.top_k; ++slot) {
      const std::int64_t le = ids[static_cast<std::size_t>(slot)] - p.local_expert_offset;
      if (le < 0 || le >= p.num_local_experts) continue;
      const std::uint8_t* w1 = p.gemm1_weights + le * 2 * I * H;
      const float* s1 = p.gemm1_weights_scale + le * (2 * I / B) * (H / B);
      for (std::int64_t i = 0; i < I; ++i) {
        double x1 = 0, x2 = 0;
        for (std::int64_t k = 0; k < H; ++k) {
          x1 += a[static_cast<std::size_t>(k)] * core::f8e4m3_to_float(w1[i * H + k]) * s1[(i / B) * (H / B) + k / B];
          x2 += a[static_cast<std::size_t>(k)] * core::f8e4m3_to_float(w1[(I + i) * H + k]) *
                s1[((I + i) / B) * (H / B) + k / B];
        }
        c[static_cast<std::size_t>(i)] = x2 / (1 + std::exp(-x2)) * x1;
      }
      const std::uint8_t* w2 = p.gemm2_weights + le * H * I;
      const float* s2 = p.gemm2_weights_scale + le * (H / B) * (I / B);
      for (std::int64_t h = 0; h < H; ++h) {
        double o = 0;
        for (std::int64_t i = 0; i < I; ++i)
          o += c[static_cast<std::size_t>(i)] * core::f8e4m3_to_float(w2[h * I + i]) * s2[(h / B) * (I / B) + i / B];
        out[static_cast<std::size_t>(h)] += static_cast<double>(w[static_cast<std::size_t>(slot)]) * o;
      }
    }
    for (std::int64_t h = 0; h < H; ++h) output[t * H + h] = core::double_to_bf16(out[static_cast<std::size_t>(h)]);
  }
}

void cpu_reference(std::string_view definition, std::map<std::string, HostTensor>& t) {
  std::string_view name = definition;
  if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
  if (name == kGqaDecode) {
    auto& q = tensor(name, t, "q", DType::bf16);
    auto& k = tensor(name, t, "k_cache", DType::bf16);
    auto& v = tensor(name, t, "v_cache", DType::bf16);
    auto& indptr = tensor(name, t, "kv_indptr", DType::i32);
    auto& indices = tensor(name, t, "kv_indices", DType::i32);
    auto& out = tensor(name, t, "output", DType::bf16);
    auto& lse = tensor(name, t, "lse", DType::f32);
    PagedDecodeGqa p;
    p.batch_size = extent(q, 0);
    p.num_qo_heads = extent(q, 1);
    p.head_dim = extent(q, 2);
    p.num_kv_heads = extent(k, 2);
    if (extent(k, 1) != 1) bad(name, "page_size must be 1");
    if (static_cast<std::int64_t>(indptr.count()) != p.batch_size + 1) bad(name, "kv_indptr must have batch_size + 1 entries");
    check_indptr(name, indptr.as<std::int32_t>(), p.batch_size, static_cast<std::int64_t>(indices.count()));
    for (std::size_t i = 0; i < indices.count(); ++i)
      if (indices.as<std::int32_t>()[i] < 0 || indices.as<std::int32_t>()[i] >= extent(k, 0))
        bad(name, fmt::format("kv_indices[{}] = {} is not a page", i, indices.as<std::int32_t>()[i]));
    p.q = q.as<std::uint16_t>();
    p.k_cache = k.as<std::uint16_t>();
    p.v_cache = v.as<std::uint16_t>();
    p.kv_indptr = indptr.as<std::int32_t>();
    p.kv_indices = indices.as<std::int32_t>();
    p.sm_scale = static_cast<float>(t.at("sm_scale").scalar);
    gqa_decode_cpu(p, out.as<std::uint16_t>(), lse.as<float>());
    return;
  }
  if (name == kMlaDecode || name == kMlaPrefill) {
    const bool prefill = name == kMlaPrefill;
    auto& qn = tensor(name, t, "q_nope", DType::bf16);
    auto& qp = tensor(name, t, "q_pe", DType::bf16);
    auto& ckv = tensor(name, t, "ckv_cache", DType::bf16);
    auto& kpe = tensor(name, t, "kpe_cache", DType::bf16);
    auto& indptr = tensor(name, t, "kv_indptr", DType::i32);
    auto& indices = tensor(name, t, "kv_indices", DType::i32);
    auto& out = tensor(name, t, "output", DType::bf16);
    auto& lse = tensor(name, t, "lse", DType::f32);
    PagedMla p;
    p.num_requests = static_cast<std::int64_t>(indptr.count()) - 1;
    p.num_qo_heads = extent(qn, 1);
    p.head_dim_ckv = extent(qn, 2);
    p.head_dim_kpe = extent(qp, 2);
    if (extent(ckv, 1) != 1) bad(name, "page_size must be 1");
    if (p.num_requests < 0) bad(name, "kv_indptr is empty");
    check_indptr(name, indptr.as<std::int32_t>(), p.num_requests, static_cast<std::int64_t>(indices.count()));
    for (std::size_t i = 0; i < indices.count(); ++i)
      if (indices.as<std::int32_t>()[i] < 0 || indices.as<std::int32_t>()[i] >= extent(ckv, 0))
        bad(name, fmt::format("kv_indices[{}] = {} is not a page", i, indices.as<std::int32_t>()[i]));
    if (prefill) {
      auto& qo = tensor(name, t, "qo_indptr", DType::i32);
      if (qo.count() != indptr.count()) bad(name, "qo_indptr and kv_indptr must have the same length");
      check_indptr(name, qo.as<std::int32_t>(), p.num_requests, extent(qn, 0));
      p.qo_indptr = qo.as<std::int32_t>();
      p.causal = true;
    } else if (extent(qn, 0) != p.num_requests) {
      bad(name, "kv_indptr must have batch_size + 1 entries");
    }
    p.q_nope = qn.as<std::uint16_t>();
    p.q_pe = qp.as<std::uint16_t>();
    p.ckv_cache = ckv.as<std::uint16_t>();
    p.kpe_cache = kpe.as<std::uint16_t>();
    p.kv_indptr = indptr.as<std::int32_t>();
    p.kv_indices = indices.as<std::int32_t>();
    p.sm_scale = static_cast<float>(t.at("sm_scale").scalar);
    mla_paged_cpu(p, out.as<std::uint16_t>(), lse.as<float>());
    return;
  }
  if (name == kMoe) {
    auto& logits = tensor(name, t, "routing_logits", DType::f32);
    auto& bias = tensor(name, t, "routing_bias", DType::bf16);
    auto& hs = tensor(name, t, "hidden_states", DType::f8e4m3);
    auto& hss = tensor(name, t, "hidden_states_scale", DType::f32);
    auto& w1 = tensor(name, t, "gemm1_weights", DType::f8e4m3);
    auto& w1s = tensor(name, t, "gemm1_weights_scale", DType::f32);
    auto& w2 = tensor(name, t, "gemm2_weights", DType::f8e4m3);
    auto& w2s = tensor(name, t, "gemm2_weights_scale", DType::f32);
    auto& out = tensor(name, t, "output", DType::bf16);
    MoeFp8 p;
    p.seq_len = extent(hs, 0);
    p.hidden = extent(hs, 1);
    p.num_experts = extent(logits, 1);
    p.num_local_experts = extent(w1, 0);
    p.inter = extent(w2, 2);
    if (extent(w1, 1) != 2 * p.inter || extent(w1, 2) != p.hidden) bad(name, "gemm1_weights must be [local, 2 * inter, hidden]");
    if (p.hidden % p.block || p.inter % p.block) bad(name, "hidden and intermediate sizes must be multiples of 128");
    p.routing_logits = logits.as<float>();
    p.routing_bias = bias.as<std::uint16_t>();
    p.hidden_states = hs.as<std::uint8_t>();
    p.hidden_states_scale = hss.as<float>();
    p.gemm1_weights = w1.as<std::uint8_t>();
    p.gemm1_weights_scale = w1s.as<float>();
    p.gemm2_weights = w2.as<std::uint8_t>();
    p.gemm2_weights_scale = w2s.as<float>();
    p.local_expert_offset = static_cast<std::int64_t>(t.at("local_expert_offset").scalar);
    p.routed_scaling_factor = static_cast<float>(t.at("routed_scaling_factor").scalar);
    moe_fp8_cpu(p, out.as<std::uint16_t>());
    return;
  }
  bad(definition, "no CPU reference for this definition");
}

}  // namespace ks::tasks::flashinfer
