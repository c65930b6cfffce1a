// The cuDNN backend on the GPU: forward and backward through the C API with the backend
// switched on (TransformerEngine's functions), against the same fp64 references and
// tolerances as the native kernels; plans cached; unsupported calls rejected before any cuDNN
// call; eight threads at once. Skips without a GPU, without the backend in this build, or
// without libcudnn (NORMTUNE_CUDNN_LIBRARY names it when it is not on the loader's path).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include <normtune/common/device_info.h>
#include <normtune/normalization.h>
#include <normtune/normtune.h>

#include "bwd_case.h"
#include "fwd_case.h"
#include "protocol.h"
#include "normalization/src/cudnn/backend_choice.h"
#include "normalization/src/cudnn/cudnn_library.h"
#include "normalization/src/cudnn/cudnn_norm.h"

// Heap allocations of the thread that counts (HitPathAllocatesNothingOfItsOwn): this program's malloc,
// calloc and realloc, which every library of the process reaches (libnormtune and the frontend
// in it, libcudnn, the C++ runtime's operator new), counted and handed to the C library's
// (dlsym(RTLD_NEXT): while it looks them up, what it allocates comes from a static buffer).
namespace {
thread_local bool t_counting = false;
thread_local bool t_in_count = false;
// By the library whose code asked: the first caller up the stack that is not the C or C++
// runtime (malloc is this program's, operator new the C++ runtime's).
struct Allocations {
  size_t normtune = 0;  // libnormtune (the frontend's code is compiled into it)
  size_t cudnn = 0;     // libcudnn*
  size_t other = 0;
  char other_name[128] = {};  // the first other library seen
  // The stacks of the first few (for the failure message: offsets into the libraries).
  static constexpr int kStacks = 6, kFrames = 20;
  void* stacks[kStacks][kFrames] = {};
  int depth[kStacks] = {};
  // Prints the stacks kept (backtrace_symbols_fd: no allocation) to stderr.
  void print() const {
    for (int i = 0; i < kStacks && depth[i] > 0; ++i) {
      std::fprintf(stderr, "allocation %d:\n", i);
      backtrace_symbols_fd(stacks[i], depth[i], 2);
    }
  }
};
thread_local Allocations t_allocations;
bool is_runtime(const char* file) {
  return std::strstr(file, "libc.so") != nullptr || std::strstr(file, "libstdc++") != nullptr ||
         std::strstr(file, "libgcc_s") != nullptr;
}
void count_allocation() {
  if (!t_counting || t_in_count) return;
  t_in_count = true;
  void* frames[24];
  const int n = backtrace(frames, 24);
  const size_t seen = t_allocations.normtune + t_allocations.cudnn + t_allocations.other;
  if (seen < Allocations::kStacks) {
    t_allocations.depth[seen] = std::min(n, Allocations::kFrames);
    std::memcpy(t_allocations.stacks[seen], frames, sizeof(void*) * t_allocations.depth[seen]);
  }
  const char* file = "?";
  for (int i = 1; i < n; ++i) {  // (frame 0: count_allocation's caller, this program's malloc)
    Dl_info info;
    if (dladdr(frames[i], &info) != 0 && info.dli_fname != nullptr && !is_runtime(info.dli_fname) &&
        std::strstr(info.dli_fname, "normtune_test_gpu_cudnn") == nullptr) {
      file = info.dli_fname;
      break;
    }
  }
  if (std::strstr(file, "libnormtune") != nullptr) {
    ++t_allocations.normtune;
  } else if (std::strstr(file, "libcudnn") != nullptr) {
    ++t_allocations.cudnn;
  } else {
    if (t_allocations.other++ == 0)
      std::snprintf(t_allocations.other_name, sizeof(t_allocations.other_name), "%s", file);
  }
  t_in_count = false;
}
void* (*real_malloc)(size_t) = nullptr;
void* (*real_calloc)(size_t, size_t) = nullptr;
void* (*real_realloc)(void*, size_t) = nullptr;
void (*real_free)(void*) = nullptr;
bool resolving = false;
alignas(16) char boot[16384];
size_t boot_used = 0;
void* boot_alloc(size_t n) {
  n = (n + 15) / 16 * 16;
  if (boot_used + n > sizeof(boot)) std::abort();
  void* p = boot + boot_used;
  boot_used += n;
  return p;  // (zeroed: static storage, never reused)
}
bool from_boot(const void* p) {
  return p >= boot && p < boot + sizeof(boot);
}
// True once the C library's functions are known; false while looking them up.
bool resolved() {
  if (real_free != nullptr) return true;
  if (resolving) return false;
  resolving = true;
  real_malloc = reinterpret_cast<void* (*)(size_t)>(dlsym(RTLD_NEXT, "malloc"));
  real_calloc = reinterpret_cast<void* (*)(size_t, size_t)>(dlsym(RTLD_NEXT, "calloc"));
  real_realloc = reinterpret_cast<void* (*)(void*, size_t)>(dlsym(RTLD_NEXT, "realloc"));
  real_free = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_NEXT, "free"));
  resolving = false;
  if (real_malloc == nullptr || real_calloc == nullptr || real_realloc == nullptr ||
      real_free == nullptr)
    std::abort();
  return true;
}
}  // namespace
extern "C" {
void* malloc(size_t n) {
  if (!resolved()) return boot_alloc(n);
  count_allocation();
  return real_malloc(n);
}
void* calloc(size_t n, size_t size) {
  if (!resolved()) return boot_alloc(n * size);
  count_allocation();
  return real_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  if (!resolved() || from_boot(p)) {
    void* q = malloc(n);
    if (p != nullptr && q != nullptr)
      std::memmove(q, p, std::min<size_t>(n, boot + sizeof(boot) - static_cast<char*>(p)));
    return q;
  }
  count_allocation();
  return real_realloc(p, n);
}
void free(void* p) {
  if (p == nullptr || from_boot(p)) return;
  if (resolved()) real_free(p);
}
}

