// The fiber scheduler behind cuda_emu.hpp. A fiber starts once through
// makecontext/setcontext; every later switch is _setjmp/_longjmp between the
// fiber's stack and the scheduler's, which saves no signal mask (swapcontext
// costs a system call per switch, and a block switches thousands of times).

// _longjmp between stacks is what fibers do; glibc's fortified longjmp would
// mistake it for a jump into a dead frame.
#undef _FORTIFY_SOURCE

#include "emu/runtime.hpp"

#include <setjmp.h>
#include <ucontext.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>


namespace ks_emu {
namespace {

constexpr std::size_t kStackBytes = 256 * 1024;

struct Copy {
  unsigned char* dst;
  const unsigned char* src;
  int copy_bytes, src_bytes;
};

struct Fiber {
  ucontext_t ctx{};  // the entry, used once
  jmp_buf env{};     // where a suspended fiber resumes
  bool started = false;
  std::unique_ptr<char[]> stack;
  Dim3 tid;
  enum class State { runnable, block_barrier, warp_barrier, done } state = State::runnable;
  std::vector<Copy> open_group;
  std::vector<std::vector<Copy>> groups;  // committed, oldest first
};

struct Warp {
  unsigned char slots[32][64];
};

struct Launch {
  Dim3 grid, block, block_idx;
  std::vector<unsigned char> dyn_smem;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  const std::function<void()>* body = nullptr;
  jmp_buf scheduler{};
  Fiber* current = nullptr;
  std::string error;
};

Launch* g_launch = nullptr;

Fiber& self() {
  if (!g_launch || !g_launch->current) throw std::logic_error("CUDA emulation: called outside a kernel");
  return *g_launch->current;
}

int linear(const Dim3& t, const Dim3& d) { return static_cast<int>((t.z * d.y + t.y) * d.x + t.x); }

void yield(Fiber::State state) {
  Fiber& f = self();
  f.state = state;
  if (!_setjmp(f.env)) _longjmp(g_launch->scheduler, 1);
}

// Runs `f` until it yields or finishes.
__attribute__((noinline)) void resume(Launch& l, Fiber& f) {
  l.current = &f;
  if (!_setjmp(l.scheduler)) {
    if (!f.started) {
      f.started = true;
      setcontext(&f.ctx);
    }
    _longjmp(f.env, 1);
  }
  l.current = nullptr;
}

void trampoline() {
  Launch& l = *g_launch;
  try {
    (*l.body)();
  } catch (const std::exception& e) {
    if (l.error.empty()) l.error = e.what();
  }
  l.current->state = Fiber::State::done;
  _longjmp(l.scheduler, 1);
}

void run_block(Launch& l) {
  const int threads = static_cast<int>(l.fibers.size());
  for (int i = 0; i < threads; ++i) {
    Fiber& f = l.fibers[static_cast<std::size_t>(i)];
    f.state = Fiber::State::runnable;
    f.started = false;
    f.open_group.clear();
    f.groups.clear();
    f.tid = Dim3{static_cast<unsigned>(i) % l.block.x, (static_cast<unsigned>(i) / l.block.x) % l.block.y,
                 static_cast<unsigned>(i) / (l.block.x * l.block.y)};
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, trampoline, 0);
  }
  for (;;) {
    for (auto& f : l.fibers) {
      if (f.state != Fiber::State::runnable) continue;
      resume(l, f);
      if (!l.error.empty()) return;
    }
    bool all_done = true, released = false;
    const int warps = (threads + 31) / 32;
    for (int w = 0; w < warps; ++w) {
      int live = 0, waiting = 0;
      for (int i = w * 32; i < threads && i < w * 32 + 32; ++i) {
        auto s = l.fibers[static_cast<std::size_t>(i)].state;
        if (s != Fiber::State::done) ++live;
        if (s == Fiber::State::warp_barrier) ++waiting;
      }
      if (live) all_done = false;
      if (live && waiting == live) {
        for (int i = w * 32; i < threads && i < w * 32 + 32; ++i)
          l.fibers[static_cast<std::size_t>(i)].state = Fiber::State::runnable;
        released = true;
      }
    }
    if (all_done) return;
    if (released) continue;
    bool all_at_block_barrier = true;
    for (auto& f : l.fibers)
      if (f.state != Fiber::State::done && f.state != Fiber::State::block_barrier) all_at_block_barrier = false;
    if (!all_at_block_barrier) {
      l.error = "deadlock: some threads wait at __syncthreads() while others of their warp wait in a warp collective";
      return;
    }
    for (auto& f : l.fibers)
      if (f.state == Fiber::State::block_barrier) f.state = Fiber::State::runnable;
  }
}

void check_full_warp(const char* what) {
  Launch& l = *g_launch;
  const int me = linear(self().tid, l.block);
  const int w0 = me / 32 * 32;
  const int threads = static_cast<int>(l.fibers.size());
  for (int i = w0; i < w0 + 32; ++i)
    if (i >= threads || l.fibers[static_cast<std::size_t>(i)].state == Fiber::State::done)
      throw std::runtime_error(std::string(what) + " with a lane of the warp missing (exited or block size not a multiple of 32)");
}

}  // namespace

const Dim3& thread_idx() { return self().tid; }
const Dim3& block_idx() { return g_launch->block_idx; }
const Dim3& block_dim() { return g_launch->block; }
const Dim3& grid_dim() { return g_launch->grid; }
void* dynamic_shared() { return g_launch->dyn_smem.data(); }

void syncthreads() { yield(Fiber::State::block_barrier); }
void syncwarp() { yield(Fiber::State::warp_barrier); }

void fail(const char* what) { throw std::runtime_error(what); }

