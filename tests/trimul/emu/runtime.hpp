// The runtime behind cuda_emu.hpp: fibers, barriers, warp collectives,
// cp.async queues and launches. Free of CUDA vocabulary macros, so ordinary
// test code can include it. Test-only.
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>

namespace ks_emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

const Dim3& thread_idx();
const Dim3& block_idx();
const Dim3& block_dim();
const Dim3& grid_dim();
// The dynamic shared memory of the running block (zero-filled per launch).
void* dynamic_shared();

void syncthreads();
void syncwarp();

// Raw warp exchange: every live lane of the calling warp deposits `bytes`
// (at most 64) and, after a barrier, reads lane `src_lane`'s deposit into
// `out`; a second barrier keeps the slots stable until everyone has read.
// Fails the launch when a lane of the warp has exited (undefined on hardware).
void warp_exchange(const void* mine, void* out, int bytes, int src_lane);
// Every lane deposits `bytes`; `all` receives 32 deposits, lane by lane.
void warp_gather(const void* mine, void* all, int bytes);

// cp.async: queued on the calling thread, performed at the matching wait.
void cp_async(void* dst, const void* src, int copy_bytes, int src_bytes);
void cp_async_commit();
void cp_async_wait(int pending_groups_allowed);

// Records a failure of the emulated kernel (reported when the launch ends).
void fail(const char* what);

inline unsigned lane_id() {
  const Dim3& t = thread_idx();
  const Dim3& d = block_dim();
  return ((t.z * d.y + t.y) * d.x + t.x) & 31u;
}

}  // namespace ks_emu

// Runs `body` once per thread of every block of `grid` (blocks in order, the
// threads of a block as fibers). Throws std::runtime_error naming the block
// when the kernel fails, deadlocks or misuses a warp collective.
namespace ks_emu {
void launch(Dim3 grid, Dim3 block, std::size_t dynamic_shared_bytes, const std::function<void()>& body);
}  // namespace ks_emu

// ---------------------------------------------------------------------------
// Tensor-core and conversion semantics, for the PTX wrapper emulations.

namespace ks_emu {

// float -> IEEE binary16 bits, round to nearest even (cvt.rn.f16.f32),
// overflow to infinity, subnormals kept.
unsigned short float_to_f16(float f);
float f16_to_float(unsigned short h);

// D = A * B + C for mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 with
// the fragment layout of the PTX ISA (groupID g = lane / 4, t = lane % 4):
// A regs {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)};
// B regs {(k = 2t..2t+1, n = g), (k = 2t+8.., n = g)}; C {(g, 2t), (g, 2t+1),
// (g+8, 2t), (g+8, 2t+1)}. The lower half of each register holds the lower index.
void mma_m16n8k16_f16(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]);

}  // namespace ks_emu
