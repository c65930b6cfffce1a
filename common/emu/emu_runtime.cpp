// The CPU emulator's runtime (NORMTUNE_USE_EMU builds; emu.h says why and how): the libcudart
// functions that normtune, its tests and tools call, over host memory, and the scheduler
// that runs a kernel's threads as fibers.
//
// A CTA runs on one OS thread: one fiber per CUDA thread, each run until it waits
// (a barrier, a shuffle, a cluster or transaction barrier), then the next, round robin. A
// round in which no fiber got past its wait is a hang when nothing outside the CTA can end
// it; with clusters, whose CTAs run in parallel on their own OS threads, a hang is a minute
// without progress anywhere in the cluster.
#include <normtune/common/emu.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

// ---- dynamic shared memory ----------------------------------------------------------------
// The kernels' `extern __shared__ T name[]` arrays, one thread_local array per name (each
// kernel uses one of them), at sm_90's opt-in limit. A kernel that declares another name
// fails to link, naming it: add it here.
namespace normtune {
inline constexpr size_t kEmuDynamicSmemBytes = 232448;  // 227 KiB
alignas(128) thread_local uint4 staged_smem[kEmuDynamicSmemBytes / sizeof(uint4)];
alignas(128) thread_local uint4 bwd_ring[kEmuDynamicSmemBytes / sizeof(uint4)];
alignas(128) thread_local float4 dynamic_smem[kEmuDynamicSmemBytes / sizeof(float4)];
alignas(128) thread_local unsigned char mx_slice_bytes[kEmuDynamicSmemBytes];
}  // namespace normtune