void warp_exchange(const void* mine, void* out, int bytes, int src_lane) {
  check_full_warp("warp shuffle");
  Launch& l = *g_launch;
  const int me = linear(self().tid, l.block);
  Warp& w = l.warps[static_cast<std::size_t>(me / 32)];
  std::memcpy(w.slots[me % 32], mine, static_cast<std::size_t>(bytes));
  yield(Fiber::State::warp_barrier);
  std::memcpy(out, w.slots[src_lane], static_cast<std::size_t>(bytes));
  yield(Fiber::State::warp_barrier);
}

void warp_gather(const void* mine, void* all, int bytes) {
  check_full_warp("warp collective");
  Launch& l = *g_launch;
  const int me = linear(self().tid, l.block);
  Warp& w = l.warps[static_cast<std::size_t>(me / 32)];
  std::memcpy(w.slots[me % 32], mine, static_cast<std::size_t>(bytes));
  yield(Fiber::State::warp_barrier);
  for (int i = 0; i < 32; ++i)
    std::memcpy(static_cast<unsigned char*>(all) + i * bytes, w.slots[i], static_cast<std::size_t>(bytes));
  yield(Fiber::State::warp_barrier);
}

void cp_async(void* dst, const void* src, int copy_bytes, int src_bytes) {
  if (src_bytes < 0 || src_bytes > copy_bytes) throw std::runtime_error("cp.async: src size outside [0, copy size]");
  self().open_group.push_back(
      {static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), copy_bytes, src_bytes});
}

void cp_async_commit() {
  Fiber& f = self();
  f.groups.push_back(std::move(f.open_group));
  f.open_group.clear();
}

void cp_async_wait(int pending_groups_allowed) {
  Fiber& f = self();
  while (static_cast<int>(f.groups.size()) > pending_groups_allowed) {
    for (const Copy& c : f.groups.front()) {
      if (c.src_bytes > 0) std::memcpy(c.dst, c.src, static_cast<std::size_t>(c.src_bytes));
      std::memset(c.dst + c.src_bytes, 0, static_cast<std::size_t>(c.copy_bytes - c.src_bytes));
    }
    f.groups.erase(f.groups.begin());
  }
}

unsigned short float_to_f16(float f) {
  unsigned x;
  std::memcpy(&x, &f, 4);
  const unsigned sign = (x >> 16) & 0x8000u;
  const unsigned exp = (x >> 23) & 0xffu;
  const unsigned mant = x & 0x7fffffu;
  if (exp == 0xffu) return static_cast<unsigned short>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<unsigned short>(sign | 0x7c00u);
  if (e <= 0) {
    // Subnormal: the value in units of 2^-24 is (1.mant * 2^23) >> (14 - e).
    const int shift = 14 - e;
    if (shift > 24) return static_cast<unsigned short>(sign);
    const unsigned m24 = mant | 0x800000u;
    unsigned h = m24 >> shift;
    const unsigned rem = m24 & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<unsigned short>(sign | h);
  }
  unsigned h = sign | (static_cast<unsigned>(e) << 10) | (mant >> 13);
  const unsigned rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rounds up into the exponent
  return static_cast<unsigned short>(h);
}

float f16_to_float(unsigned short h) {
  const unsigned sign = (static_cast<unsigned>(h) & 0x8000u) << 16;
  const unsigned exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  unsigned bits;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void mma_m16n8k16_f16(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  struct Frag {
    unsigned a[4], b[2];
  } mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}}, all[32];
  warp_gather(&mine, all, sizeof(Frag));
  auto half = [](unsigned reg, int hi) { return f16_to_float(static_cast<unsigned short>(hi ? reg >> 16 : reg & 0xffffu)); };
  auto A = [&](int r, int k) {
    const int lane = (r % 8) * 4 + (k % 8) / 2;
    const int reg = (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
    return half(all[lane].a[reg], k % 2);
  };
  auto B = [&](int k, int n) {
    const int lane = n * 4 + (k % 8) / 2;
    return half(all[lane].b[k >= 8 ? 1 : 0], k % 2);
  };
  const int lane = static_cast<int>(lane_id());
  const int g = lane / 4, t = lane % 4;
  for (int q = 0; q < 4; ++q) {
    const int r = g + (q >= 2 ? 8 : 0), n = 2 * t + (q & 1);
    float acc = c[q];
    for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, n);
    c[q] = acc;
  }
}

void launch(Dim3 grid, Dim3 block, std::size_t dynamic_shared_bytes, const std::function<void()>& body) {
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads > 1024) throw std::runtime_error("launch: block of " + std::to_string(threads) + " threads");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) throw std::runtime_error("launch: empty grid");
  if (g_launch) throw std::logic_error("launch: nested launch");
  Launch l;
  l.grid = grid;
  l.block = block;
  l.body = &body;
  l.fibers.resize(threads);
  for (auto& f : l.fibers) f.stack = std::make_unique<char[]>(kStackBytes);
  l.warps.resize((threads + 31) / 32);
  g_launch = &l;
  try {
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          l.block_idx = Dim3{x, y, z};
          // Fresh dynamic shared memory per block, filled with a NaN pattern
          // so that reading what no thread wrote shows up in the results.
          l.dyn_smem.assign(dynamic_shared_bytes + 16, 0xff);
          run_block(l);
          if (!l.error.empty())
            throw std::runtime_error("block (" + std::to_string(x) + "," + std::to_string(y) + "," +
                                     std::to_string(z) + "): " + l.error);
        }
  } catch (...) {
    g_launch = nullptr;
    throw;
  }
  g_launch = nullptr;
}

}  // namespace ks_emu
