// Launchers for the forward kernels: the general entry (plans the layout at run time) and the
// tuned entries (layout fixed at compile time from a table line).
#pragma once

#include <algorithm>

#include <normtune/common/error.h>

#include "kernels/norm_fwd.cuh"
#include "launch_util.cuh"
#include "norm_fwd_plan.h"

namespace normtune {

template <typename Traits, int kVec>
bool fwd_vector_aligned(const FwdParams& p) {
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  using O = typename Traits::Output;
  constexpr auto ok = aligned_to;
  return p.hidden % kVec == 0 && ok(p.x, alignof(Vec<I, kVec>)) &&
         ok(p.residual, alignof(Vec<I, kVec>)) && ok(p.residual_out, alignof(Vec<I, kVec>)) &&
         ok(p.gamma, alignof(Vec<W, kVec>)) && ok(p.beta, alignof(Vec<W, kVec>)) &&
         ok(p.z, alignof(Vec<O, kVec>));
}

template <typename Traits, typename Shape>
void launch_fwd(const FwdArgs& args, const FwdPlan& plan, cudaStream_t stream) {
  FwdParams p = args.params;
  p.threads_per_row = plan.threads_per_row;
  p.ctas_per_row = plan.ctas_per_row;
  if (p.rows == 0) return;
  auto kernel = norm_fwd_kernel<Traits, Shape>;
  const int threads = plan.threads_per_row * plan.rows_per_cta;
  const int64_t tiles = (p.rows + plan.rows_per_cta - 1) / plan.rows_per_cta;
  const int64_t resident =
      static_cast<int64_t>(args.sm_bound) * resident_ctas_per_sm(kernel, threads) / plan.ctas_per_row;
  const int64_t clusters = std::max<int64_t>(1, plan.persistent ? std::min(tiles, resident) : tiles);
  NORMTUNE_CUDA_CHECK(platform::launch(kernel, static_cast<unsigned>(clusters * plan.ctas_per_row),
                                       static_cast<unsigned>(threads), plan.ctas_per_row, stream,
                                       p));
  NORMTUNE_CHECK_LAUNCH();
}

// The general entry of one (types, variant): any hidden size, any alignment.
template <typename Traits>
void run_fwd_general(const void* opaque, cudaStream_t stream) {
  const FwdArgs& args = *static_cast<const FwdArgs*>(opaque);
  using I = typename Traits::Input;
  constexpr int kVec = 16 / sizeof(I);
  const bool aligned = fwd_vector_aligned<Traits, kVec>(args.params);
  const FwdPlan plan =
      forward_plan(args.params.hidden, aligned ? kVec : 1, args.clusters && !platform::kIsHip);
  if (aligned) {
    switch (plan.vecs_per_thread) {
      case 1: return launch_fwd<Traits, FwdShape<kVec, 1>>(args, plan, stream);
      case 2: return launch_fwd<Traits, FwdShape<kVec, 2>>(args, plan, stream);
      case 4: return launch_fwd<Traits, FwdShape<kVec, 4>>(args, plan, stream);
      case 8: return launch_fwd<Traits, FwdShape<kVec, 8>>(args, plan, stream);
      case 0: return launch_fwd<Traits, FwdShape<kVec, 0>>(args, plan, stream);
    }
  } else {
    switch (plan.vecs_per_thread) {
      case 8: return launch_fwd<Traits, FwdShape<1, 8>>(args, plan, stream);
      case 0: return launch_fwd<Traits, FwdShape<1, 0>>(args, plan, stream);
    }
  }
  NORMTUNE_ERROR("internal: no forward kernel variant for plan vecs_per_thread=",
                 plan.vecs_per_thread, " aligned=", aligned);
}

// A tuned entry: hidden size and layout fixed at compile time; needs 16-byte aligned data.
template <typename Traits, int kHidden, int kN, int kG, int kC, int kR, bool kPersistent>
struct TunedFwd {
  using I = typename Traits::Input;
  static constexpr int kVec = 16 / sizeof(I);
  static_assert(kHidden % kVec == 0, "a tuned hidden size must be a multiple of the vector");
  static_assert(kN >= 1 && kN * kG * kC * kVec >= kHidden, "the tuned layout does not cover the row");
  static_assert(kG * kR <= kMaxCtaThreads && kC <= 8 && (kC == 1 || kR == 1),
                "at most 512 threads per CTA, 8 CTAs per row, one row per CTA in a cluster");

  static const char* can_implement(const void* opaque) {
    const FwdArgs& args = *static_cast<const FwdArgs*>(opaque);
    if (!fwd_vector_aligned<Traits, kVec>(args.params)) return "data is not 16-byte aligned";
    if (kC > 1 && !args.clusters) return "the device cannot launch thread-block clusters";
    return nullptr;
  }
  static void run(const void* opaque, cudaStream_t stream) {
    const FwdArgs& args = *static_cast<const FwdArgs*>(opaque);
    const FwdPlan plan{kN, kG, kC, kR, kPersistent};
    launch_fwd<Traits, FwdShape<kVec, kN, kHidden, kG, kC>>(args, plan, stream);
  }
};

}  // namespace normtune