namespace normtune::test {
namespace {

// The heap allocations fn makes on this thread.
template <typename Fn>
Allocations allocations_of(Fn&& fn) {
  void* warm[4];
  (void)backtrace(warm, 4);  // (its first call loads libgcc_s: not while counting)
  t_allocations = {};
  t_counting = true;
  fn();
  t_counting = false;
  return t_allocations;
}

using ::testing::HasSubstr;

class CudnnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    NORMTUNE_REQUIRE_GPU();
    bool built = false;
    for (const KernelEntry* e : kernel_registry().entries()) built = built || e->backend == Backend::kCudnn;
    if (!built) GTEST_SKIP() << "this build has no cuDNN backend (NORMTUNE_ENABLE_CUDNN)";
    std::string why;
    if (cudnn_library(&why) == nullptr) GTEST_SKIP() << why;
    nvte_enable_cudnn_norm_fwd(true);
    nvte_enable_cudnn_norm_bwd(true);
  }
  void TearDown() override { reset_cudnn_norm_switches(); }
};

// A forward (z of x's type) or backward case of the reference suites.
template <typename Case>
Case case_of(NormType norm, DType w, DType t, size_t rows, size_t hidden, uint32_t seed) {
  Case c;
  c.norm = norm;
  c.wtype = w;
  c.itype = t;
  if constexpr (std::is_same_v<Case, FwdCase>) c.otype = t;
  c.rows = rows;
  c.hidden = hidden;
  c.seed = seed;
  return c;
}

bool ran_cudnn(const KernelChoice& k) { return k.name.find("_cudnn") != std::string::npos && !k.tuned; }

// Every case of the reference suites: both norms, four (gamma, x) type pairs, three hidden
// sizes, 1 and 37 rows, zero-centered gamma or not.
template <typename Fn>
void for_each_case(Fn&& fn) {
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    for (const auto& [w, t] : {std::tuple{DType::kBFloat16, DType::kBFloat16}, std::tuple{DType::kFloat32, DType::kBFloat16},
                               std::tuple{DType::kFloat16, DType::kFloat16}, std::tuple{DType::kFloat32, DType::kFloat32}}) {
      for (size_t hidden : {size_t{128}, size_t{1024}, size_t{7168}}) {
        for (size_t rows : {size_t{1}, size_t{37}}) {
          for (bool zc : {false, true}) fn(norm, w, t, hidden, rows, zc, static_cast<uint32_t>(hidden + rows + (zc ? 7 : 0)));
        }
      }
    }
  }
}

// Runs every case as a Case (FwdCase or BwdCase) through `run`, expecting the cuDNN entry.
template <typename Case, typename Run>
void run_every_case(Run&& run) {
  for_each_case([&](NormType norm, DType w, DType t, size_t hidden, size_t rows, bool zc, uint32_t seed) {
    Case c = case_of<Case>(norm, w, t, rows, hidden, seed);
    c.zero_centered_gamma = zc;
    SCOPED_TRACE(c.describe());
    const auto r = run(c);
    EXPECT_TRUE(ran_cudnn(r.kernel)) << r.kernel.name;
  });
}

