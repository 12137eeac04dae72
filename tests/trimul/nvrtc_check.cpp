#include "nvrtc_check.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstddef>
#include <mutex>

namespace ks::test {
namespace {

// The subset of nvrtc.h used here; the ABI is stable across CUDA releases.
using nvrtcProgram = void*;
struct Nvrtc {
  void* lib = nullptr;
  std::string why;
  int (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(nvrtcProgram, int, const char* const*) = nullptr;
  int (*log_size)(nvrtcProgram, std::size_t*) = nullptr;
  int (*log)(nvrtcProgram, char*) = nullptr;
  int (*ptx_size)(nvrtcProgram, std::size_t*) = nullptr;
  int (*ptx)(nvrtcProgram, char*) = nullptr;
  int (*cubin_size)(nvrtcProgram, std::size_t*) = nullptr;
  int (*destroy)(nvrtcProgram*) = nullptr;
};

const Nvrtc& nvrtc() {
  static Nvrtc n;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* path : {"libnvrtc.so", "libnvrtc.so.13", KS_TEST_CUDA_ROOT "/lib64/libnvrtc.so",
                             KS_TEST_CUDA_ROOT "/lib64/libnvrtc.so.13"}) {
      n.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (n.lib) break;
    }
    if (!n.lib) {
      n.why = "libnvrtc not found (looked in the loader path and " KS_TEST_CUDA_ROOT "/lib64)";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(n.lib, name));
      if (!fn && n.why.empty()) n.why = fmt::format("libnvrtc lacks {}", name);
    };
    sym(n.create, "nvrtcCreateProgram");
    sym(n.compile, "nvrtcCompileProgram");
    sym(n.log_size, "nvrtcGetProgramLogSize");
    sym(n.log, "nvrtcGetProgramLog");
    sym(n.ptx_size, "nvrtcGetPTXSize");
    sym(n.ptx, "nvrtcGetPTX");
    sym(n.cubin_size, "nvrtcGetCUBINSize");
    sym(n.destroy, "nvrtcDestroyProgram");
  });
  return n;
}

int type_bytes(const std::string& type) {
  if (type == ".u64" || type == ".s64" || type == ".b64" || type == ".f64") return 8;
  if (type == ".u32" || type == ".s32" || type == ".b32" || type == ".f32") return 4;
  if (type == ".u16" || type == ".s16" || type == ".b16" || type == ".f16") return 2;
  if (type == ".u8" || type == ".s8" || type == ".b8") return 1;
  return 0;
}

// ".visible .entry name(\n\t.param .u64 name_param_0,\n\t.param .u32 ...\n)"
std::vector<PtxKernel> parse_entries(const std::string& ptx) {
  std::vector<PtxKernel> out;
  std::size_t pos = 0;
  while ((pos = ptx.find(".entry ", pos)) != std::string::npos) {
    pos += 7;
    std::size_t open = ptx.find('(', pos);
    std::size_t close = ptx.find(')', open);
    if (open == std::string::npos || close == std::string::npos) break;
    PtxKernel k;
    k.name = ptx.substr(pos, open - pos);
    while (!k.name.empty() && (k.name.back() == ' ' || k.name.back() == '\n')) k.name.pop_back();
    std::string params = ptx.substr(open + 1, close - open - 1);
    std::size_t p = 0;
    while ((p = params.find(".param ", p)) != std::string::npos) {
      p += 7;
      std::size_t end = params.find_first_of(" \t\n", p);
      std::string type = params.substr(p, end - p);
      int bytes = type_bytes(type);
      if (bytes == 0) {  // ".align 8 .b8 name_param_3[16]": a struct passed by value
        std::size_t lb = params.find('[', p), rb = params.find(']', lb);
        bytes = lb == std::string::npos ? 0 : std::stoi(params.substr(lb + 1, rb - lb - 1));
      }
      k.param_bytes.push_back(bytes);
    }
    out.push_back(std::move(k));
    pos = close;
  }
  return out;
}

void check_body(const Json& body, const std::string& where, const std::vector<PtxKernel>& kernels,
                std::vector<std::string>& problems) {
  const Json* ks = body.find("kernels");
  if (!ks || !ks->is_array()) {
    problems.push_back(where + ": no \"kernels\" array");
    return;
  }
  for (std::size_t i = 0; i < ks->size(); ++i) {
    const Json& k = (*ks)[i];
    const std::string name = k.get_string("name");
    const PtxKernel* found = nullptr;
    for (const auto& pk : kernels)
      if (pk.name == name) found = &pk;
    if (!found) {
      problems.push_back(fmt::format("{}.kernels[{}]: kernel `{}` is not in the module", where, i, name));
      continue;
    }
    const Json* args = k.find("args");
    std::size_t n = args && args->is_array() ? args->size() : 0;
    if (n != found->param_bytes.size())
      problems.push_back(fmt::format("{}.kernels[{}]: `{}` takes {} arguments, the plan passes {}", where,
                                     i, name, found->param_bytes.size(), n));
  }
}

}  // namespace

bool nvrtc_available(std::string* why) {
  const Nvrtc& n = nvrtc();
  if (why) *why = n.why;
  return n.why.empty();
}

NvrtcOutcome nvrtc_compile(const std::string& source, const std::string& file_name,
                           const std::vector<std::string>& options) {
  const Nvrtc& n = nvrtc();
  NvrtcOutcome out;
  if (!n.why.empty()) {
    out.log = n.why;
    return out;
  }
  nvrtcProgram prog = nullptr;
  if (n.create(&prog, source.c_str(), file_name.c_str(), 0, nullptr, nullptr) != 0) {
    out.log = "nvrtcCreateProgram failed";
    return out;
  }
  std::vector<std::string> opts = {"-arch=sm_90a", "-std=c++17", "--ptxas-options=-v",
                                   "-I" KS_TEST_CUDA_ROOT "/include"};
  opts.insert(opts.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const int rc = n.compile(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t size = 0;
  n.log_size(prog, &size);
  out.log.assign(size, '\0');
  if (size) n.log(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  if (rc == 0) {
    std::string ptx;
    if (n.ptx_size(prog, &size) == 0) {
      ptx.assign(size, '\0');
      n.ptx(prog, ptx.data());
    }
    out.kernels = parse_entries(ptx);
    n.cubin_size(prog, &out.cubin_bytes);
    out.ok = out.cubin_bytes > 0;
  }
  n.destroy(&prog);
  return out;
}

std::vector<std::string> plan_mismatches(const Json& plan, const std::vector<PtxKernel>& kernels) {
  std::vector<std::string> problems;
  check_body(plan, "plan", kernels, problems);
  if (const Json* vs = plan.find("variants"); vs && vs->is_array())
    for (std::size_t i = 0; i < vs->size(); ++i)
      check_body((*vs)[i], fmt::format("plan.variants[{}]", i), kernels, problems);
  return problems;
}

}  // namespace ks::test