namespace normtune::emu {
namespace {

// ---- the emulated device ----------------------------------------------------------------------
constexpr int kWarpLanes = 32;
constexpr int kMaxCtaThreads = 1024;
constexpr int kNamedBarriers = 16;
constexpr int kMaxClusterSize = 16;  // sm_90 with the non-portable attribute
constexpr size_t kSmemPerSm = 233472;
constexpr size_t kFiberStackBytes = size_t{256} << 10;

int sm_count() {
  static const int n = [] {
    const char* env = std::getenv("NORMTUNE_EMU_SM_COUNT");
    const int v = env != nullptr ? std::atoi(env) : 0;
    return v > 0 && v <= 1024 ? v : 132;
  }();
  return n;
}

// The order in which a CTA's fibers run in each round (NORMTUNE_EMU_SCHEDULE): forward
// (thread 0 first), reverse, or random (seeded by the CTA's index: the same order every run). A missing barrier between a
// write and another thread's read goes unseen when the writer happens to run first: running
// the suites in the other orders too shows it.
enum class Schedule { kForward, kReverse, kRandom };
Schedule schedule() {
  static const Schedule s = [] {
    const char* env = std::getenv("NORMTUNE_EMU_SCHEDULE");
    const std::string v = env != nullptr ? env : "forward";
    if (v == "reverse") return Schedule::kReverse;
    if (v == "random") return Schedule::kRandom;
    return Schedule::kForward;
  }();
  return s;
}

[[noreturn]] void fail(const char* fmt, ...) {
  std::va_list args;
  va_start(args, fmt);
  std::fputs("normtune emulator: ", stderr);
  std::vfprintf(stderr, fmt, args);
  std::fputc('\n', stderr);
  va_end(args);
  std::fflush(stderr);
  std::abort();
}

thread_local cudaError_t last_error = cudaSuccess;
cudaError_t record(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

// ---- fibers -----------------------------------------------------------------------------------
// Stacks come from a pool of mappings (untouched pages cost nothing).
class StackPool {
 public:
  char* take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) {
      void* p = mmap(nullptr, kFiberStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
      if (p == MAP_FAILED) fail("out of memory for fiber stacks");
      return static_cast<char*>(p);
    }
    char* p = free_.back();
    free_.pop_back();
    return p;
  }
  void give(char* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(p);
  }

 private:
  std::mutex mutex_;
  std::vector<char*> free_;
};
StackPool& stacks() {
  static StackPool* pool = new StackPool;  // (never destroyed: launches may run at exit)
  return *pool;
}

struct Cta;

struct ThreadState {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};

// A fiber's saved context. x86-64: its stack pointer, the callee-saved registers pushed below
// it (emu_switch); elsewhere a ucontext_t (whose switches cost two system calls each).
#if defined(__x86_64__)
struct Context {
  void* sp = nullptr;
};
extern "C" void normtune_emu_switch(void** save_sp, void* load_sp);
// Saves the callee-saved registers and the stack pointer into *save_sp, loads load_sp's.
asm(R"(
  .text
  .p2align 4
  .hidden normtune_emu_switch
  .globl normtune_emu_switch
  .type normtune_emu_switch, @function
normtune_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size normtune_emu_switch, .-normtune_emu_switch
)");
void switch_context(Context& save, const Context& load) { normtune_emu_switch(&save.sp, load.sp); }
// A context that starts entry() on the stack [stack, stack + bytes).
void make_context(Context& c, char* stack, size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  auto* words = reinterpret_cast<void**>(top);
  words[-1] = nullptr;                                 // entry's return address: it never returns
  words[-2] = reinterpret_cast<void*>(entry);          // where emu_switch's ret goes
  for (int i = 3; i <= 8; ++i) words[-i] = nullptr;    // the six registers it pops
  c.sp = &words[-8];
}
#else
struct Context {
  ucontext_t uc;
};
void switch_context(Context& save, const Context& load) { swapcontext(&save.uc, &load.uc); }
void make_context(Context& c, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
#endif

// AddressSanitizer (NORMTUNE_EMU_SANITIZE) must be told of every stack switch, or it takes a
// fiber's frames for overflows of the scheduler's stack.
#if defined(__SANITIZE_ADDRESS__)
struct StackBounds {
  const void* bottom = nullptr;
  size_t size = 0;
};
thread_local StackBounds scheduler_stack;  // the OS thread's own, learnt at the first switch
void before_switch(void** fake_stack, const void* bottom, size_t size) {
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
}
void after_switch(void* fake_stack, StackBounds* from) {
  __sanitizer_finish_switch_fiber(fake_stack, from != nullptr ? &from->bottom : nullptr,
                                  from != nullptr ? &from->size : nullptr);
}
#endif

struct Fiber {
  Context context;
  ThreadState state;
  Cta* cta = nullptr;
  char* stack = nullptr;
  int lane = 0, warp = 0;
  unsigned shuffles = 0;          // this lane's shuffles so far: which slot buffer is next
  uint64_t cluster_arrivals = 0;  // this thread's cluster barrier arrivals so far
  bool done = false;
};

struct Barrier {
  int arrived = 0;
  unsigned generation = 0;
};

struct Warp {
  int live = 0;
  int arrived = 0;
  unsigned generation = 0;
  uint32_t slots[2][kWarpLanes] = {};
};

struct Cluster {
  int size = 1;
  uint64_t threads = 0;  // CUDA threads in the cluster
  Cta* ctas[kMaxClusterSize] = {};
  std::atomic<uint64_t> arrivals{0};
  std::atomic<uint64_t> progress{0};
  std::atomic<int> started{0};
};

struct Cta {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier barriers[kNamedBarriers];
  int live = 0;
  uint64_t progress = 0;
  Cluster* cluster = nullptr;
  int rank = 0;
  uintptr_t thread_pointer = 0;
  const std::function<void()>* body = nullptr;
  Context scheduler;
};

thread_local Fiber* current = nullptr;

Fiber& self() {
  if (current == nullptr) fail("a device function was called outside a kernel");
  return *current;
}

uintptr_t thread_pointer() {
#if defined(__x86_64__)
  uintptr_t tp;
  asm("mov %%fs:0, %0" : "=r"(tp));
  return tp;
#else
  return reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
#endif
}

// Fiber -> scheduler (`dying`: the fiber never runs again) and scheduler -> fiber.
void to_scheduler(Fiber& f, bool dying) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  before_switch(dying ? nullptr : &fake, scheduler_stack.bottom, scheduler_stack.size);
  switch_context(f.context, f.cta->scheduler);
  after_switch(fake, nullptr);
#else
  (void)dying;
  switch_context(f.context, f.cta->scheduler);
#endif
}
void to_fiber(Fiber& f) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  before_switch(&fake, f.stack, kFiberStackBytes);
  switch_context(f.cta->scheduler, f.context);
  after_switch(fake, nullptr);
#else
  switch_context(f.cta->scheduler, f.context);
#endif
}

void yield(Fiber& f) { to_scheduler(f, false); }

// The wait this OS thread's fibers entered last: named in the message of a hang.
thread_local const char* waiting_on = nullptr;

// Waits (switching to the CTA's other fibers) until done() holds. Entering and leaving a wait
// are progress; a round of the scheduler without any is a hang.
template <typename Done>
void wait_named(Done done, const char* what) {
  Fiber& f = self();
  waiting_on = what;
  f.cta->progress++;
  while (!done()) yield(f);
  f.cta->progress++;
  f.cta->cluster->progress.fetch_add(1, std::memory_order_relaxed);
}

void complete_barrier(Barrier& b) {
  b.arrived = 0;
  ++b.generation;
}

void complete_warp(Warp& w) {
  w.arrived = 0;
  ++w.generation;
}

void fiber_main() {
#if defined(__SANITIZE_ADDRESS__)
  after_switch(nullptr, &scheduler_stack);
#endif
  Fiber& f = self();
  (*f.cta->body)();
  Cta& cta = *f.cta;
  f.done = true;
  --cta.live;
  Warp& w = cta.warps[f.warp];
  --w.live;
  ++cta.progress;
  // Waits that counted this thread: __syncthreads and its warp's rendezvous.
  Barrier& b = cta.barriers[0];
  if (b.arrived > 0 && b.arrived >= cta.live) complete_barrier(b);
  if (w.arrived > 0 && w.arrived >= w.live) complete_warp(w);
  to_scheduler(f, true);  // never resumed
  fail("a finished fiber was resumed");
}

void run_cta(Cta& cta, dim3 grid, dim3 block, uint3 block_idx, size_t smem) {
  const int threads = static_cast<int>(block.x * block.y * block.z);
  cta.fibers.resize(threads);
  cta.warps.assign((threads + kWarpLanes - 1) / kWarpLanes, Warp{});
  cta.live = threads;
  // Dynamic shared memory starts as NaN bytes: a kernel that reads what it never wrote sees them.
  if (smem > 0) {
    std::memset(staged_smem, 0xFF, smem);
    std::memset(bwd_ring, 0xFF, smem);
    std::memset(dynamic_smem, 0xFF, smem);
    std::memset(mx_slice_bytes, 0xFF, smem);
  }
  for (int t = 0; t < threads; ++t) {
    Fiber& f = cta.fibers[t];
    f.cta = &cta;
    f.stack = stacks().take();
    f.lane = t % kWarpLanes;
    f.warp = t / kWarpLanes;
    cta.warps[f.warp].live++;
    const unsigned ut = static_cast<unsigned>(t);
    f.state.thread_idx = make_uint3(ut % block.x, (ut / block.x) % block.y, ut / (block.x * block.y));
    f.state.block_idx = block_idx;
    f.state.block_dim = block;
    f.state.grid_dim = grid;
    make_context(f.context, f.stack, kFiberStackBytes, fiber_main);
  }
  auto last_progress = std::chrono::steady_clock::now();
  uint64_t cluster_seen = 0;
  std::vector<int> order(threads);
  for (int t = 0; t < threads; ++t) order[t] = schedule() == Schedule::kReverse ? threads - 1 - t : t;
  std::minstd_rand rng(block_idx.x * 7919u + block_idx.y * 104729u + block_idx.z + 1u);
  while (cta.live > 0) {
    const uint64_t before = cta.progress;
    if (schedule() == Schedule::kRandom) std::shuffle(order.begin(), order.end(), rng);
    for (const int t : order) {
      Fiber& f = cta.fibers[t];
      if (f.done) continue;
      current = &f;
      threadIdx = f.state.thread_idx;
      blockIdx = f.state.block_idx;
      blockDim = f.state.block_dim;
      gridDim = f.state.grid_dim;
      to_fiber(f);
      current = nullptr;
    }
    if (cta.live == 0 || cta.progress != before) {
      last_progress = std::chrono::steady_clock::now();
      continue;
    }
    // Every fiber is waiting.
    if (cta.cluster->size == 1) {
      fail("kernel hang: every thread of CTA (%u,%u,%u) waits (last wait: %s), and nothing else runs",
           block_idx.x, block_idx.y, block_idx.z, waiting_on != nullptr ? waiting_on : "?");
    }
    const uint64_t seen = cta.cluster->progress.load(std::memory_order_relaxed);
    if (seen != cluster_seen) {
      cluster_seen = seen;
      last_progress = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(60)) {
      fail("kernel hang: CTA rank %d of a cluster of %d (CTA %u) made no progress for 60 s (last wait: %s)",
           cta.rank, cta.cluster->size, block_idx.x, waiting_on != nullptr ? waiting_on : "?");
    }
    sched_yield();
  }
  for (Fiber& f : cta.fibers) stacks().give(f.stack);
}

// ---- launches -------------------------------------------------------------------------------
struct LaunchRecord {
  dim3 grid, block;
  size_t smem;
  int cluster;
  std::shared_ptr<const std::function<void()>> body;
};

void run_cluster(const LaunchRecord& l, unsigned first_x, unsigned y, unsigned z) {
  Cluster cluster;
  cluster.size = l.cluster;
  cluster.threads = uint64_t(l.block.x) * l.block.y * l.block.z * l.cluster;
  std::vector<std::unique_ptr<Cta>> ctas;
  for (int r = 0; r < l.cluster; ++r) {
    ctas.push_back(std::make_unique<Cta>());
    ctas.back()->cluster = &cluster;
    ctas.back()->rank = r;
    ctas.back()->body = l.body.get();
    cluster.ctas[r] = ctas.back().get();
  }
  auto run_rank = [&](int r) {
    Cta& cta = *ctas[r];
    // Every CTA's thread pointer is known before any CTA runs: remote shared memory is
    // addressed through them.
    cta.thread_pointer = thread_pointer();
    cluster.started.fetch_add(1);
    while (cluster.started.load() < cluster.size) sched_yield();
    run_cta(cta, l.grid, l.block, make_uint3(first_x + r, y, z), l.smem);
  };
  if (l.cluster == 1) {
    run_rank(0);
    return;
  }
  struct Start {
    decltype(run_rank)* fn;
    int rank;
  };
  std::vector<pthread_t> threads(l.cluster);
  std::vector<Start> starts(l.cluster);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{64} << 20);  // (the kernels' thread_local shared memory lives here too)
  for (int r = 0; r < l.cluster; ++r) {
    starts[r] = {&run_rank, r};
    const int e = pthread_create(
        &threads[r], &attr,
        [](void* p) -> void* {
          auto* s = static_cast<Start*>(p);
          (*s->fn)(s->rank);
          return nullptr;
        },
        &starts[r]);
    if (e != 0) fail("pthread_create failed (%s) for a CTA of a cluster", std::strerror(e));
  }
  pthread_attr_destroy(&attr);
  for (pthread_t& t : threads) pthread_join(t, nullptr);
}

