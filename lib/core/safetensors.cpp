#include "core/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <fstream>

#include "ksearch/error.hpp"
#include "ksearch/json.hpp"
#include "util/fs.hpp"

namespace ks::core {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is read as stored");

struct Named {
  const char* name;
  DType dtype;
};
constexpr Named kDtypes[] = {{"F64", DType::f64},         {"F32", DType::f32},         {"F16", DType::f16},
                             {"BF16", DType::bf16},       {"F8_E4M3", DType::f8e4m3},  {"F8_E5M2", DType::f8e5m2},
                             {"I64", DType::i64},         {"I32", DType::i32},         {"I16", DType::i16},
                             {"I8", DType::i8},           {"U8", DType::u8},           {"BOOL", DType::boolean}};

}  // namespace

std::optional<DType> safetensors_dtype(std::string_view name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

const char* safetensors_dtype_name(DType t) {
  for (const auto& d : kDtypes)
    if (d.dtype == t) return d.name;
  return "?";
}

std::uint64_t SafetensorsTensor::count() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path, std::uint64_t max_file_bytes) {
  namespace fs = std::filesystem;
  auto bad = [&](const std::string& what) -> Error {
    return Error(Status::invalid_argument, fmt::format("safetensors file {}: {}", path.string(), what));
  };
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    throw Error(Status::not_found, fmt::format("safetensors file {} not found", path.string()));
  if (!fs::is_regular_file(st)) throw bad("not a regular file");
  const std::uint64_t size = fs::file_size(path, ec);
  if (ec) throw Error(Status::io, fmt::format("safetensors file {}: cannot read its size: {}", path.string(), ec.message()));
  if (size > max_file_bytes)
    throw bad(fmt::format("{} bytes is above the limit of {} bytes", size, max_file_bytes));
  if (size < 8) throw bad(fmt::format("{} bytes is too short for the 8-byte header length", size));

  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Status::io, fmt::format("safetensors file {}: cannot open it", path.string()));
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > kMaxHeaderBytes) throw bad(fmt::format("header length {} is above the limit of {} bytes", header_len, kMaxHeaderBytes));
  if (header_len > size - 8)
    throw bad(fmt::format("header length {} runs past the end of the file ({} bytes)", header_len, size));
  std::string header(static_cast<std::size_t>(header_len), '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) throw Error(Status::io, fmt::format("safetensors file {}: cannot read its header", path.string()));
  std::string err;
  auto j = Json::try_parse(header, &err);
  if (!j) throw bad("header is not valid JSON: " + err);
  if (!j->is_object()) throw bad(fmt::format("header must be a JSON object, found {}", json_type_name(j->type())));

  SafetensorsFile f;
  f.path_ = path;
  const std::uint64_t data_start = 8 + header_len, data_size = size - data_start;
  for (const auto& [name, v] : j->as_object()) {
    if (name == "__metadata__") {
      if (!v.is_object()) throw bad("\"__metadata__\" must be an object");
      continue;
    }
    auto tbad = [&](const std::string& what) { return bad(fmt::format("tensor \"{}\": {}", name, what)); };
    if (!v.is_object()) throw tbad(fmt::format("must be an object, found {}", json_type_name(v.type())));
    for (const auto& [k, x] : v.as_object())
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        throw tbad(fmt::format("unknown field \"{}\" (expected dtype, shape, data_offsets)", k));
    SafetensorsTensor t;
    t.name = name;
    const Json* dt = v.find("dtype");
    if (!dt || !dt->is_string()) throw tbad("\"dtype\" is missing or not a string");
    t.dtype_name = dt->as_string();
    auto d = safetensors_dtype(t.dtype_name);
    if (!d)
      throw tbad(fmt::format("\"dtype\" \"{}\" is not supported (supported: F64, F32, F16, BF16, F8_E4M3, F8_E5M2, "
                             "I64, I32, I16, I8, U8, BOOL)", t.dtype_name));
    t.dtype = *d;
    const Json* sh = v.find("shape");
    if (!sh || !sh->is_array()) throw tbad("\"shape\" is missing or not an array");
    std::uint64_t count = 1;
    for (std::size_t i = 0; i < sh->size(); ++i) {
      const Json& e = (*sh)[i];
      if (!e.is_int() || e.as_int() < 0) throw tbad(fmt::format("\"shape\"[{}] is not a non-negative integer", i));
      t.shape.push_back(e.as_int());
      if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(e.as_int()), &count))
        throw tbad("\"shape\" has more elements than 64 bits can count");
    }
    const Json* off = v.find("data_offsets");
    if (!off || !off->is_array() || off->size() != 2 || !(*off)[0].is_int() || !(*off)[1].is_int() ||
        (*off)[0].as_int() < 0 || (*off)[1].as_int() < 0)
      throw tbad("\"data_offsets\" must be two non-negative integers [begin, end]");
    const auto begin = static_cast<std::uint64_t>((*off)[0].as_int());
    const auto end = static_cast<std::uint64_t>((*off)[1].as_int());
    if (end < begin) throw tbad(fmt::format("\"data_offsets\" [{}, {}] end before they begin", begin, end));
    std::uint64_t need = 0;
    if (__builtin_mul_overflow(count, dtype_size(t.dtype), &need) || end - begin != need)
      throw tbad(fmt::format("\"data_offsets\" [{}, {}] hold {} bytes, but {} elements of {} need {}", begin, end,
                             end - begin, count, t.dtype_name, need));
    if (end > data_size)
      throw tbad(fmt::format("\"data_offsets\" [{}, {}] run past the end of the data ({} bytes)", begin, end,
                             data_size));
    t.offset = data_start + begin;
    t.bytes = need;
    f.tensors_.push_back(std::move(t));
  }
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& t : f.tensors_)
    if (t.bytes > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->offset < by_offset[i - 1]->offset + by_offset[i - 1]->bytes)
      throw bad(fmt::format("the data of tensors \"{}\" and \"{}\" overlap", by_offset[i - 1]->name, by_offset[i]->name));
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const SafetensorsTensor& SafetensorsFile::at(std::string_view name) const {
  if (const auto* t = find(name)) return *t;
  std::string names;
  for (const auto& t : tensors_) names += (names.empty() ? "" : ", ") + t.name;
  throw Error(Status::not_found, fmt::format("safetensors file {} has no tensor \"{}\" (it holds: {})", path_.string(),
                                             name, names.empty() ? "none" : names));
}

