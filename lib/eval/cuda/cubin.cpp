#include "eval/cuda/cubin.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "ksearch/error.hpp"

namespace ks::eval::cuda {
namespace {

// CUDA's ELF conventions, as the toolchain writes them (cubins are ELF64,
// little-endian, machine EM_CUDA). An entry function is a FUNC symbol whose
// st_other carries the CUDA "entry" flag.
constexpr std::uint16_t kMachineCuda = 190;
constexpr unsigned char kStoCudaEntry = 0x10;

// Records of a .nv.info.<kernel> section: a format byte, an attribute byte,
// then a value whose size the format gives: 2 bytes (padded) for the
// no-value, byte and half formats, a 2-byte length and that many bytes for
// the sized one. Only the two attributes needed for parameter layouts are
// interpreted; the constant-bank size cross-checks the result.
constexpr std::uint8_t kFormatNone = 0x01;
constexpr std::uint8_t kFormatHalf = 0x03;
constexpr std::uint8_t kFormatSized = 0x04;
constexpr std::uint8_t kAttrParamCbank = 0x0a;  // u32 symbol, u16 offset, u16 total size
constexpr std::uint8_t kAttrKparamInfo = 0x17;  // u32 index, u16 ordinal, u16 offset, u32 flags|size

[[noreturn]] void bad(const std::string& what) {
  throw Error(Status::invalid_argument, "not a valid cubin: " + what);
}

template <typename T>
T read_at(std::string_view img, std::uint64_t off) {
  if (off > img.size() || img.size() - off < sizeof(T))
    bad(fmt::format("read of {} bytes at offset {} past the end ({} bytes)", sizeof(T), off,
                    img.size()));
  T v;
  std::memcpy(&v, img.data() + off, sizeof(T));
  return v;
}

std::string_view section_bytes(std::string_view img, const Elf64_Shdr& s) {
  if (s.sh_type == SHT_NOBITS) return {};
  if (s.sh_offset > img.size() || img.size() - s.sh_offset < s.sh_size)
    bad("a section lies outside the file");
  return img.substr(s.sh_offset, s.sh_size);
}

std::string string_at(std::string_view table, std::uint64_t off) {
  if (off >= table.size()) bad("a name lies outside its string table");
  auto end = table.find('\0', off);
  if (end == std::string_view::npos) bad("an unterminated name");
  return std::string(table.substr(off, end - off));
}

// The parameter layout from a kernel's .nv.info section, or nullopt when the
// section holds records this reader does not know (it cannot then be sure it
// saw every parameter).
std::optional<std::vector<ParamInfo>> read_params(std::string_view info) {
  std::map<std::uint32_t, ParamInfo> by_ordinal;
  std::optional<std::uint32_t> cbank_size;
  std::size_t pos = 0;
  while (pos + 4 <= info.size()) {
    auto format = static_cast<std::uint8_t>(info[pos]);
    auto attr = static_cast<std::uint8_t>(info[pos + 1]);
    if (format >= kFormatNone && format <= kFormatHalf) {
      pos += 4;
      continue;
    }
    if (format != kFormatSized) return std::nullopt;
    std::uint16_t len = read_at<std::uint16_t>(info, pos + 2);
    std::size_t value = pos + 4;
    if (value + len > info.size()) return std::nullopt;
    if (attr == kAttrKparamInfo && len >= 12) {
      auto ordinal = read_at<std::uint16_t>(info, value + 4);
      auto offset = read_at<std::uint16_t>(info, value + 6);
      auto packed = read_at<std::uint32_t>(info, value + 8);
      by_ordinal[ordinal] = ParamInfo{offset, packed >> 18};
    } else if (attr == kAttrParamCbank && len >= 8) {
      cbank_size = read_at<std::uint16_t>(info, value + 6);
    }
    pos = value + len;
  }
  std::vector<ParamInfo> params;
  for (const auto& [ordinal, p] : by_ordinal) {
    if (ordinal != params.size()) return std::nullopt;  // a gap: not a layout we understand
    params.push_back(p);
  }
  // The parameter block must end where the constant-bank entry says it does.
  if (cbank_size) {
    std::uint32_t end = params.empty() ? 0 : params.back().offset + params.back().size;
    if (end != *cbank_size) return std::nullopt;
  } else if (!params.empty()) {
    return std::nullopt;
  }
  return params;
}

}  // namespace

std::string demangle(const std::string& symbol) {
  if (symbol.rfind("_Z", 0) != 0) return symbol;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : symbol;
}

std::string plan_name_of(const std::string& demangled) {
  std::string s = demangled;
  if (s.rfind("void ", 0) == 0) s = s.substr(5);  // function templates show their return type
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    else if (s[i] == '>') --depth;
    else if (s[i] == '(' && depth == 0) return s.substr(0, i);
  }
  return s;
}

std::vector<CubinKernel> inspect_cubin(std::string_view img) {
  if (img.size() < sizeof(Elf64_Ehdr) || std::memcmp(img.data(), ELFMAG, SELFMAG) != 0)
    bad("no ELF header");
  auto eh = read_at<Elf64_Ehdr>(img, 0);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    bad("not a little-endian 64-bit ELF file");
  if (eh.e_machine != kMachineCuda) bad(fmt::format("ELF machine {} is not CUDA", eh.e_machine));
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) bad("unexpected section header size");
  if (eh.e_shstrndx >= eh.e_shnum) bad("no section name table");

  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  for (std::size_t i = 0; i < sections.size(); ++i)
    sections[i] = read_at<Elf64_Shdr>(img, eh.e_shoff + i * sizeof(Elf64_Shdr));
  std::string_view names = section_bytes(img, sections[eh.e_shstrndx]);

  std::map<std::string, std::string_view> info_by_kernel;
  const Elf64_Shdr* symtab = nullptr;
  for (const auto& s : sections) {
    std::string name = string_at(names, s.sh_name);
    if (s.sh_type == SHT_SYMTAB) symtab = &s;
    if (name.rfind(".nv.info.", 0) == 0) info_by_kernel[name.substr(9)] = section_bytes(img, s);
  }
  std::vector<CubinKernel> out;
  if (!symtab) return out;
  if (symtab->sh_link >= sections.size()) bad("the symbol table names no string table");
  if (symtab->sh_entsize != sizeof(Elf64_Sym)) bad("unexpected symbol size");
  std::string_view syms = section_bytes(img, *symtab);
  std::string_view strings = section_bytes(img, sections[symtab->sh_link]);
  for (std::size_t off = 0; off + sizeof(Elf64_Sym) <= syms.size(); off += sizeof(Elf64_Sym)) {
    auto sym = read_at<Elf64_Sym>(syms, off);
    if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & kStoCudaEntry)) continue;
    CubinKernel k;
    k.symbol = string_at(strings, sym.st_name);
    k.demangled = demangle(k.symbol);
    if (auto it = info_by_kernel.find(k.symbol); it != info_by_kernel.end())
      k.params = read_params(it->second);
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace ks::eval::cuda