TEST_F(CudnnGpu, ForwardMatchesTheReference) {
  run_every_case<FwdCase>([](const FwdCase& c) { return run_fwd(c); });
}

TEST_F(CudnnGpu, BackwardMatchesTheReference) {
  run_every_case<BwdCase>([](const BwdCase& c) { return run_bwd(c); });
}

// A per-tensor FP8 z through cuDNN's graph (the norm, a multiply by the scale, an AMAX
// reduction) and the finishing step: codes within a code of value x scale, amax the max
// |value|, scale_inv exactly 1 / scale (FwdProblem::check, as for the native kernels), for
// both norms, e4m3 and e5m2, the type pairs the native kernels take it with, zero-centered
// gamma or not. Then, with z's amax not zeroed, a second call keeps the max (as the native
// kernels do), and the native and cuDNN codes are checked against the same reference.
TEST_F(CudnnGpu, Fp8ForwardMatchesTheReference) {
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (DType o : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
        for (size_t hidden : {size_t{1024}, size_t{7168}}) {
          for (size_t rows : {size_t{1}, size_t{37}}) {
            for (bool zc : {false, true}) {
              FwdCase c = case_of<FwdCase>(norm, t, t, rows, hidden, static_cast<uint32_t>(hidden + rows + 3));
              c.otype = o;
              c.zero_centered_gamma = zc;
              SCOPED_TRACE(c.describe());
              const FwdResult r = run_fwd(c);
              EXPECT_TRUE(ran_cudnn(r.kernel)) << r.kernel.name;
              EXPECT_THAT(r.kernel.name, HasSubstr(dtype_name(o)));
              if (HasFailure()) return;
            }
          }
        }
      }
    }
  }
  // Codes that saturate (scale 300: values of a few units pass 448 and 57344 only for e4m3;
  // scale 30000 for e5m2), as the native kernels' saturating conversion; a NaN in x (its row
  // NaN, its codes NaN, the amax the max over the other rows, as the native kernels).
  for (DType o : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    FwdCase c = case_of<FwdCase>(NormType::kRMSNorm, DType::kBFloat16, DType::kBFloat16, 37, 4096, 21);
    c.otype = o;
    c.fp8_scale = o == DType::kFloat8E4M3 ? 300.0 : 30000.0;
    SCOPED_TRACE(c.describe());
    EXPECT_TRUE(ran_cudnn(run_fwd(c).kernel));
    FwdCase nan = case_of<FwdCase>(NormType::kLayerNorm, DType::kBFloat16, DType::kBFloat16, 9, 2048, 23);
    nan.otype = o;
    nan.x_specials = {{3 * 2048 + 17, std::nan("")}};
    SCOPED_TRACE(nan.describe());
    EXPECT_TRUE(ran_cudnn(run_fwd(nan).kernel));
  }
  // amax is folded with a max into what the buffer holds: a larger value is kept, a smaller
  // one replaced by this call's (the native kernels' meaning); z the same bits run to run.
  FwdCase c = case_of<FwdCase>(NormType::kRMSNorm, DType::kBFloat16, DType::kBFloat16, 37, 4096, 5);
  c.otype = DType::kFloat8E4M3;
  const FwdProblem p(c);
  call_with_workspace([&](NVTETensor ws) { p.call(ws); });
  const FwdResult first = p.outputs();
  p.check(first);
  p.set_amax(1000.0);
  call_with_workspace([&](NVTETensor ws) { p.call(ws); });
  const FwdResult kept = p.outputs();
  EXPECT_EQ(kept.amax.get(0), 1000.0) << "a larger amax in the buffer is kept";
  EXPECT_TRUE(same_bits(kept.z, first.z, "z run to run"));
  p.set_amax(0.5);
  call_with_workspace([&](NVTETensor ws) { p.call(ws); });
  EXPECT_TRUE(same_bits(p.outputs().amax, first.amax, "a smaller amax in the buffer: this call's"));
}

TEST_F(CudnnGpu, PlansAreBuiltOncePerShape) {
  FwdCase c;
  c.hidden = 2048;
  c.rows = 19;
  run_fwd(c);  // built here (or earlier) and cached
  const CudnnCacheStats before = cudnn_plan_cache_stats();
  for (int i = 0; i < 5; ++i) run_fwd(c);
  const CudnnCacheStats after = cudnn_plan_cache_stats();
  EXPECT_EQ(after.builds, before.builds) << "a cached shape was built again";
  EXPECT_GE(after.hits, before.hits + 10);  // the query and the call, five times
  EXPECT_LE(after.size, after.capacity);
}