void run_launch(const LaunchRecord& l) {
  for (unsigned z = 0; z < l.grid.z; ++z)
    for (unsigned y = 0; y < l.grid.y; ++y)
      for (unsigned x = 0; x < l.grid.x; x += static_cast<unsigned>(l.cluster)) run_cluster(l, x, y, z);
}

// ---- streams, graphs, events, memory -------------------------------------------------------------
using Op = std::function<void()>;

struct Stream {
  bool capturing = false;
  std::vector<Op> captured;
};
struct Graph {
  std::vector<Op> ops;
};
struct Event {
  std::chrono::steady_clock::time_point at;
};

Stream* stream_of(cudaStream_t s) {
  // The default streams (0, cudaStreamLegacy, cudaStreamPerThread) are never captured here.
  const auto v = reinterpret_cast<uintptr_t>(s);
  return v <= 2 ? nullptr : reinterpret_cast<Stream*>(s);
}

// Runs op now, or records it in the stream's capture.
void enqueue(cudaStream_t s, Op op) {
  Stream* st = stream_of(s);
  if (st != nullptr && st->capturing) {
    st->captured.push_back(std::move(op));
  } else {
    op();
  }
}

std::mutex& allocations_mutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, size_t>& allocations() {
  static auto* a = new std::map<uintptr_t, size_t>;
  return *a;
}

}  // namespace

