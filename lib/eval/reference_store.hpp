// Reference outputs, computed once per (task, workload, input seed,
// reference build, device) and reused by every candidate (architecture
// decision 4). Entries live in device memory up to a budget; once it is full,
// new entries are not admitted (an evaluation visits workloads in the same
// cycle every time, and LRU over a cycle longer than the cache hits nothing,
// while keeping the first entries hits a stable share). An entry also goes to
// a file under the cache folder when recomputing it would cost more than
// reading it back (or it is small), so a fresh worker after a crash reloads
// references instead of running them again; large references that a GPU
// recomputes in milliseconds are not written (gigabytes of file traffic
// would cost seconds).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "eval/backend.hpp"

namespace ks::eval {

// How many bytes of reference outputs to keep on a device. A GPU's memory is
// there for this work: 60 % of it (TriMul's 25 workloads x 3 input seeds need
// about 45 GB; a candidate that runs short of memory gets it back, see
// release_memory). Host RAM is shared with everything else: an eighth, at
// most 4 GiB.
std::size_t reference_budget(const DeviceInfo& info);

class ReferenceStore {
 public:
  // `dir` empty: memory only.
  ReferenceStore(Device& device, std::filesystem::path dir, std::size_t budget_bytes);
  ~ReferenceStore();
  ReferenceStore(const ReferenceStore&) = delete;
  ReferenceStore& operator=(const ReferenceStore&) = delete;

  // Copies the stored outputs for `key` into `dst` (one buffer per output,
  // sizes must match). False when nothing valid is stored.
  bool fetch(const std::string& key, const std::vector<Buffer>& dst);
  // Stores copies of `src` under `key`; `compute_s` is what producing them
  // took, which decides whether a file copy is worth writing.
  void store(const std::string& key, const std::vector<Buffer>& src, double compute_s);

  // Frees every copy held on the device (files stay); for a candidate that
  // needs the memory. Returns the bytes freed.
  std::size_t release_memory();

  // Bytes per second assumed for reading a reference file back, and the size
  // up to which a file copy is always written.
  static constexpr double kFileBytesPerSecond = 1e9;
  static constexpr std::size_t kAlwaysFileBytes = std::size_t{256} << 20;

  struct Counters {
    int memory_hits = 0;
    int file_hits = 0;
    int misses = 0;
  };
  const Counters& counters() const { return counters_; }

 private:
  struct Entry {
    std::vector<Buffer> buffers;
    std::size_t bytes = 0;
  };
  void keep_in_memory(const std::string& key, const std::vector<Buffer>& src);
  std::filesystem::path file_for(const std::string& key) const;

  Device& device_;
  std::filesystem::path dir_;
  std::size_t budget_;
  std::size_t used_ = 0;
  std::map<std::string, Entry> entries_;
  Counters counters_;
};

}  // namespace ks::eval
