// Tensors another process holds (a reference oracle): their JSON form, the
// seeds that carry them, and the default way a device reads one (a file).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "eval/backend.hpp"
#include "eval/messages.hpp"
#include "ksearch/error.hpp"

namespace ks::eval {

Json ExternalTensor::to_json() const {
  Json j = Json::obj({{"handover", handover}, {"offset", static_cast<std::int64_t>(offset)},
                      {"bytes", static_cast<std::int64_t>(bytes)}});
  if (!handle.empty()) j["handle"] = handle;
  if (!path.empty()) j["path"] = path;
  return j;
}

ExternalTensor ExternalTensor::from_json(const Json& j) {
  ExternalTensor t;
  t.handover = j.get_string("handover");
  t.handle = j.get_string("handle");
  t.path = j.get_string("path");
  t.offset = static_cast<std::uint64_t>(j.get_int("offset"));
  t.bytes = static_cast<std::uint64_t>(j.get_int("bytes"));
  if (t.handover != "cuda_ipc" && t.handover != "file")
    throw Error(Status::invalid_argument,
                fmt::format("external tensor: handover \"{}\" is not cuda_ipc or file", t.handover));
  return t;
}

Json OracleSeed::to_json() const {
  Json in = Json::array(), out = Json::array();
  for (const auto& t : inputs) in.push_back(t.to_json());
  for (const auto& t : outputs) out.push_back(t.to_json());
  return Json::obj({{"seed", static_cast<std::int64_t>(seed)},
                    {"index", index},
                    {"trial_seed", static_cast<std::int64_t>(trial_seed)},
                    {"inputs", in},
                    {"outputs", out}});
}

OracleSeed OracleSeed::from_json(const Json& j) {
  OracleSeed s;
  s.seed = static_cast<std::uint64_t>(j.get_int("seed"));
  s.index = static_cast<int>(j.get_int("index"));
  s.trial_seed = static_cast<std::uint64_t>(j.get_int("trial_seed"));
  for (const auto& t : j.at("inputs").as_array()) s.inputs.push_back(ExternalTensor::from_json(t));
  for (const auto& t : j.at("outputs").as_array()) s.outputs.push_back(ExternalTensor::from_json(t));
  return s;
}

Buffer Device::open_external(const ExternalTensor& t) {
  if (t.handover != "file")
    throw RunError(Failure{EvalStatus::runtime_error,
                              fmt::format("this device cannot open a \"{}\" tensor of a reference oracle", t.handover)});
  auto fail = [&](const std::string& why) {
    return RunError(Failure{EvalStatus::runtime_error,
                               fmt::format("cannot read the reference oracle's data from {}: {}", t.path, why)});
  };
  int fd = ::open(t.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail(std::strerror(errno));
  Buffer b;
  try {
    b = alloc(t.bytes);
    std::vector<char> chunk(std::min<std::uint64_t>(t.bytes, 64u << 20));
    std::uint64_t done = 0;
    while (done < t.bytes) {
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), t.bytes - done));
      ssize_t n = ::pread(fd, chunk.data(), want, static_cast<off_t>(t.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw fail(n == 0 ? "the file is shorter than expected" : std::strerror(errno));
      upload(Buffer{b.addr + done, static_cast<std::size_t>(n)}, chunk.data(), static_cast<std::size_t>(n));
      done += static_cast<std::uint64_t>(n);
    }
  } catch (...) {
    ::close(fd);
    if (b) free(b);
    throw;
  }
  ::close(fd);
  return b;
}

void Device::release_external(Buffer b, const ExternalTensor& t) {
  (void)t;
  free(b);
}

}  // namespace ks::eval