cudaError_t launch(dim3 grid, dim3 block, size_t smem, int cluster, cudaStream_t stream, std::function<void()> body) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > kMaxCtaThreads || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535) {
    return record(cudaErrorInvalidConfiguration);
  }
  if (smem > kEmuDynamicSmemBytes) return record(cudaErrorInvalidValue);
  if (cluster < 1 || cluster > kMaxClusterSize || grid.x % static_cast<unsigned>(cluster) != 0) {
    return record(cudaErrorInvalidClusterSize);
  }
  LaunchRecord l{grid, block, smem, cluster, std::make_shared<const std::function<void()>>(std::move(body))};
  enqueue(stream, [l] { run_launch(l); });
  return cudaSuccess;
}

void barrier(int id, int threads) {
  Fiber& f = self();
  Cta& cta = *f.cta;
  if (id < 0 || id >= kNamedBarriers) fail("barrier id %d outside 0..%d", id, kNamedBarriers - 1);
  Barrier& b = cta.barriers[id];
  const int expected = threads == 0 ? cta.live : threads;
  const unsigned generation = b.generation;
  if (++b.arrived >= expected) {
    complete_barrier(b);
    cta.progress++;
    return;
  }
  wait_named([&] { return b.generation != generation; }, id == 0 ? "__syncthreads" : "named barrier");
}