// The plan cache's hit path allocates nothing of its own: once a shape's plan is built and a
// call's tensors have been seen (the variant pack cuDNN runs them with is kept), calls with the
// same tensors make no heap allocation in normtune on the calling thread: no graph build, none
// of the frontend's maps, no new variant pack; forward and backward of both norms,
// zero-centered gamma (its constant passed by value) included. The outputs stay the reference's,
// also when the same buffers come with another epsilon (the value is part of what a kept pack is
// for) and when other buffers of the same shape come between (a pack of their own, then the first
// one's).
TEST_F(CudnnGpu, HitPathAllocatesNothingOfItsOwn) {
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    for (bool zc : {false, true}) {
      FwdCase fc =
          case_of<FwdCase>(norm, DType::kBFloat16, DType::kBFloat16, 37, 4096, zc ? 31 : 30);
      fc.zero_centered_gamma = zc;
      BwdCase bc =
          case_of<BwdCase>(norm, DType::kBFloat16, DType::kBFloat16, 37, 4096, zc ? 33 : 32);
      bc.zero_centered_gamma = zc;
      FwdProblem f(fc);
      BwdProblem b(bc);
      FwdCase other_case = fc;
      other_case.seed += 100;
      FwdProblem other(other_case);
      SCOPED_TRACE(fc.describe());
      // The workspace per the two-call protocol, kept for the calls below.
      auto workspace_for = [](const auto& problem) {
        TensorHandle query;
        problem.call(query.get());
        return answered_workspace_bytes(query);
      };
      const size_t fbytes = workspace_for(f), bbytes = workspace_for(b);
      ASSERT_GE(fbytes, 1u);
      ASSERT_GE(bbytes, 1u);
      DeviceBuffer fmem(fbytes), bmem(bbytes), omem(fbytes);
      TensorHandle fws(fmem.get(), {fbytes}, DType::kByte), bws(bmem.get(), {bbytes}, DType::kByte),
          ows(omem.get(), {fbytes}, DType::kByte);
      f.call(fws.get());  // the plans are built (by the queries) and these tensors' packs made
      b.call(bws.get());
      const Allocations made = allocations_of([&] {
        for (int i = 0; i < 20; ++i) {
          f.call(fws.get());
          b.call(bws.get());
        }
      });
      // (40 calls of cached plans with tensors seen before.) cuDNN's execution and the driver's
      // launches allocate inside those libraries (the H200 with cuDNN 9.14: about 7.5 and 2 per
      // call): reported, not normtune's to avoid.
      EXPECT_EQ(made.normtune, 0u) << "heap allocations by normtune (and the cuDNN frontend in it)";
      if (made.normtune > 0) made.print();
      std::printf(
          "40 calls: %zu heap allocations in libcudnn, %zu elsewhere (%s), none in normtune\n",
          made.cudnn, made.other, made.other > 0 ? made.other_name : "-");
      const FwdResult fr = f.outputs();
      EXPECT_TRUE(ran_cudnn(fr.kernel)) << fr.kernel.name;
      f.check(fr);
      const BwdResult br = b.outputs();
      EXPECT_TRUE(ran_cudnn(br.kernel)) << br.kernel.name;
      b.check(br);
      // Another epsilon with the same buffers, other buffers, then the first again.
      f.set_epsilon(0.5f);
      f.call(fws.get());
      f.check(f.outputs());
      other.call(ows.get());
      other.check(other.outputs());
      f.set_epsilon(1e-5f);
      f.call(fws.get());
      f.check(f.outputs());
      if (HasFailure()) return;
    }
  }
}

