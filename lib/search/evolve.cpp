#include "search/evolve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "ksearch/error.hpp"
#include "util/json_fields.hpp"

namespace ks::core {

Json EvolveMember::to_json() const {
  return Json::obj({{"solution_id", solution_id},
                    {"score", score},
                    {"latency_ms", latency_ms},
                    {"born", born},
                    {"origin", origin},
                    {"cell", cell}});
}

bool evolve_better(const EvolveMember& a, const EvolveMember& b) {
  if (a.score != b.score) return a.score > b.score;
  return a.solution_id < b.solution_id;
}

namespace {

struct Technique {
  const char* tag;
  std::vector<const char*> marks;
};

// Substrings that say which technique a kernel uses; cheap and the same
// for the same code, which is all a feature dimension needs.
const std::vector<Technique>& techniques() {
  static const std::vector<Technique> t = {
      {"shared", {"__shared__", "extern __shared__"}},
      {"tensor_cores", {"wmma::", "mma.sync", "wgmma", "tcgen05", "__hmma", "mma_sync"}},
      {"vector", {"float4", "float2", "half2", "__nv_bfloat162", "int4", "ld.global.v", "__m256", "__m512", "__m128"}},
      {"async_copy", {"cp.async", "memcpy_async", "cuda::pipeline", "cp.async.bulk"}},
      {"warp_shuffle", {"__shfl", "__reduce_", "cooperative_groups"}},
      {"atomics", {"atomicAdd", "atomicMax", "atomicCAS", "std::atomic", "tl.atomic"}},
      {"unroll", {"#pragma unroll", "#pragma GCC unroll", "tl.static_range"}},
      {"simd", {"#pragma omp simd", "immintrin.h", "arm_neon.h", "__builtin_shufflevector", "vector_size("}},
      {"threads", {"std::thread", "#pragma omp parallel", "std::async", "std::jthread"}},
      {"triton_dot", {"tl.dot("}},
      {"autotune", {"triton.autotune", "@autotune"}},
  };
  return t;
}

const EvolveMember* find_member(const std::vector<EvolveMember>& v, const std::string& id) {
  for (const auto& m : v)
    if (m.solution_id == id) return &m;
  return nullptr;
}

}  // namespace

std::string evolve_cell(const Solution& s) {
  std::string code;
  for (const auto& f : s.sources) code += f.content + "\n";
  std::string tags;
  for (const auto& t : techniques()) {
    bool used = false;
    for (const char* m : t.marks) used = used || code.find(m) != std::string::npos;
    if (used) tags += (tags.empty() ? "" : "+") + std::string(t.tag);
  }
  if (tags.empty()) tags = "plain";
  int bucket = 0;
  for (std::size_t limit = 1024; code.size() >= limit && bucket < 5; limit *= 2) ++bucket;
  return fmt::format("{}/{}", tags, bucket);
}

double evolve_uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::size_t evolve_index(std::mt19937_64& rng, std::size_t n) {
  return n == 0 ? 0 : static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(n));
}

EvolvePopulation::EvolvePopulation(EvolveParams params)
    : params_(params), islands_(static_cast<std::size_t>(std::max(1, params.islands))) {}

std::vector<EvolveMember> EvolvePopulation::archive() const { return archive_; }

bool EvolvePopulation::add_to_island(int island, const EvolveMember& m, std::string* dropped) {
  auto& isl = islands_.at(static_cast<std::size_t>(island));
  if (find_member(isl, m.solution_id)) return false;
  isl.insert(std::upper_bound(isl.begin(), isl.end(), m, evolve_better), m);
  if (static_cast<int>(isl.size()) > params_.island_size) {
    std::string worst = isl.back().solution_id;
    isl.pop_back();
    if (worst == m.solution_id) return false;
    if (dropped) *dropped = worst;
  }
  return true;
}