std::vector<unsigned char> SafetensorsFile::read(const SafetensorsTensor& t) const {
  std::vector<unsigned char> out(static_cast<std::size_t>(t.bytes));
  if (out.empty()) return out;
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(t.offset));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!in)
    throw Error(Status::io, fmt::format("safetensors file {}: cannot read the data of tensor \"{}\" (did the file "
                                        "change since it was opened?)", path_.string(), t.name));
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsWrite>& tensors) {
  Json header = Json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    Json shape = Json::array();
    std::uint64_t count = 1;
    for (auto d : t.shape) {
      shape.push_back(d);
      count *= static_cast<std::uint64_t>(d);
    }
    if (t.data.size() != count * dtype_size(t.dtype))
      throw Error(Status::invalid_argument,
                  fmt::format("write_safetensors: tensor \"{}\" has {} bytes of data for {} elements of {}", t.name,
                              t.data.size(), count, to_string(t.dtype)));
    header[t.name] = Json::obj({{"dtype", safetensors_dtype_name(t.dtype)},
                                {"shape", shape},
                                {"data_offsets", Json::arr({static_cast<std::int64_t>(offset),
                                                            static_cast<std::int64_t>(offset + t.data.size())})}});
    offset += t.data.size();
  }
  std::string h = header.dump();
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((static_cast<std::uint64_t>(h.size()) >> (8 * i)) & 0xFF));
  out += h;
  for (const auto& t : tensors) out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  util::write_file_atomic(path, out);
}

}  // namespace ks::core
