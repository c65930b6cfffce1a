// The CPU emulator's own behaviour (NORMTUNE_ENABLE_EMU builds only): what the kernels rely on
// from the hardware, each checked by a small kernel under every schedule the emulator offers,
// and what it does with a hang, a bad launch, a captured graph and (under AddressSanitizer) an
// access outside an allocation.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <vector>

#include <normtune/common/error.h>
#include <normtune/common/platform.h>

namespace normtune::test {
namespace {

using platform::LaunchOptions;

template <typename T>
class Buffer {
 public:
  explicit Buffer(size_t n) : n_(n) { NORMTUNE_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T))); }
  ~Buffer() { (void)cudaFree(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return static_cast<T*>(p_); }
  std::vector<T> host() const {
    std::vector<T> h(n_);
    NORMTUNE_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  void* p_ = nullptr;
  size_t n_;
};

// Each thread stores its index, then after the barrier reads its neighbour's: wrong for some
// thread under any schedule if the barrier let one through early.
__global__ void neighbour_after_barrier(int* out) {
  __shared__ int slots[1024];
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  slots[t] = t + 1000 * static_cast<int>(blockIdx.x);
  __syncthreads();
  out[blockIdx.x * n + t] = slots[(t + 1) % n];
}

TEST(Emulator, SyncthreadsOrdersSharedMemory) {
  Buffer<int> out(3 * 256);
  ASSERT_EQ(platform::launch(neighbour_after_barrier, 3, 256, LaunchOptions{}, nullptr, out.get()), cudaSuccess);
  const std::vector<int> got = out.host();
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 256; ++t) ASSERT_EQ(got[b * 256 + t], (t + 1) % 256 + 1000 * b) << b << " " << t;
}

// The butterfly of reduce.cuh: every lane ends with the warp's sum.
__global__ void warp_sum(float* out) {
  float s = static_cast<float>(threadIdx.x);
  for (int offset = 1; offset < platform::kWarpSize; offset *= 2) s += platform::shfl_xor(s, offset);
  out[threadIdx.x] = s;
}

TEST(Emulator, ShuffleXorButterflyGivesEveryLaneTheWarpSum) {
  Buffer<float> out(128);
  ASSERT_EQ(platform::launch(warp_sum, 1, 128, LaunchOptions{}, nullptr, out.get()), cudaSuccess);
  const std::vector<float> got = out.host();
  for (int t = 0; t < 128; ++t) {
    const int w = t / 32;
    ASSERT_EQ(got[t], static_cast<float>(32 * 32 * w + 496)) << t;  // sum of 32w .. 32w+31
  }
}

// Two groups of 64 threads on their own named barriers: each group waits for itself alone.
__global__ void groups_on_named_barriers(int* out) {
  __shared__ int slots[128];
  const int t = static_cast<int>(threadIdx.x), group = t / 64;
  slots[t] = t;
  platform::group_barrier(1 + group, 64);
  out[t] = slots[group * 64 + (t + 1) % 64];
}

TEST(Emulator, NamedBarriersWaitForTheirGroupAlone) {
  Buffer<int> out(128);
  ASSERT_EQ(platform::launch(groups_on_named_barriers, 1, 128, LaunchOptions{}, nullptr, out.get()), cudaSuccess);
  const std::vector<int> got = out.host();
  for (int t = 0; t < 128; ++t) ASSERT_EQ(got[t], (t / 64) * 64 + (t + 1) % 64) << t;
}

// Every CTA of a cluster writes its rank into slot [rank] of every CTA's shared memory, then
// after one cluster barrier each sums its own slots; the second barrier keeps every CTA's
// shared memory alive until its peers' stores have landed.
__global__ void cluster_slots(int* out, int size) {
  __shared__ int slots[16];
  const int rank = platform::cluster_rank();
  platform::cluster_arrive_relaxed();
  platform::cluster_wait_acquire();
  if (static_cast<int>(threadIdx.x) < size) *platform::cluster_map_shared(&slots[rank], static_cast<int>(threadIdx.x)) = rank + 1;
  platform::cluster_arrive_release();
  platform::cluster_wait_acquire();
  if (threadIdx.x == 0) {
    int s = 0;
    for (int r = 0; r < size; ++r) s += slots[r];
    out[blockIdx.x] = s;
  }
}

TEST(Emulator, ClusterCtasReachEachOthersSharedMemory) {
  for (int size : {2, 4, 16}) {
    Buffer<int> out(2 * size);
    ASSERT_EQ(platform::launch(cluster_slots, 2 * size, 64, LaunchOptions{.cluster = size}, nullptr, out.get(), size),
              cudaSuccess);
    for (int got : out.host()) EXPECT_EQ(got, size * (size + 1) / 2) << size;
  }
}

