// SHA-256 (FIPS 180-4), for content-addressed ids and caches.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ks::util {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  void update(const void* data, std::size_t size);
  std::array<std::uint8_t, 32> digest();  // finishes the hash; call once
  std::string hex_digest();               // lowercase hex of digest()

 private:
  void block(const std::uint8_t* p);
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buf_{};
  std::size_t buf_len_ = 0;
  std::uint64_t total_ = 0;
};

// Hex SHA-256 of a string.
std::string sha256_hex(std::string_view data);

}  // namespace ks::util
