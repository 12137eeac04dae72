// Reading a cubin (a CUDA ELF image) without a GPU: which entry functions
// (kernels) it holds and, where the image records them, their parameter
// layouts. This lets a launch plan be checked right after compilation, on the
// compile worker, before any device is touched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ks::eval::cuda {

struct ParamInfo {
  std::uint32_t offset = 0;  // in the kernel's parameter block
  std::uint32_t size = 0;    // bytes
};

struct CubinKernel {
  std::string symbol;     // as in the symbol table: "row_softmax", "_Z4gemmILi128EEvPf"
  std::string demangled;  // "gemm<128>(float*)"; equal to symbol for extern "C" kernels
  // The parameters in order, when the image describes them (the .nv.info
  // section of the kernel); nullopt when it does not or cannot be read.
  std::optional<std::vector<ParamInfo>> params;
};

// Lists the entry functions of a cubin in symbol-table order. Throws
// ks::Error(Status::invalid_argument) when `image` is not a CUDA ELF file.
std::vector<CubinKernel> inspect_cubin(std::string_view image);

// The C++ demangling of a symbol, or the symbol itself when it is not mangled.
std::string demangle(const std::string& symbol);

// "gemm<128>(float*)" -> "gemm<128>", "ns::k(int)" -> "ns::k": the name a
// launch plan would use for the kernel.
std::string plan_name_of(const std::string& demangled);

}  // namespace ks::eval::cuda
