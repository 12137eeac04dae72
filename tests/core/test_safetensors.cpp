// The native .safetensors reader: a file written by the writer reads back;
// every malformed field gets an error naming it; only regular files, and
// only up to the size cap, are read.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include "core/elements.hpp"
#include "core/safetensors.hpp"
#include "ksearch/error.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
using namespace ks::core;

namespace {

std::vector<unsigned char> i32_bytes(const std::vector<std::int32_t>& v) {
  std::vector<unsigned char> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A file with a hand-written header and `data_bytes` bytes of data.
std::filesystem::path raw_file(const std::filesystem::path& dir, const std::string& name, const std::string& header,
                               std::size_t data_bytes, std::uint64_t claimed_len = ~0ULL) {
  std::string out;
  const std::uint64_t len = claimed_len == ~0ULL ? header.size() : claimed_len;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xFF));
  out += header;
  out.append(data_bytes, '\0');
  auto p = dir / name;
  util::write_file_atomic(p, out);
  return p;
}

}  // namespace

TEST_CASE("safetensors: what the writer writes reads back, with dtypes, shapes and bytes") {
  auto dir = test::scratch_dir("safetensors_good");
  std::vector<unsigned char> bf16(6 * 2);
  for (int i = 0; i < 6; ++i) {
    const std::uint16_t h = double_to_bf16(i * 0.5);
    std::memcpy(bf16.data() + 2 * i, &h, 2);
  }
  write_safetensors(dir / "w.safetensors", {{"kv_indptr", DType::i32, {4}, i32_bytes({0, 3, 5, 9})},
                                            {"x", DType::bf16, {2, 3}, bf16},
                                            {"flag", DType::boolean, {2}, {1, 0}},
                                            {"empty", DType::f8e4m3, {0}, {}}});
  auto f = SafetensorsFile::open(dir / "w.safetensors");
  REQUIRE(f.tensors().size() == 4);
  const auto& ip = f.at("kv_indptr");
  CHECK(ip.dtype == DType::i32);
  CHECK(ip.dtype_name == "I32");
  CHECK(ip.shape == std::vector<std::int64_t>{4});
  auto b = f.read(ip);
  REQUIRE(b.size() == 16);
  std::int32_t v[4];
  std::memcpy(v, b.data(), 16);
  CHECK(v[3] == 9);
  auto x = f.read(f.at("x"));
  CHECK(load_element(x.data(), DType::bf16, 5) == 2.5);
  CHECK(f.at("x").count() == 6);
  CHECK(f.read(f.at("flag"))[0] == 1);
  CHECK(f.read(f.at("empty")).empty());
  CHECK_THROWS_WITH_AS(f.at("kv_indices"), doctest::Contains("has no tensor \"kv_indices\" (it holds: "), Error);
  // A symbolic link to a regular file is followed (dataset caches use them).
  std::filesystem::create_symlink(dir / "w.safetensors", dir / "link.safetensors");
  CHECK(SafetensorsFile::open(dir / "link.safetensors").tensors().size() == 4);
  CHECK(safetensors_dtype("F8_E4M3") == DType::f8e4m3);
  CHECK_FALSE(safetensors_dtype("F8_E8M0").has_value());
}

TEST_CASE("safetensors: malformed files are refused with the field named") {
  auto dir = test::scratch_dir("safetensors_bad");
  auto fails = [&](const std::filesystem::path& p, const char* needle) {
    CAPTURE(p.filename().string());
    CHECK_THROWS_WITH_AS(SafetensorsFile::open(p), doctest::Contains(needle), Error);
  };
  const std::string ok_entry = R"("a": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]})";
  util::write_file_atomic(dir / "short", "abc");
  fails(dir / "short", "too short for the 8-byte header length");
  fails(raw_file(dir, "len_past_end", "{}", 0, 1000), "header length 1000 runs past the end of the file");
  fails(raw_file(dir, "len_huge", "{}", 0, 1ULL << 40), "above the limit");
  fails(raw_file(dir, "not_json", "{\"a\": ", 0), "header is not valid JSON");
  fails(raw_file(dir, "not_object", "[1, 2]", 0), "header must be a JSON object");
  fails(raw_file(dir, "entry_not_object", R"({"a": 3})", 0), "tensor \"a\": must be an object");
  fails(raw_file(dir, "no_dtype", R"({"a": {"shape": [2], "data_offsets": [0, 8]}})", 8), "tensor \"a\": \"dtype\" is missing");
  fails(raw_file(dir, "bad_dtype", R"({"a": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}})", 8),
        "tensor \"a\": \"dtype\" \"Q7\" is not supported");
  fails(raw_file(dir, "bad_shape", R"({"a": {"dtype": "I32", "shape": [-2], "data_offsets": [0, 8]}})", 8),
        "tensor \"a\": \"shape\"[0] is not a non-negative integer");
  fails(raw_file(dir, "no_shape", R"({"a": {"dtype": "I32", "data_offsets": [0, 8]}})", 8), "\"shape\" is missing");
  fails(raw_file(dir, "bad_offsets", R"({"a": {"dtype": "I32", "shape": [2], "data_offsets": [0]}})", 8),
        "\"data_offsets\" must be two non-negative integers");
  fails(raw_file(dir, "reversed", R"({"a": {"dtype": "I32", "shape": [2], "data_offsets": [8, 0]}})", 8),
        "end before they begin");
  fails(raw_file(dir, "size_mismatch", R"({"a": {"dtype": "I32", "shape": [3], "data_offsets": [0, 8]}})", 8),
        "hold 8 bytes, but 3 elements of I32 need 12");
  fails(raw_file(dir, "past_end", "{" + ok_entry + "}", 4), "run past the end of the data (4 bytes)");
  fails(raw_file(dir, "overlap",
                 "{" + ok_entry + R"(, "b": {"dtype": "I32", "shape": [1], "data_offsets": [4, 8]}})", 8),
        "overlap");
  fails(raw_file(dir, "extra_field", R"({"a": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8], "x": 1}})", 8),
        "unknown field \"x\"");
  fails(raw_file(dir, "bad_metadata", R"({"__metadata__": 4})", 0), "\"__metadata__\" must be an object");
  CHECK(SafetensorsFile::open(raw_file(dir, "metadata_ok", R"({"__metadata__": {"k": "v"}, )" + ok_entry + "}", 8))
            .tensors()
            .size() == 1);
  // Not regular files, and files above the cap.
  fails(dir, "not a regular file");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  fails(dir / "fifo", "not a regular file");
  CHECK_THROWS_WITH_AS(SafetensorsFile::open(raw_file(dir, "big", "{" + ok_entry + "}", 8), 16),
                       doctest::Contains("above the limit of 16 bytes"), Error);
  try {
    SafetensorsFile::open(dir / "missing.safetensors");
    FAIL("no error for a missing file");
  } catch (const Error& e) {
    CHECK(e.status() == Status::not_found);
  }
}