// multiprocessorCount below the device's SMs (TransformerEngine's sm_margin) is the graphs' SM
// target, as in TE's cuDNN path: the outputs as the reference's, and a plan of its own (built
// once), beside the plan of all SMs. (Whether cuDNN then keeps to the target is not observed
// here; before cuDNN 9.4 the target is not set, and the plans differ only by key.)
TEST_F(CudnnGpu, MultiprocessorCountIsTheGraphsSmTarget) {
  if (device_info(current_device()).sm_count <= 16) GTEST_SKIP() << "16 SMs are all of this GPU's";
  FwdCase c;
  c.hidden = 3072;
  c.rows = 29;
  EXPECT_TRUE(ran_cudnn(run_fwd(c).kernel));  // all SMs: built here (or earlier) and cached
  const CudnnCacheStats before = cudnn_plan_cache_stats();
  c.multiprocessor_count = 16;
  EXPECT_TRUE(ran_cudnn(run_fwd(c).kernel));
  const CudnnCacheStats after = cudnn_plan_cache_stats();
  EXPECT_EQ(after.builds, before.builds + 1) << "16 SMs ran the plan of all SMs";
  run_fwd(c);
  EXPECT_EQ(cudnn_plan_cache_stats().builds, after.builds) << "the 16-SM plan was built again";
  // The backward at 66 SMs: a plan of its own too. (At 16, cuDNN 9.14 has no backward engine
  // for this shape: its finalize kernel wants 24 CTAs, more than the target. Asked for by
  // TE's switch, that is an error, as in TE's cuDNN path, and the error names the target.)
  BwdCase b;
  b.hidden = 3072;
  b.rows = 29;
  b.multiprocessor_count = 66;
  const CudnnCacheStats before_bwd = cudnn_plan_cache_stats();
  EXPECT_TRUE(ran_cudnn(run_bwd(b).kernel));
  EXPECT_EQ(cudnn_plan_cache_stats().builds, before_bwd.builds + 1) << "66 SMs ran another plan";
  b.multiprocessor_count = 16;
  try {
    EXPECT_TRUE(ran_cudnn(run_bwd(b).kernel));
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("for multiprocessorCount 16"), std::string::npos)
        << e.what();
  }
}

// A zero-centered case of 37 x 1024 (FwdCase or BwdCase), gamma + 1 in fp32 or rounded to
// gamma's dtype.
template <typename Case>
Case zero_centered_case(NormType norm, DType t, uint32_t seed, bool gamma_in_wtype) {
  Case c = case_of<Case>(norm, t, t, 37, 1024, seed);
  c.zero_centered_gamma = true;
  c.gamma_in_wtype = gamma_in_wtype;
  return c;
}

// How many elements of a zero-centered forward's z equal the reference rounded to z's dtype,
// [0] with gamma + 1 in fp32, [1] with gamma + 1 rounded to gamma's dtype.
std::array<size_t, 2> z_follows(const FwdCase& c, const FwdResult& r) {
  const HostArray x = case_x(c), gamma = case_gamma(c), beta = case_beta(c);
  const reference::FwdOutputs want[2] = {
      reference_fwd(c.norm, c.rows, c.hidden, x, nullptr, gamma, beta, true, c.itype),
      reference_fwd(c.norm, c.rows, c.hidden, x, nullptr, gamma_plus_one_in_wtype(gamma), beta,
                    false, c.itype)};
  std::array<size_t, 2> follows = {0, 0};
  HostArray rounded(c.otype, 1);
  for (size_t i = 0; i < r.z.count; ++i) {
    for (int k = 0; k < 2; ++k) {
      rounded.set(0, want[k].z[i]);
      follows[k] += r.z.get(i) == rounded.get(0);
    }
  }
  return follows;
}