// ClusterRowExchange's protocol (pipeline.cuh): every CTA pushes one word into slot [rank] of
// every CTA with st.async counted on that CTA's transaction barrier, and waits on its own,
// for three rounds that reuse the barrier (parity 0, 1, 0).
__global__ void cluster_st_async(float* out) {
  __shared__ uint64_t bar;
  __shared__ float slots[4];
  const int rank = platform::cluster_rank(), t = static_cast<int>(threadIdx.x);
  if (t == 0) {
    platform::mbarrier_init(&bar, 1);
    platform::fence_mbarrier_init_cluster();
  }
  platform::cluster_arrive_relaxed();
  platform::cluster_wait_acquire();
  float total = 0;
  for (int round = 0; round < 3; ++round) {
    if (t == 0) platform::mbarrier_arrive_expect_tx(&bar, 4 * sizeof(float));
    if (t < 4) platform::st_async_cluster(&slots[rank], static_cast<float>((rank + 1) * (round + 1)), &bar, t);
    platform::mbarrier_wait_parity(&bar, static_cast<unsigned>(round) & 1u);
    for (int r = 0; r < 4; ++r) total += slots[r];
    // (every CTA has read this round's slots before any is written again)
    platform::cluster_arrive_release();
    platform::cluster_wait_acquire();
  }
  if (t == 0) out[blockIdx.x] = total;
}

TEST(Emulator, TransactionBarriersCountStAsyncAcrossTheCluster) {
  Buffer<float> out(4);
  ASSERT_EQ(platform::launch(cluster_st_async, 4, 32, LaunchOptions{.cluster = 4}, nullptr, out.get()), cudaSuccess);
  for (float got : out.host()) EXPECT_EQ(got, 10.f * (1 + 2 + 3));
}

__global__ void add_one(int* p) { atomicAdd(reinterpret_cast<unsigned*>(p), 1u); }

TEST(Emulator, BadLaunchesAreRefusedWithTheRuntimesErrors) {
  Buffer<int> out(1);
  EXPECT_EQ(platform::launch(add_one, 1, 2048, LaunchOptions{}, nullptr, out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(platform::launch(add_one, 6, 32, LaunchOptions{.cluster = 4}, nullptr, out.get()), cudaErrorInvalidClusterSize);
  EXPECT_EQ(platform::launch(add_one, 1, 32, LaunchOptions{.smem = size_t{1} << 20}, nullptr, out.get()),
            cudaErrorInvalidValue);
  (void)cudaGetLastError();
}

TEST(Emulator, CapturedGraphsReplayTheirLaunchesAndCopies) {
  Buffer<int> counter(1);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(counter.get(), 0, sizeof(int), stream), cudaSuccess);
  ASSERT_EQ(platform::launch(add_one, 5, 64, LaunchOptions{}, stream, counter.get()), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  // Nothing ran while capturing (fresh device memory is not zero).
  EXPECT_NE(counter.host()[0], 320);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(counter.host()[0], 320);
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Thread 0 waits for a flag nobody sets: a hang on the GPU, a message here.
__global__ void waits_forever(int* flag) {
  __shared__ int go;
  if (threadIdx.x == 0) go = *flag;
  __syncthreads();
  if (go == 0 && threadIdx.x == 0) platform::group_barrier(1, 64);  // 32 of 64 threads never come
}

TEST(EmulatorDeathTest, AHangStopsTheProcessNamingTheWait) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Buffer<int> flag(1);
  NORMTUNE_CUDA_CHECK(cudaMemset(flag.get(), 0, sizeof(int)));
  EXPECT_DEATH((void)platform::launch(waits_forever, 1, 64, LaunchOptions{}, nullptr, flag.get()),
               "kernel hang: every thread of CTA \\(0,0,0\\) waits \\(last wait: named barrier\\)");
}

#if defined(__SANITIZE_ADDRESS__)
__global__ void reads_one_past_the_end(const float* in, float* out, int n) {
  if (threadIdx.x == 0) out[0] = in[n];
}

TEST(EmulatorDeathTest, AnAccessPastAnAllocationIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Buffer<float> in(100), out(1);
  EXPECT_DEATH((void)platform::launch(reads_one_past_the_end, 1, 32, LaunchOptions{}, nullptr, in.get(), out.get(), 100),
               "AddressSanitizer: heap-buffer-overflow");
}
#endif

}  // namespace
}  // namespace normtune::test