EvolveAdded EvolvePopulation::add(int island, const EvolveMember& m) {
  if (island < 0 || island >= static_cast<int>(islands_.size()))
    throw Error(Status::internal, fmt::format("evolve: no island {}", island));
  EvolveAdded out;
  out.island_added = add_to_island(island, m, &out.island_dropped);
  auto same_cell = std::find_if(archive_.begin(), archive_.end(),
                                [&](const EvolveMember& e) { return e.cell == m.cell; });
  if (same_cell != archive_.end()) {
    if (same_cell->solution_id == m.solution_id) {
      out.archive = "already";
    } else if (evolve_better(m, *same_cell) && m.score > same_cell->score) {
      out.archive = "replaced";
      out.archive_replaced = same_cell->solution_id;
      archive_.erase(same_cell);
    } else {
      out.archive = "kept";
    }
  } else if (static_cast<int>(archive_.size()) < params_.archive_size) {
    out.archive = "new_cell";
  } else if (evolve_better(m, archive_.back())) {
    out.archive = "evicted";
    out.archive_replaced = archive_.back().solution_id;
    archive_.pop_back();
  } else {
    out.archive = "rejected";
  }
  if (out.archive == "new_cell" || out.archive == "replaced" || out.archive == "evicted")
    archive_.insert(std::upper_bound(archive_.begin(), archive_.end(), m, evolve_better), m);
  return out;
}

EvolveChoice EvolvePopulation::choose(int island, std::mt19937_64& rng) const {
  EvolveChoice c;
  c.island = island;
  const auto& isl = islands_.at(static_cast<std::size_t>(island));
  if (isl.empty()) {
    c.mode = "empty";
  } else if (evolve_uniform(rng) < params_.exploit_ratio) {
    c.mode = "exploit";
    c.parent = isl.front();
  } else {
    c.mode = "explore";
    c.parent = isl[evolve_index(rng, isl.size())];
  }
  // The pool: the island's other kernels and the archive's elites, best first.
  std::vector<EvolveMember> pool;
  auto offer = [&](const EvolveMember& m) {
    if (c.parent && m.solution_id == c.parent->solution_id) return;
    if (find_member(pool, m.solution_id)) return;
    pool.push_back(m);
  };
  for (const auto& m : isl) offer(m);
  for (const auto& m : archive_) offer(m);
  std::sort(pool.begin(), pool.end(), evolve_better);
  const std::size_t want = std::min(pool.size(), static_cast<std::size_t>(std::max(0, params_.inspirations)));
  if (want == 0) return c;
  // The best of them (exploitation), then random ones (diversity).
  c.inspirations.push_back(pool.front());
  pool.erase(pool.begin());
  while (c.inspirations.size() < want) {
    std::size_t i = evolve_index(rng, pool.size());
    c.inspirations.push_back(pool[i]);
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return c;
}

std::vector<EvolveMigration> EvolvePopulation::migrate() {
  std::vector<EvolveMigration> moves;
  const int n = static_cast<int>(islands_.size());
  if (n < 2 || params_.migration_size < 1) return moves;
  const auto before = islands_;
  for (int i = 0; i < n; ++i) {
    const int to = (i + 1) % n;
    const auto& from = before[static_cast<std::size_t>(i)];
    const std::size_t k = std::min(from.size(), static_cast<std::size_t>(params_.migration_size));
    for (std::size_t j = 0; j < k; ++j) {
      if (add_to_island(to, from[j], nullptr)) moves.push_back({i, to, from[j].solution_id, from[j].score});
    }
  }
  return moves;
}

Json EvolvePopulation::to_json() const {
  Json islands = Json::array();
  for (std::size_t i = 0; i < islands_.size(); ++i) {
    Json members = Json::array();
    for (const auto& m : islands_[i]) members.push_back(m.to_json());
    islands.push_back(Json::obj({{"island", static_cast<std::int64_t>(i)}, {"members", members}}));
  }
  Json archive = Json::array();
  for (const auto& m : archive_) archive.push_back(m.to_json());
  return Json::obj({{"islands", islands}, {"archive", archive}});
}

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error(Status::invalid_argument, fmt::format("{}: {}", where, what));
}

EvolveMember member_from_json(const Json& j, const EvolveParams& p, const std::string& where) {
  if (!j.is_object()) bad(where, "must be an object");
  util::FieldReader r(j, where);
  r.allow({"solution_id", "score", "latency_ms", "born", "origin", "cell"});
  EvolveMember m;
  m.solution_id = r.required_string("solution_id");
  if (m.solution_id.empty() || m.solution_id.size() > 128 ||
      !std::all_of(m.solution_id.begin(), m.solution_id.end(),
                   [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); }))
    bad(where, fmt::format("solution_id must be a solution id (lower-case hex), is \"{}\"", m.solution_id));
  m.score = r.required_number("score");
  if (!(std::isfinite(m.score) && m.score > 0)) bad(where, fmt::format("score must be a number > 0, is {}", m.score));
  m.latency_ms = r.required_number("latency_ms");
  if (!(std::isfinite(m.latency_ms) && m.latency_ms >= 0))
    bad(where, fmt::format("latency_ms must be a number >= 0, is {}", m.latency_ms));
  const std::int64_t born = r.required_int("born");
  if (born < 0 || born > 100000000) bad(where, fmt::format("born must be a generation >= 0, is {}", born));
  m.born = static_cast<int>(born);
  const std::int64_t origin = r.required_int("origin");
  if (origin < 0 || origin >= p.islands)
    bad(where, fmt::format("origin must be an island between 0 and {}, is {}", p.islands - 1, origin));
  m.origin = static_cast<int>(origin);
  m.cell = r.required_string("cell");
  if (m.cell.empty() || m.cell.size() > 256) bad(where, "cell must be a feature cell of 1 to 256 characters");
  return m;
}

}  // namespace

