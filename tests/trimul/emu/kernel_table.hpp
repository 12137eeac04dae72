// Kernels compiled for the host emulation, callable by name with run-time
// arguments, the way a launch plan names them. Test-only.
#pragma once

#include <limits>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ks_emu {

// One kernel argument as a launch plan produces it.
struct Arg {
  enum class Kind { pointer, integer, real } kind = Kind::integer;
  void* ptr = nullptr;
  long long i = 0;
  double d = 0;
};

struct Kernel {
  std::string name;
  // 'p' pointer, 'i' integer (its byte width in int_bytes), 'f' floating.
  std::vector<char> param_kinds;
  std::function<void(const std::vector<Arg>&)> call;
};

class KernelTable {
 public:
  template <class... P>
  void add(const std::string& name, void (*fn)(P...)) {
    Kernel k;
    k.name = name;
    k.param_kinds = {kind_of<P>()...};
    k.call = [fn, name](const std::vector<Arg>& args) {
      if (args.size() != sizeof...(P))
        throw std::runtime_error("kernel `" + name + "` takes " + std::to_string(sizeof...(P)) +
                                 " arguments, the plan passes " + std::to_string(args.size()));
      call_with(fn, name, args, std::index_sequence_for<P...>{});
    };
    kernels_[name] = std::move(k);
  }

  const Kernel* find(const std::string& name) const {
    auto it = kernels_.find(name);
    return it == kernels_.end() ? nullptr : &it->second;
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [n, k] : kernels_) out.push_back(n);
    return out;
  }

 private:
  template <class T>
  static constexpr char kind_of() {
    if constexpr (std::is_pointer_v<T>) return 'p';
    else if constexpr (std::is_integral_v<T>) return 'i';
    else return 'f';
  }

  template <class T>
  static T convert(const Arg& a, const std::string& kernel, std::size_t index) {
    auto bad = [&](const char* why) {
      return std::runtime_error("kernel `" + kernel + "` argument " + std::to_string(index) + ": " + why);
    };
    if constexpr (std::is_pointer_v<T>) {
      if (a.kind != Arg::Kind::pointer) throw bad("expects a buffer, the plan passes a number");
      return static_cast<T>(a.ptr);
    } else if constexpr (std::is_integral_v<T>) {
      if (a.kind != Arg::Kind::integer) throw bad("expects an integer");
      if constexpr (sizeof(T) < sizeof(long long)) {
        if (a.i < static_cast<long long>(std::numeric_limits<T>::min()) ||
            a.i > static_cast<long long>(std::numeric_limits<T>::max()))
          throw bad("value does not fit the parameter");
      }
      return static_cast<T>(a.i);
    } else {
      if (a.kind == Arg::Kind::pointer) throw bad("expects a number, the plan passes a buffer");
      // A scalar input may arrive as an integer kind with its double alongside.
      return static_cast<T>(a.kind == Arg::Kind::real || a.d != 0 ? a.d : static_cast<double>(a.i));
    }
  }

  template <class... P, std::size_t... I>
  static void call_with(void (*fn)(P...), const std::string& name, const std::vector<Arg>& args,
                        std::index_sequence<I...>) {
    fn(convert<P>(args[I], name, I)...);
  }

  std::map<std::string, Kernel> kernels_;
};

}  // namespace ks_emu