// TransformerEngine's nvte_enable_zero_centered_gamma_in_weight_dtype, with TE's meaning: on,
// the cuDNN graphs round gamma + 1 to gamma's (16-bit) dtype, forward and backward. Each call
// is checked against the reference of the gamma it should use (the suites' check). Since
// gamma + 1 rounded to bf16 (fp16) moves by up to as much as z's own rounding step, that check
// alone cannot tell the settings apart, so: the forward's z must equal its setting's reference
// rounded to z's dtype in 90% of the elements or more (fp32 against fp64 arithmetic flips a
// rounding now and then), and the other setting's in at least 5% fewer (either way round:
// each setting a plan of its own); the backward's dx must differ between the two settings in
// 5% of the elements or more. The native kernels do not read the switch (as TE's own
// kernels): with cuDNN switched off, the fp32 sum.
TEST_F(CudnnGpu, ZeroCenteredGammaInWeightDtype) {
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    for (DType t : {DType::kBFloat16, DType::kFloat16}) {
      HostArray dx[2];
      for (int on : {1, 0}) {
        nvte_enable_zero_centered_gamma_in_weight_dtype(on == 1);
        const FwdCase c = zero_centered_case<FwdCase>(norm, t, 41, on == 1);
        SCOPED_TRACE(c.describe());
        const FwdResult r = run_fwd(c);
        EXPECT_TRUE(ran_cudnn(r.kernel)) << r.kernel.name;
        const std::array<size_t, 2> follows = z_follows(c, r);
        const size_t n = r.z.count;
        EXPECT_GE(follows[on], n * 9 / 10) << "z follows the setting's gamma";
        EXPECT_LE(follows[1 - on] + n / 20, follows[on])
            << "z follows the other setting's gamma as well";

        const BwdCase b = zero_centered_case<BwdCase>(norm, t, 43, on == 1);
        SCOPED_TRACE(b.describe());
        const BwdResult rb = run_bwd(b);
        EXPECT_TRUE(ran_cudnn(rb.kernel)) << rb.kernel.name;
        dx[on] = rb.dx;
      }
      size_t differ = 0;
      for (size_t i = 0; i < dx[0].count; ++i) differ += dx[0].get(i) != dx[1].get(i);
      EXPECT_GE(differ, dx[0].count / 20)
          << "dx is the same with gamma + 1 in fp32 and in gamma's dtype";
    }
  }
  nvte_enable_zero_centered_gamma_in_weight_dtype(true);
  nvte_enable_cudnn_norm_fwd(false);
  FwdCase native =
      case_of<FwdCase>(NormType::kRMSNorm, DType::kBFloat16, DType::kBFloat16, 37, 1024, 47);
  native.zero_centered_gamma = true;  // (gamma_in_wtype false: checked against the fp32 sum)
  const FwdResult r = run_fwd(native);
  EXPECT_FALSE(ran_cudnn(r.kernel)) << r.kernel.name;
  const std::array<size_t, 2> follows = z_follows(native, r);
  EXPECT_GE(follows[0], r.z.count * 9 / 10) << "the native kernel's z follows gamma + 1 in fp32";
  EXPECT_LE(follows[1] + r.z.count / 20, follows[0]);
}

TEST_F(CudnnGpu, UnsupportedCallsAreClearErrors) {
  auto expect_error = [](auto&& call, const char* needle) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("nvte_enable_cudnn_norm_"));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  FwdCase add;
  add.fused_add = true;
  expect_error([&] { run_fwd(add); }, "does not implement");
  FwdCase amax;
  amax.with_amax = true;
  expect_error([&] { run_fwd(amax); }, "amax");
  FwdCase misaligned;
  misaligned.x_offset = 2;
  expect_error([&] { run_fwd(misaligned); }, "16-byte aligned");
  // The fused add's backward: cuDNN 9.14 builds a graph of the norm's backward with its dx
  // summed with the added gradient by a pointwise add, but its norm backward engine then
  // refuses to run with that dx inside the graph ("nullptr == bwdParams.dx": dx must be in
  // memory), so there is no fused graph to offer; TransformerEngine's cuDNN path refuses it too.
  BwdCase bwd_add;
  bwd_add.add = true;
  expect_error([&] { run_bwd(bwd_add); }, "not the fused add, forward or backward");
  BwdCase in_place;
  in_place.in_place = true;
  expect_error([&] { run_bwd(in_place); }, "dx over dz (in place)");
  // The native kernels again once the switch is off.
  reset_cudnn_norm_switches();
  EXPECT_FALSE(ran_cudnn(run_fwd(add).kernel));
}

// TransformerEngine's two-call protocol with each call on a new thread (protocol.h), whose
// first GPU work is the cuDNN call: the primary context must be bound for cuDNN's launches.
TEST_F(CudnnGpu, TheWorkspaceProtocolOnAFreshThread) {
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    const FwdProblem p(case_of<FwdCase>(norm, DType::kBFloat16, DType::kBFloat16, 37, 4096, 4133));
    EXPECT_TRUE(ran_cudnn(check_workspace_protocol(p).kernel));
    const BwdProblem q(case_of<BwdCase>(norm, DType::kBFloat16, DType::kBFloat16, 37, 4096, 4137));
    EXPECT_TRUE(ran_cudnn(check_workspace_protocol(q).kernel));
  }
}

TEST_F(CudnnGpu, EightThreadsAtOnce) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 4; ++i) {
          FwdCase c;
          c.norm = t % 2 == 0 ? NormType::kRMSNorm : NormType::kLayerNorm;
          c.hidden = 1024 + 512 * (t % 3);  // shared and distinct plans
          c.rows = 33;
          c.seed = static_cast<uint32_t>(100 * t + i);
          const FwdResult r = run_fwd(c, /*check=*/false);
          if (!ran_cudnn(r.kernel)) ++failures;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  // And the results of such a shape, alone, against the reference.
  FwdCase c;
  c.norm = NormType::kLayerNorm;
  c.hidden = 1536;
  c.rows = 33;
  run_fwd(c);
}