void sync_warp() {
  Fiber& f = self();
  Warp& w = f.cta->warps[f.warp];
  const unsigned generation = w.generation;
  if (++w.arrived >= w.live) {
    complete_warp(w);
    f.cta->progress++;
    return;
  }
  wait_named([&] { return w.generation != generation; }, "warp shuffle / __syncwarp");
}

unsigned shfl_xor(unsigned v, int lane_mask) {
  Fiber& f = self();
  Warp& w = f.cta->warps[f.warp];
  // Two slot buffers: a lane writes a buffer again two shuffles later, after every lane of the
  // warp has met at the shuffle in between, so after they all read it.
  const int buf = static_cast<int>(f.shuffles++ & 1u);
  w.slots[buf][f.lane] = v;
  sync_warp();
  return w.slots[buf][(f.lane ^ lane_mask) & (kWarpLanes - 1)];
}

float shfl_xor(float v, int lane_mask) {
  return std::bit_cast<float>(shfl_xor(std::bit_cast<unsigned>(v), lane_mask));
}

int cluster_rank() { return self().cta->rank; }

void cluster_arrive() {
  Fiber& f = self();
  f.cluster_arrivals++;
  f.cta->cluster->arrivals.fetch_add(1, std::memory_order_acq_rel);
  f.cta->cluster->progress.fetch_add(1, std::memory_order_relaxed);
}

