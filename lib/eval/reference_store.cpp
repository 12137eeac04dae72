#include "eval/reference_store.hpp"


#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ksearch/error.hpp"
#include "ksearch/json.hpp"
#include "util/fs.hpp"

namespace ks::eval {
namespace {

// File layout: "KSREF1\n", one JSON line {"key", "sizes"}, then the raw bytes
// of each output in order.
constexpr std::string_view kMagic = "KSREF1\n";

}  // namespace

std::size_t reference_budget(const DeviceInfo& info) {
  if (info.backend == "cuda" && info.memory_bytes > 0) return static_cast<std::size_t>(info.memory_bytes / 10 * 6);
  std::int64_t eighth = info.memory_bytes > 0 ? info.memory_bytes / 8 : (1ll << 30);
  return static_cast<std::size_t>(std::min<std::int64_t>(eighth, 4ll << 30));
}

ReferenceStore::ReferenceStore(Device& device, std::filesystem::path dir, std::size_t budget_bytes)
    : device_(device), dir_(std::move(dir)), budget_(budget_bytes) {}

ReferenceStore::~ReferenceStore() {
  for (auto& [key, e] : entries_)
    for (auto& b : e.buffers) device_.free(b);
}

std::filesystem::path ReferenceStore::file_for(const std::string& key) const {
  return dir_ / (key + ".ref");
}

bool ReferenceStore::fetch(const std::string& key, const std::vector<Buffer>& dst) {
  if (auto it = entries_.find(key); it != entries_.end()) {
    Entry& e = it->second;
    bool sizes_match = e.buffers.size() == dst.size();
    for (std::size_t i = 0; sizes_match && i < dst.size(); ++i) sizes_match = e.buffers[i].bytes == dst[i].bytes;
    if (sizes_match) {
      for (std::size_t i = 0; i < dst.size(); ++i) device_.copy(dst[i], e.buffers[i], dst[i].bytes);
      ++counters_.memory_hits;
      return true;
    }
  }
  if (!dir_.empty()) {
    std::error_code ec;
    auto path = file_for(key);
    if (std::filesystem::exists(path, ec)) {
      std::string data;
      try {
        data = util::read_file(path);
      } catch (const Error&) {
        data.clear();
      }
      // Anything unexpected (a torn or foreign file) is a miss, never an error:
      // the reference is simply computed again and the file rewritten.
      if (data.compare(0, kMagic.size(), kMagic) == 0) {
        auto nl = data.find('\n', kMagic.size());
        auto header = nl == std::string::npos ? std::nullopt
                                              : Json::try_parse(std::string_view(data).substr(kMagic.size(), nl - kMagic.size()));
        if (header && header->is_object() && header->get_string("key") == key) {
          const Json* sizes = header->find("sizes");
          std::size_t offset = nl + 1, total = 0;
          bool ok = sizes && sizes->is_array() && sizes->size() == dst.size();
          for (std::size_t i = 0; ok && i < dst.size(); ++i) {
            ok = (*sizes)[i].is_int() && static_cast<std::size_t>((*sizes)[i].as_int()) == dst[i].bytes;
            total += dst[i].bytes;
          }
          ok = ok && data.size() == offset + total;
          if (ok) {
            for (const auto& b : dst) {
              device_.upload(b, data.data() + offset, b.bytes);
              offset += b.bytes;
            }
            keep_in_memory(key, dst);
            ++counters_.file_hits;
            return true;
          }
        }
      }
    }
  }
  ++counters_.misses;
  return false;
}

void ReferenceStore::store(const std::string& key, const std::vector<Buffer>& src, double compute_s) {
  keep_in_memory(key, src);
  if (dir_.empty()) return;
  std::size_t total = 0;
  Json sizes = Json::array();
  for (const auto& b : src) {
    sizes.push_back(static_cast<std::int64_t>(b.bytes));
    total += b.bytes;
  }
  // Writing and later reading gigabytes takes seconds; a reference that runs
  // in milliseconds is cheaper to recompute after a worker restart.
  if (total > kAlwaysFileBytes && compute_s < static_cast<double>(total) / kFileBytesPerSecond) return;
  std::string data(kMagic);
  data += Json::obj({{"key", key}, {"sizes", sizes}}).dump();
  data += '\n';
  std::size_t offset = data.size();
  data.resize(offset + total);
  for (const auto& b : src) {
    device_.download(data.data() + offset, b, b.bytes);
    offset += b.bytes;
  }
  try {
    util::write_file_atomic(file_for(key), data);
  } catch (const Error&) {
    // A full or read-only cache only costs recomputation later.
  }
}

std::size_t ReferenceStore::release_memory() {
  std::size_t freed = used_;
  for (auto& [key, e] : entries_)
    for (auto& b : e.buffers) device_.free(b);
  entries_.clear();
  used_ = 0;
  return freed;
}

void ReferenceStore::keep_in_memory(const std::string& key, const std::vector<Buffer>& src) {
  std::size_t bytes = 0;
  for (const auto& b : src) bytes += b.bytes;
  if (entries_.count(key) || used_ + bytes > budget_) return;
  Entry e;
  e.bytes = bytes;
  try {
    for (const auto& b : src) {
      Buffer copy = device_.alloc(b.bytes);
      e.buffers.push_back(copy);
      device_.copy(copy, b, b.bytes);
    }
  } catch (const RunError&) {
    for (auto& b : e.buffers) device_.free(b);
    return;  // no room on the device: the file still serves
  }
  used_ += bytes;
  entries_.emplace(key, std::move(e));
}

}  // namespace ks::eval