// Two streams of one thread: forward and backward calls routed to cuDNN, issued alternately on
// two non-blocking streams (each problem with its own buffers and workspace, so they may
// overlap on the device), then checked: every result against the fp64 reference. The device
// handle is re-bound to each call's stream (cudnnSetStream under its lock), so a call's graph
// runs on its own stream, after the work queued there before it.
TEST_F(CudnnGpu, TwoStreamsOfOneThread) {
  cudaStream_t streams[2];
  for (cudaStream_t& s : streams) NORMTUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<std::unique_ptr<FwdProblem>> fwd;
  std::vector<std::unique_ptr<BwdProblem>> bwd;
  for (int i = 0; i < 4; ++i) {
    const NormType norm = i % 2 == 0 ? NormType::kRMSNorm : NormType::kLayerNorm;
    fwd.push_back(std::make_unique<FwdProblem>(
        case_of<FwdCase>(norm, DType::kBFloat16, DType::kBFloat16, 64 + 16 * i, 1024 + 1024 * i, 300 + i)));
    bwd.push_back(std::make_unique<BwdProblem>(
        case_of<BwdCase>(norm, DType::kFloat32, DType::kBFloat16, 48 + 16 * i, 2048 + 512 * i, 400 + i)));
  }
  // Each problem's workspace, sized by its query (on the default stream: no work).
  auto workspace_for = [](const auto& p) {
    TensorHandle query;
    p.call(query.get());
    return std::make_unique<DeviceBuffer>(answered_workspace_bytes(query));
  };
  std::vector<std::unique_ptr<DeviceBuffer>> fwd_ws, bwd_ws;
  for (const auto& p : fwd) fwd_ws.push_back(workspace_for(*p));
  for (const auto& p : bwd) bwd_ws.push_back(workspace_for(*p));
  // (The problems' setup, copies and poisons, ran on the legacy stream, which non-blocking
  // streams do not wait for.)
  NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
  for (size_t i = 0; i < fwd.size(); ++i) {
    cudaStream_t s = streams[i % 2];
    TensorHandle fws(fwd_ws[i]->get(), {fwd_ws[i]->bytes()}, DType::kByte);
    fwd[i]->call(fws.get(), s);
    EXPECT_TRUE(ran_cudnn(last_kernel())) << last_kernel().name;
    TensorHandle bws(bwd_ws[i]->get(), {bwd_ws[i]->bytes()}, DType::kByte);
    bwd[i]->call(bws.get(), streams[(i + 1) % 2]);
    EXPECT_TRUE(ran_cudnn(last_kernel())) << last_kernel().name;
  }
  for (cudaStream_t s : streams) NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(s));
  for (const auto& p : fwd) {
    SCOPED_TRACE(p->params().describe());
    p->check(p->outputs());
  }
  for (const auto& p : bwd) {
    SCOPED_TRACE(p->params().describe());
    p->check(p->outputs());
  }
  for (cudaStream_t s : streams) NORMTUNE_CUDA_CHECK(cudaStreamDestroy(s));
}