void cluster_wait() {
  Fiber& f = self();
  Cluster& c = *f.cta->cluster;
  // Arrivals only grow: this thread's k-th wait ends when k arrivals of every thread are in
  // (no thread arrives a (k+1)-th time before the k-th barrier completed).
  const uint64_t target = f.cluster_arrivals * c.threads;
  wait_named([&] { return c.arrivals.load(std::memory_order_acquire) >= target; }, "cluster barrier");
}

void* cluster_map_shared(const void* p, int rank) {
  Fiber& f = self();
  Cluster& c = *f.cta->cluster;
  if (rank < 0 || rank >= c.size) fail("map_shared_rank: rank %d outside a cluster of %d CTAs", rank, c.size);
  // Shared memory is thread_local: the same variable of the other CTA's OS thread sits at the
  // same offset from that thread's thread pointer.
  const uintptr_t offset = reinterpret_cast<uintptr_t>(p) - f.cta->thread_pointer;
  return reinterpret_cast<void*>(c.ctas[rank]->thread_pointer + offset);
}

// Transaction barrier word: bits 0-31 the transaction bytes still expected (signed), 32-47
// the arrivals still expected, 48-62 the arrivals per phase, 63 the phase.
namespace {
struct MbarrierState {
  int32_t tx;
  uint32_t pending, count, phase;
};
MbarrierState unpack(uint64_t w) {
  return {static_cast<int32_t>(static_cast<uint32_t>(w)), static_cast<uint32_t>(w >> 32) & 0xFFFFu,
          static_cast<uint32_t>(w >> 48) & 0x7FFFu, static_cast<uint32_t>(w >> 63)};
}
uint64_t pack(MbarrierState s) {
  return uint64_t(static_cast<uint32_t>(s.tx)) | (uint64_t(s.pending & 0xFFFFu) << 32) |
         (uint64_t(s.count & 0x7FFFu) << 48) | (uint64_t(s.phase & 1u) << 63);
}
// Applies `arrivals` arrivals and `tx` bytes; completes the phase when nothing is pending.
void mbarrier_update(uint64_t* bar, int arrivals, int64_t tx) {
  std::atomic_ref<uint64_t> word(*bar);
  uint64_t old = word.load(std::memory_order_acquire);
  for (;;) {
    MbarrierState s = unpack(old);
    if (static_cast<int>(s.pending) < arrivals) fail("mbarrier: more arrivals than the phase expects");
    s.pending -= static_cast<uint32_t>(arrivals);
    s.tx = static_cast<int32_t>(s.tx + tx);
    if (s.pending == 0 && s.tx == 0) {
      s.phase ^= 1u;
      s.pending = s.count;
    }
    if (word.compare_exchange_weak(old, pack(s), std::memory_order_acq_rel, std::memory_order_acquire)) return;
  }
}
}  // namespace

void mbarrier_init(uint64_t* bar, unsigned arrivals) {
  if (arrivals == 0 || arrivals > 0x7FFFu) fail("mbarrier_init: %u arrivals", arrivals);
  std::atomic_ref<uint64_t>(*bar).store(pack({0, arrivals, arrivals, 0}), std::memory_order_release);
}

void mbarrier_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  mbarrier_update(bar, 1, static_cast<int64_t>(bytes));
  self().cta->cluster->progress.fetch_add(1, std::memory_order_relaxed);
}

void mbarrier_wait_parity(uint64_t* bar, unsigned parity) {
  // try_wait.parity(P): true once the phase of parity P has completed (the current phase's
  // parity is no longer P).
  wait_named([&] { return unpack(std::atomic_ref<uint64_t>(*bar).load(std::memory_order_acquire)).phase != (parity & 1u); },
             "mbarrier (transaction barrier)");
}

