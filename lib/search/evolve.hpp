// The evolve strategy's population (docs/search.md, "Evolve"), kept apart
// from the strategy so it can be tested on its own: islands of passing
// kernels with ring migration of their elites, and an elite archive that
// keeps the best kernel of each feature cell (the kernel's approach, read
// from its code, and its code size), as OpenEvolve's and ShinkaEvolve's
// program databases do. Everything here is deterministic: ties are broken
// by solution id, and randomness comes from the generator passed in.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ksearch/json.hpp"
#include "ksearch/strategy.hpp"
#include "ksearch/types.hpp"

namespace ks::core {

// The strategy's knobs are SearchConfig::evolve's (ksearch/strategy.hpp).
using EvolveParams = EvolveOptions;

// A passing kernel in the population.
struct EvolveMember {
  std::string solution_id;
  double score = 0;       // EvalResult::score: higher is better, > 0
  double latency_ms = 0;
  int born = 0;           // the generation that produced it
  int origin = 0;         // the island it was written on
  std::string cell;       // its archive cell (evolve_cell)

  Json to_json() const;
};

// Better first: a higher score, then the smaller solution id.
bool evolve_better(const EvolveMember& a, const EvolveMember& b);

// The feature cell of a kernel: the techniques its code uses ("shared",
// "tensor_cores", "vector", "async_copy", "warp_shuffle", "atomics",
// "unroll", "simd", "threads", "triton_dot", "autotune"; "plain" when none)
// joined by '+', then '/', then its size bucket: 0 under 1 KiB of source,
// then one more per doubling, at most 5 ("shared+vector/2").
std::string evolve_cell(const Solution& s);

// What one sample of a generation asks for.
struct EvolveChoice {
  int island = 0;
  // "exploit" (the island's best is the parent), "explore" (a random member
  // of the island), "empty" (the island has no passing kernel yet).
  std::string mode;
  std::optional<EvolveMember> parent;
  std::vector<EvolveMember> inspirations;
};

struct EvolveMigration {
  int from = 0;
  int to = 0;
  std::string solution_id;
  double score = 0;
};

// What adding a kernel did.
struct EvolveAdded {
  bool island_added = false;     // false: already on the island, or the island is full of better ones
  std::string island_dropped;    // the kernel that made room ("" when none)
  // The archive: "new_cell", "replaced" (a worse elite of the cell),
  // "evicted" (the worst elite of another cell, the archive being full),
  // "kept" (the cell's elite is at least as good), "rejected" (full, and
  // worse than every elite), "already" (it is the cell's elite).
  std::string archive;
  std::string archive_replaced;  // the elite it replaced or evicted
};

class EvolvePopulation {
 public:
  explicit EvolvePopulation(EvolveParams params);

  const EvolveParams& params() const { return params_; }
  // Each island best first.
  const std::vector<std::vector<EvolveMember>>& islands() const { return islands_; }
  // The archive best first.
  std::vector<EvolveMember> archive() const;

  // Adds a passing kernel written on `island` to that island and offers it
  // to the archive.
  EvolveAdded add(int island, const EvolveMember& m);
  // Chooses a parent on `island` (exploit or explore) and the inspirations:
  // the best of the other kernels on the island and in the archive, then
  // random ones of them.
  EvolveChoice choose(int island, std::mt19937_64& rng) const;
  // Ring migration: each island sends copies of its best migration_size
  // kernels (as they were before this migration) to the next island.
  // Returns the copies that were taken in.
  std::vector<EvolveMigration> migrate();

  // {"islands": [{"island", "members": [...]}], "archive": [...]}.
  Json to_json() const;
  // Reads to_json's form back, checking everything (a run folder is
  // untrusted input): throws ks::Error(invalid_argument) naming `what` and
  // the field that is wrong.
  static EvolvePopulation from_json(const Json& j, const EvolveParams& params, const std::string& what);

 private:
  bool add_to_island(int island, const EvolveMember& m, std::string* dropped);

  EvolveParams params_;
  std::vector<std::vector<EvolveMember>> islands_;
  std::vector<EvolveMember> archive_;  // best first, one per cell
};

// A double in [0, 1) and an index below n from the generator, the same on
// every platform (the standard distributions are not).
double evolve_uniform(std::mt19937_64& rng);
std::size_t evolve_index(std::mt19937_64& rng, std::size_t n);

// The first place two JSON values differ ("islands[0].members[1].solution_id:
// \"ab\" vs \"cd\""), or "" when they are equal.
std::string json_first_difference(const Json& a, const Json& b, const std::string& path = "");

}  // namespace ks::core