// Under NORMTUNE_BACKEND=auto (TransformerEngine's switches untouched), a key whose tuned line
// names cuDNN runs cuDNN's plan, reported as tuned, with the reference's results; with TE's
// switch off (nvte_enable_cudnn_norm_fwd/bwd(false)) the same call runs a native kernel.
TEST_F(CudnnGpu, TunedLinesNamingCudnnChooseItUnderAuto) {
  size_t checked = 0;
  for (const TunedBackendLine* line : kernel_registry().tuned_backend_lines()) {
    if (line->arch != current_arch_family() || line->backend != Backend::kCudnn) continue;
    const NormKey& k = line->key;
    SCOPED_TRACE(line->name);
    // A call of the line's row class (a decode line: a few rows; else just above them).
    const size_t rows = k.rows == RowClass::kDecode ? 3 : kDecodeMaxRows + 3;
    auto run = [&]() -> KernelChoice {
      if (is_backward(k.stage)) return run_bwd(case_of<BwdCase>(k.norm, k.wtype, k.itype, rows, k.hidden_size, k.hidden_size + 11)).kernel;
      FwdCase c = case_of<FwdCase>(k.norm, k.wtype, k.itype, rows, k.hidden_size, k.hidden_size + 13);
      c.otype = k.otype;  // (a per-tensor FP8 line: z in FP8)
      return run_fwd(c).kernel;
    };
    reset_cudnn_norm_switches();  // auto
    const KernelChoice chosen = run();
    EXPECT_EQ(chosen.backend, "cudnn") << chosen.name;
    EXPECT_TRUE(chosen.tuned) << chosen.name;
    nvte_enable_cudnn_norm_fwd(false);
    nvte_enable_cudnn_norm_bwd(false);
    const KernelChoice native = run();
    EXPECT_EQ(native.backend, "native") << native.name;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no tuned line names cuDNN on this device";
}

// A key whose tuned line names cuDNN, under auto: a size query made without data (TE's JAX
// binding: null pointers, which pass cuDNN's alignment check) and the real call with data that
// cuDNN refuses (x 2 bytes off its 16-byte alignment: the native kernel runs) must get the same
// answer, and the real call run with exactly it (answered_workspace: the larger of cuDNN's and
// the native kernels' needs). With aligned data cuDNN runs, with the same answer.
TEST_F(CudnnGpu, TunedCudnnLinesAnswerOneWorkspaceWhereverTheDataIs) {
  size_t checked = 0;
  for (const TunedBackendLine* line : kernel_registry().tuned_backend_lines()) {
    if (line->arch != current_arch_family() || line->backend != Backend::kCudnn) continue;
    const NormKey& k = line->key;
    if (k.stage != Stage::kForward && k.stage != Stage::kBackward) continue;
    if (is_fp8(k.otype)) continue;  // (the data-less query below passes no FP8 scale buffers)
    const size_t rows = k.rows == RowClass::kDecode ? 3 : kDecodeMaxRows + 3;
    const DType o = k.otype;
    reset_cudnn_norm_switches();  // auto
    // Off cuDNN's 16-byte alignment by one element (x's element size: still a valid tensor).
    for (const size_t offset : {size_t{0}, dtype_storage_bytes(k.itype, 1)}) {
      const std::vector<size_t> rh{rows, k.hidden_size}, h{k.hidden_size}, r{rows};
      TensorHandle x(nullptr, rh, k.itype), z(nullptr, rh, o), g(nullptr, h, k.wtype), b(nullptr, h, k.wtype),
          dz(nullptr, rh, k.itype), dx(nullptr, rh, k.itype), dg(nullptr, h, k.wtype), db(nullptr, h, k.wtype),
          mu(nullptr, r, DType::kFloat32), rs(nullptr, r, DType::kFloat32);
      TensorHandle without_data, with_data;
      const bool ln = k.norm == NormType::kLayerNorm;
      KernelChoice ran;
      if (k.stage == Stage::kForward) {
        FwdCase c = case_of<FwdCase>(k.norm, k.wtype, k.itype, rows, k.hidden_size, k.hidden_size + 17);
        c.otype = o;
        c.x_offset = offset;
        SCOPED_TRACE(line->name + " " + c.describe());
        if (ln) {
          nvte_layernorm_fwd(x, g, b, 1e-5f, z, mu, rs, without_data, 0, false, nullptr);
        } else {
          nvte_rmsnorm_fwd(x, g, 1e-5f, z, rs, without_data, 0, false, nullptr);
        }
        const FwdProblem p(c);
        p.call(with_data.get());
        EXPECT_EQ(answered_workspace_bytes(without_data), answered_workspace_bytes(with_data));
        check_workspace_protocol(p);
        ran = run_fwd(c).kernel;
      } else {
        BwdCase c = case_of<BwdCase>(k.norm, k.wtype, k.itype, rows, k.hidden_size, k.hidden_size + 19);
        c.x_offset = offset;
        SCOPED_TRACE(line->name + " " + c.describe());
        if (ln) {
          nvte_layernorm_bwd(dz, x, mu, rs, g, dx, dg, db, without_data, 0, false, nullptr);
        } else {
          nvte_rmsnorm_bwd(dz, x, rs, g, dx, dg, without_data, 0, false, nullptr);
        }
        const BwdProblem p(c);
        p.call(with_data.get());
        EXPECT_EQ(answered_workspace_bytes(without_data), answered_workspace_bytes(with_data));
        check_workspace_protocol(p);
        ran = run_bwd(c).kernel;
      }
      EXPECT_EQ(ran.backend, offset == 0 ? "cudnn" : "native") << ran.name;
      if (HasFailure()) return;
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no tuned line names cuDNN on this device";
}

}  // namespace
}  // namespace normtune::test