void st_async_cluster(float* slot, float v, uint64_t* bar, int rank) {
  auto* remote_slot = static_cast<float*>(cluster_map_shared(slot, rank));
  auto* remote_bar = static_cast<uint64_t*>(cluster_map_shared(bar, rank));
  std::atomic_ref<float>(*remote_slot).store(v, std::memory_order_relaxed);
  mbarrier_update(remote_bar, 0, -static_cast<int64_t>(sizeof(float)));
  self().cta->cluster->progress.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace normtune::emu

// ---- libcudart's functions, for the emulated device -------------------------------------------
using normtune::emu::Event;
using normtune::emu::Graph;
using normtune::emu::Stream;
using normtune::emu::allocations;
using normtune::emu::allocations_mutex;
using normtune::emu::enqueue;
using normtune::emu::last_error;
using normtune::emu::record;
using normtune::emu::sm_count;
using normtune::emu::stream_of;

namespace {
// 16 GiB device, with a little under half said to be free: tests that need more skip.
constexpr size_t kTotalMemory = size_t{16} << 30;
constexpr size_t kFreeMemory = size_t{7} << 30;
}  // namespace

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (p == nullptr) return record(cudaErrorInvalidValue);
  *p = nullptr;
  if (bytes > kFreeMemory) return record(cudaErrorMemoryAllocation);
  // Exactly `bytes` (256-byte aligned, as cudaMalloc's): under AddressSanitizer a kernel's
  // access past the end is reported, as compute-sanitizer's memcheck would.
  void* q = nullptr;
  if (posix_memalign(&q, 256, std::max<size_t>(bytes, 1)) != 0) return record(cudaErrorMemoryAllocation);
  std::memset(q, 0xA5, bytes);  // not zeros: fresh device memory holds whatever was there
  std::lock_guard<std::mutex> lock(allocations_mutex());
  allocations()[reinterpret_cast<uintptr_t>(q)] = bytes;
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(allocations_mutex());
    if (allocations().erase(reinterpret_cast<uintptr_t>(p)) == 0) return record(cudaErrorInvalidValue);
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  size_t used = 0;
  {
    std::lock_guard<std::mutex> lock(allocations_mutex());
    for (const auto& [p, n] : allocations()) used += n;
  }
  *free = used < kFreeMemory ? kFreeMemory - used : 0;
  *total = kTotalMemory;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  enqueue(stream, [=] {
    if (bytes > 0) std::memmove(dst, src, bytes);
  });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (bytes > 0) std::memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  enqueue(stream, [=] {
    if (bytes > 0) std::memset(p, value, bytes);
  });
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* p) {
  *attributes = cudaPointerAttributes{};
  std::lock_guard<std::mutex> lock(allocations_mutex());
  auto it = allocations().upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it != allocations().begin()) {
    --it;
    if (reinterpret_cast<uintptr_t>(p) < it->first + std::max<size_t>(it->second, 1)) {
      attributes->type = cudaMemoryTypeDevice;
      attributes->devicePointer = const_cast<void*>(p);
      return cudaSuccess;
    }
  }
  attributes->type = cudaMemoryTypeUnregistered;
  attributes->hostPointer = const_cast<void*>(p);
  return cudaSuccess;
}

// ---- the device ----------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : record(cudaErrorInvalidDevice); }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return record(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "normtune CPU emulator (sm_90, %d SMs)", sm_count());
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = sm_count();
  prop->warpSize = normtune::emu::kWarpLanes;
  prop->maxThreadsPerBlock = normtune::emu::kMaxCtaThreads;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->sharedMemPerBlock = 48 << 10;
  prop->sharedMemPerBlockOptin = normtune::kEmuDynamicSmemBytes;
  prop->sharedMemPerMultiprocessor = normtune::emu::kSmemPerSm;
  prop->regsPerBlock = 65536;
  prop->regsPerMultiprocessor = 65536;
  prop->l2CacheSize = 50 << 20;
  prop->totalGlobalMem = kTotalMemory;
  prop->maxGridSize[0] = 0x7FFFFFFF;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return record(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrClusterLaunch: *value = 1; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = sm_count(); return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(normtune::kEmuDynamicSmemBytes); return cudaSuccess;
    default: *value = 0; return record(cudaErrorInvalidValue);
  }
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidClusterSize: return "cudaErrorInvalidClusterSize";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    default: return "cudaError (emulator)";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidClusterSize: return "invalid cluster size";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    default: return "an error of the CPU emulator";
  }
}