EvolvePopulation EvolvePopulation::from_json(const Json& j, const EvolveParams& params, const std::string& what) {
  if (!j.is_object()) bad(what, "the population must be an object");
  EvolvePopulation pop(params);
  const Json* islands = j.find("islands");
  if (!islands || !islands->is_array()) bad(what, "\"islands\" must be an array");
  if (static_cast<int>(islands->size()) != params.islands)
    bad(what, fmt::format("\"islands\" holds {} islands, and the run has {}", islands->size(), params.islands));
  for (std::size_t i = 0; i < islands->size(); ++i) {
    const std::string where = fmt::format("{}: islands[{}]", what, i);
    const Json& ij = (*islands)[i];
    if (!ij.is_object()) bad(where, "must be an object");
    util::FieldReader r(ij, where);
    r.allow({"island", "members"});
    if (r.required_int("island") != static_cast<std::int64_t>(i))
      bad(where, fmt::format("\"island\" must be {}, its position", i));
    const auto& members = r.required_array("members");
    if (static_cast<int>(members.size()) > params.island_size)
      bad(where, fmt::format("holds {} kernels, more than evolve_island_size ({})", members.size(), params.island_size));
    auto& isl = pop.islands_[i];
    for (std::size_t k = 0; k < members.size(); ++k) {
      EvolveMember m = member_from_json(members[k], params, fmt::format("{}.members[{}]", where, k));
      if (find_member(isl, m.solution_id))
        bad(where, fmt::format("holds the kernel {} twice", m.solution_id));
      if (!isl.empty() && !evolve_better(isl.back(), m))
        bad(where, fmt::format("members[{}] is out of order (best first)", k));
      isl.push_back(std::move(m));
    }
  }
  const Json* archive = j.find("archive");
  if (!archive || !archive->is_array()) bad(what, "\"archive\" must be an array");
  if (static_cast<int>(archive->size()) > params.archive_size)
    bad(what, fmt::format("\"archive\" holds {} kernels, more than evolve_archive_size ({})", archive->size(),
                          params.archive_size));
  std::set<std::string> cells;
  for (std::size_t k = 0; k < archive->size(); ++k) {
    const std::string where = fmt::format("{}: archive[{}]", what, k);
    EvolveMember m = member_from_json((*archive)[k], params, where);
    if (!cells.insert(m.cell).second) bad(where, fmt::format("a second elite of the cell \"{}\"", m.cell));
    if (!pop.archive_.empty() && !evolve_better(pop.archive_.back(), m)) bad(where, "out of order (best first)");
    pop.archive_.push_back(std::move(m));
  }
  return pop;
}

std::string json_first_difference(const Json& a, const Json& b, const std::string& path) {
  const std::string here = path.empty() ? "(the whole state)" : path;
  if (a.type() != b.type() || (!a.is_array() && !a.is_object())) {
    if (a == b) return "";
    return fmt::format("{}: {} vs {}", here, a.dump(), b.dump());
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return fmt::format("{}: {} vs {} elements", here, a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string d = json_first_difference(a[i], b[i], fmt::format("{}[{}]", path, i));
      if (!d.empty()) return d;
    }
    return "";
  }
  for (const auto& [k, v] : a.as_object()) {
    const Json* w = b.find(k);
    const std::string sub = path.empty() ? k : path + "." + k;
    if (!w) return fmt::format("{}: only in the first", sub);
    std::string d = json_first_difference(v, *w, sub);
    if (!d.empty()) return d;
  }
  for (const auto& [k, v] : b.as_object())
    if (!a.find(k)) return fmt::format("{}: only in the second", path.empty() ? k : path + "." + k);
  return "";
}

}  // namespace ks::core
