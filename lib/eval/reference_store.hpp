// Reference outputs, computed once per (task, workload, input seed,
// reference build, device) and reused by every candidate (architecture
// decision 4). Entries live in device memory up to a budget (least recently
// used go first) and always in a file under the cache folder, so a fresh
// worker after a crash reloads them instead of running the reference again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "eval/backend.hpp"

namespace ks::eval {

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
  // Stores copies of `src` under `key`.
  void store(const std::string& key, const std::vector<Buffer>& src);

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
    std::list<std::string>::iterator lru;
  };
  void keep_in_memory(const std::string& key, const std::vector<Buffer>& src);
  void evict_until_fits(std::size_t incoming);
  std::filesystem::path file_for(const std::string& key) const;

  Device& device_;
  std::filesystem::path dir_;
  std::size_t budget_;
  std::size_t used_ = 0;
  std::map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // front = most recently used
  Counters counters_;
};

}  // namespace ks::eval
