// A small native reader (and writer, for fixtures) of the .safetensors format
// that FlashInfer-Trace workloads use for inputs such as kv_indptr:
//
//   8 bytes   little-endian u64 N, the header's length
//   N bytes   JSON object: name -> {"dtype": "I32", "shape": [4], "data_offsets": [begin, end]},
//             plus an optional "__metadata__" object
//   rest      the tensors' bytes, little-endian, offsets relative to the end of the header
//
// Every malformed field is a ks::Error(Status::invalid_argument) naming the
// file, the tensor and the field. Only regular files are read (a symbolic
// link to one is followed), and only up to a size cap.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/types.hpp"

namespace ks::core {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;            // as in the file: "I32", "BF16", ...
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;          // of the first byte, from the start of the file
  std::uint64_t bytes = 0;
  std::uint64_t count() const;       // elements
};

class SafetensorsFile {
 public:
  static constexpr std::uint64_t kDefaultMaxFileBytes = std::uint64_t{16} << 30;
  static constexpr std::uint64_t kMaxHeaderBytes = std::uint64_t{100} << 20;

  // Reads and checks the header. Throws ks::Error: Status::not_found for a
  // missing file, Status::io when it cannot be read, Status::invalid_argument
  // for anything malformed, a file that is not regular or one above the cap.
  static SafetensorsFile open(const std::filesystem::path& path,
                              std::uint64_t max_file_bytes = kDefaultMaxFileBytes);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  // Throws ks::Error(Status::not_found) listing the tensors the file holds.
  const SafetensorsTensor& at(std::string_view name) const;
  // The tensor's bytes (little-endian, as stored).
  std::vector<unsigned char> read(const SafetensorsTensor& t) const;

 private:
  std::filesystem::path path_;
  std::vector<SafetensorsTensor> tensors_;
};

// "I32" -> DType::i32 (F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U8, BOOL).
std::optional<DType> safetensors_dtype(std::string_view name);
const char* safetensors_dtype_name(DType t);

// Writes a file in the format (tensors laid out in the order given).
struct SafetensorsWrite {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> data;   // little-endian, count * dtype_size bytes
};
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsWrite>& tensors);

}  // namespace ks::core