// ---- kernels' attributes and occupancy --------------------------------------------------------
cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize &&
      (value < 0 || static_cast<size_t>(value) > normtune::kEmuDynamicSmemBytes)) {
    return record(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void*) {
  *attr = cudaFuncAttributes{};
  attr->maxThreadsPerBlock = normtune::emu::kMaxCtaThreads;
  attr->maxDynamicSharedSizeBytes = static_cast<int>(normtune::kEmuDynamicSmemBytes);
  return cudaSuccess;  // (sharedSizeBytes 0: static shared memory is thread_local here)
}

namespace {
int ctas_per_sm(int threads, size_t smem) {
  if (threads <= 0 || threads > normtune::emu::kMaxCtaThreads || smem > normtune::kEmuDynamicSmemBytes) return 0;
  const int by_threads = 2048 / threads;
  const int by_smem = static_cast<int>(normtune::emu::kSmemPerSm / (smem + 1024));
  return std::max(0, std::min({by_threads, by_smem, 32}));
}
}  // namespace

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void*, int threads, size_t smem) {
  *n = ctas_per_sm(threads, smem);
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void*, int threads, size_t smem,
                                                                   unsigned int) {
  *n = ctas_per_sm(threads, smem);
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveClusters(int* n, const void*, const cudaLaunchConfig_t* config) {
  int cluster = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      cluster = static_cast<int>(config->attrs[i].val.clusterDim.x);
    }
  }
  if (cluster < 1 || cluster > normtune::emu::kMaxClusterSize) {
    *n = 0;
    return record(cudaErrorInvalidClusterSize);
  }
  const int threads = static_cast<int>(config->blockDim.x * config->blockDim.y * config->blockDim.z);
  // Clusters are placed within a GPC (about 16 SMs on sm_90).
  const int per_sm = ctas_per_sm(threads, config->dynamicSmemBytes);
  const int gpcs = std::max(1, sm_count() / 16);
  const int sms_per_gpc = std::min(16, sm_count());
  *n = gpcs * ((sms_per_gpc * per_sm) / cluster);
  return cudaSuccess;
}

// ---- streams, events, graphs ---------------------------------------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* s) {
  *s = reinterpret_cast<cudaStream_t>(new Stream);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete stream_of(s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  Stream* st = stream_of(s);
  if (st == nullptr || st->capturing) return record(cudaErrorInvalidValue);  // (the default stream: refused on GPUs too)
  st->capturing = true;
  st->captured.clear();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  Stream* st = stream_of(s);
  if (st == nullptr || !st->capturing) return record(cudaErrorInvalidValue);
  auto* g = new Graph{std::move(st->captured)};
  st->captured.clear();
  st->capturing = false;
  *graph = reinterpret_cast<cudaGraph_t>(g);
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = reinterpret_cast<cudaGraphExec_t>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  const Graph g = *reinterpret_cast<Graph*>(exec);
  enqueue(stream, [g] {
    for (const auto& op : g.ops) op();
  });
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<Graph*>(graph);
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<Graph*>(exec);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = reinterpret_cast<cudaEvent_t>(new Event);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<Event*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  auto* ev = reinterpret_cast<Event*>(e);
  enqueue(stream, [ev] { ev->at = std::chrono::steady_clock::now(); });
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  *ms = std::chrono::duration<float, std::milli>(reinterpret_cast<Event*>(end)->at -
                                                 reinterpret_cast<Event*>(start)->at)
            .count();
  return cudaSuccess;
}
