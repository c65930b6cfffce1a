// Launchers for the backward kernels: the workspace layout and size, the grids, the general
// entry (layout planned per call) and the tuned entries (layout fixed at compile time).
//
// Workspace (16-byte aligned, bytes):
//   [row_terms: rows x 2 floats, long rows only, rounded up to 4 floats]
//   [partials:  K x programs x row_stride floats]   row_stride = hidden rounded up to 4
// programs is the grid of the register-resident kernel (bounded by multiprocessorCount x the
// CTAs resident per SM, and by the row tiles), the clusters of the pipelined kernel (as many
// as are resident at once within that bound, at most one per row; with one CTA per row, its
// CTAs in clusters of kBwdPartialCluster or 2 where those are all resident at once, one partial
// row per cluster, or a CTA of rows_per_cta row groups, one partial row per CTA), or the row
// ranges of the column kernel. The size query and the real call
// compute it from the same arguments, so they agree.
#pragma once

#include <algorithm>

#include <normtune/common/error.h>
#include <normtune/tuning.h>

#include "kernels/norm_bwd.cuh"
#include "kernels/norm_bwd_pipelined.cuh"
#include "launch/launch_util.cuh"

namespace normtune {

template <typename Traits, int kVec>
bool bwd_vector_aligned(const BwdParams& p) {
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  const size_t vi = alignof(Vec<I, kVec>);
  const size_t vw = alignof(Vec<W, kVec>);
  return p.hidden % kVec == 0 && aligned_to(p.x, vi) && aligned_to(p.dz, vi) &&
         aligned_to(p.add, vi) && aligned_to(p.dx, vi) && aligned_to(p.gamma, vw);
}

// Column-kernel CTAs to aim for per SM (long rows).
inline constexpr int kBwdColumnCtasPerSm = 4;

struct BwdGeometry {
  int64_t grid = 0;            // main kernel CTAs (register-resident, pipelined) or row-terms CTAs
  int threads = 0;             // register-resident: G x R; pipelined: G x R (R row groups, one CTA per row)
  size_t smem = 0;             // register-resident, pipelined: dynamic shared memory
  int cluster = 1;             // pipelined: CTAs per row
  int stages = 0;              // pipelined: rows in flight per row group (its ring: smem / R / stage bytes)
  int partial_cluster = 1;     // pipelined, one CTA per row: CTAs summing their partials on chip
  int column_tiles = 0;        // long rows: CTAs across the columns
  int programs = 0;            // partial rows
  int64_t rows_per_program = 0;
  int row_stride = 0;
  size_t row_terms_floats = 0;
  size_t workspace_bytes = 0;
};

// The register-resident kernel, allowed (on the current device) the dynamic shared memory
// of its largest CTA.
template <typename Traits, typename Shape>
auto norm_bwd_main_kernel() {
  auto kernel = norm_bwd_kernel<Traits, Shape>;
  static std::array<std::once_flag, kMaxDevices> allowed;
  once_per_device(allowed, [&] {
    NORMTUNE_CUDA_CHECK(platform::allow_dynamic_smem(kernel, bwd_smem_bytes<Traits, Shape>(kMaxCtaThreads, 2)));
  });
  return kernel;
}

// Shared memory the pipelined layout fills with stages, within the device's limit: one
// 512-thread CTA per SM whatever its shared memory (registers), so the 64 KiB stages of 4
// vectors x 512 threads get three.
inline constexpr size_t kBwdPipelinedSmemBudget = 192 * 1024;

// The pipelined layout with one CTA per row: its CTAs' dgamma/dbeta partials summed on chip in
// clusters of this many (or 2), where every CTA of the persistent grid is still resident at
// once in such clusters (else one partial row per CTA, as the register layout writes).
inline constexpr int kBwdPartialCluster = 4;

template <typename Traits, typename Shape>
BwdGeometry bwd_geometry(const BwdArgs& args, const BwdPlan& plan) {
  const BwdParams& p = args.params;
  BwdGeometry g;
  g.row_stride = (p.hidden + 3) / 4 * 4;
  if (p.rows == 0) return g;  // nothing to reduce: finalize writes zeros
  const int64_t sm_bound = std::max(args.sm_bound, 1);
  if constexpr (Shape::kPipelined) {
    using Ring = BwdRing<Traits, Shape>;
    constexpr auto kernel = norm_bwd_pipelined_kernel<Traits, Shape>;
    const size_t limit = prepare_cluster_smem_kernel<kernel>();
    // R row groups of G threads per CTA (one CTA per row), each with its own ring.
    const int R = plan.ctas_per_row == 1 ? plan.rows_per_cta : 1;
    g.threads = plan.threads_per_row * R;
    g.cluster = plan.ctas_per_row;
    // As many stages (up to kMaxPipelineStages) as fit the budget and the device, at least two
    // (the planner keeps to plans whose two stages fit: pipelined_backward_min_smem).
    const int slice = plan.vecs_per_thread * plan.threads_per_row;
    g.stages = static_cast<int>(std::clamp<size_t>(
        std::min(kBwdPipelinedSmemBudget, limit) / (R * Ring::stage_bytes(slice)), 2, kMaxPipelineStages));
    g.smem = static_cast<size_t>(R) * g.stages * Ring::stage_bytes(slice);
    NORMTUNE_CHECK(g.smem <= limit, "backward plan ", config_string(plan), ": ", g.smem,
                   " bytes of shared memory per CTA, the device allows ", limit);
    int64_t clusters = 0;
    if (g.cluster > 1) {
      const int sms = device_info(current_device()).sm_count;
      const int64_t resident = resident_clusters<kernel>(g.threads, g.smem, g.cluster);
      NORMTUNE_CHECK(resident > 0, "backward plan ", config_string(plan), ": a cluster of ", g.cluster,
                     " CTAs cannot be resident on this device");
      clusters = std::max<int64_t>(1, resident * std::min<int64_t>(sm_bound, sms) / sms);
    } else {
      clusters = sm_bound * resident_ctas_per_sm<kernel>(g.threads, g.smem);
    }
    clusters = std::max<int64_t>(1, std::min<int64_t>(clusters, (p.rows + R - 1) / R));
    g.grid = clusters * g.cluster;
    g.programs = static_cast<int>(clusters);
    if (Traits::kOutputs == 2 && g.cluster == 1 && R == 1 && args.clusters) {
      // LayerNorm only: measured on the H200 (session 21, bf16, best of 2), summing on chip took
      // LayerNorm 4096x4096 39.2 -> 38.1 us and 128x7168 9.7 -> 7.5 us per call in a graph, but
      // RMSNorm's one partial row is cheaper to write than the cluster's exchange: 128x7168 5.7 ->
      // 8.4 us, 4096x4096 35.9 -> 36.7.
      // Room to stage K x hidden fp32 partials in the drained ring (it holds x and dz of >= 2 rows),
      // and at least two clusters (a grid of one cluster gains nothing over its CTAs' partial rows).
      const bool staged = g.smem >= sizeof(float) * Traits::kOutputs * static_cast<size_t>(p.hidden);
      for (int size : {kBwdPartialCluster, 2}) {
        const int64_t grid = g.grid / size * size;
        if (staged && grid >= 2 * size && resident_clusters<kernel>(g.threads, g.smem, size) * int64_t{size} >= grid) {
          g.partial_cluster = size;
          g.grid = grid;
          g.programs = static_cast<int>(grid / size);
          break;
        }
      }
    }
    // No more rows in flight than a CTA walks: before its first row's reduction a CTA issues the
    // copies of every stage, and at decode (a row per CTA) the empty stages' address arithmetic
    // was on that path. One stage where one row is all (one CTA per row; a cluster's exchange
    // keeps two). The ring keeps its size (g.smem: the partials' staging above counts on it).
    // Measured per call in a CUDA graph (H200, session 23, same build, best of 2): RMSNorm 1x4096
    // 3.09 -> 3.04 us, 1x7168 3.69 -> 3.56, bwd_add 1x7168 3.87 -> 3.70; 128 rows and the
    // throughput shapes within 1%.
    const int64_t walkers = g.grid / g.cluster * R;
    const int64_t rows_per_walker = (p.rows + walkers - 1) / walkers;
    g.stages = static_cast<int>(std::clamp<int64_t>(rows_per_walker, g.cluster > 1 ? 2 : 1, g.stages));
  } else if constexpr (Shape::kN > 0) {
    g.threads = plan.threads_per_row * plan.rows_per_cta;
    g.smem = bwd_smem_bytes<Traits, Shape>(g.threads, plan.rows_per_cta);
    const int64_t tiles = (p.rows + plan.rows_per_cta - 1) / plan.rows_per_cta;
    (void)norm_bwd_main_kernel<Traits, Shape>();  // its shared-memory attribute, before the query
    const int64_t resident = sm_bound * resident_ctas_per_sm<norm_bwd_kernel<Traits, Shape>>(g.threads, g.smem);
    g.grid = std::max<int64_t>(1, std::min(tiles, resident));
    g.programs = static_cast<int>(g.grid);
  } else {
    const int nvec = p.hidden / Shape::kVec;
    g.column_tiles = (nvec + kBwdColumnThreads - 1) / kBwdColumnThreads;
    const int64_t want = (sm_bound * kBwdColumnCtasPerSm + g.column_tiles - 1) / g.column_tiles;
    const int64_t ranges = std::clamp<int64_t>(want, 1, p.rows);
    g.rows_per_program = (p.rows + ranges - 1) / ranges;
    g.programs = static_cast<int>((p.rows + g.rows_per_program - 1) / g.rows_per_program);
    g.row_terms_floats = static_cast<size_t>((p.rows * 2 + 3) / 4 * 4);
    g.grid = std::min<int64_t>(
        p.rows, sm_bound * resident_ctas_per_sm<norm_bwd_row_terms_kernel<Traits, Shape>>(kMaxCtaThreads));
  }
  g.workspace_bytes = sizeof(float) * (g.row_terms_floats + static_cast<size_t>(Traits::kOutputs) *
                                                                 g.programs * g.row_stride);
  return g;
}

template <typename Traits, typename Shape>
void launch_bwd(const BwdArgs& args, const BwdPlan& plan, cudaStream_t stream) {
  const BwdGeometry g = bwd_geometry<Traits, Shape>(args, plan);
  BwdParams p = args.params;
  float* ws = static_cast<float*>(args.workspace);
  p.programs = g.programs;
  p.row_stride = g.row_stride;
  p.threads_per_row = plan.threads_per_row;
  p.rows_per_program = g.rows_per_program;
  p.row_terms = g.row_terms_floats > 0 ? ws : nullptr;
  p.partials = g.programs > 0 ? ws + g.row_terms_floats : nullptr;
  // One program of the register or pipelined layout: it writes dgamma itself (RMSNorm only:
  // measured per call in a graph, RMSNorm 1x4096 3.62 -> 3.26 us and 1x7168 4.17 -> 3.87, while
  // LayerNorm's kernel writing dgamma and dbeta took 4.51 -> 4.71 and 6.07 -> 6.80; H200, s21).
  p.direct_grads = Traits::kOutputs == 1 && p.rows > 0 && g.programs == 1 && Shape::kN > 0;
  // The first kernel is a programmatic dependent launch too: its CTAs are scheduled and set up
  // while the previous kernel on the stream (the last call's finalize, say) drains, and wait for
  // it before touching global memory. Measured per call in a CUDA graph (H200, session 24, same
  // build, best of 2): RMSNorm 1x4096 3.07 -> 2.72 us, 128x7168 5.38 -> 5.08, LayerNorm 128x7168
  // 7.12 -> 6.87; the throughput shapes within 0.5%.
  // LayerNorm's finalize lets the next kernel start early too (that kernel still waits for
  // the finalize to finish before touching memory, as above). Per call in a CUDA graph, best of
  // 2: LayerNorm 128x7168 6.87 -> 6.72 us, 1x4096 4.08 -> 3.83, 32x4096 5.32 -> 5.08 (session
  // 24, one build with a switch); 6.89 -> 6.84, 4.00 -> 3.96, 5.26 -> 5.15 (session 25, two
  // builds). RMSNorm's would cost 128x7168 5.21 -> 6.61 (the next call's 128 CTAs held SMs
  // while the finalize ran): not there.
  p.finalize_starts_next = Traits::kOutputs == 2;
  if (p.rows > 0) {
    if constexpr (Shape::kPipelined) {
      p.ctas_per_row = g.cluster;
      p.stages = g.stages;
      p.partial_cluster = g.partial_cluster;
      NORMTUNE_CUDA_CHECK(platform::launch(
          norm_bwd_pipelined_kernel<Traits, Shape>, static_cast<unsigned>(g.grid), static_cast<unsigned>(g.threads),
          platform::LaunchOptions{.cluster = g.cluster * g.partial_cluster, .smem = g.smem, .dependent = true},
          stream, p));
    } else if constexpr (Shape::kN > 0) {
      NORMTUNE_CUDA_CHECK(platform::launch_grid(norm_bwd_main_kernel<Traits, Shape>(),
                                                dim3(static_cast<unsigned>(g.grid)),
                                                static_cast<unsigned>(g.threads), g.smem, stream,
                                                true, p));
    } else {
      NORMTUNE_CUDA_CHECK(platform::launch_grid(norm_bwd_row_terms_kernel<Traits, Shape>,
                                                dim3(static_cast<unsigned>(g.grid)), kMaxCtaThreads,
                                                0, stream, true, p));
      NORMTUNE_CUDA_CHECK(platform::launch_grid(
          norm_bwd_columns_kernel<Traits, Shape>,
          dim3(static_cast<unsigned>(g.column_tiles), static_cast<unsigned>(g.programs)),
          kBwdColumnThreads, 0, stream, true, p));
    }
    NORMTUNE_CHECK_LAUNCH();
  }
  // The finalize kernel starts while the last kernel drains (programmatic dependent launch)
  // and waits for its writes; with no rows it has nothing to wait for (and writes zeros).
  if (p.direct_grads) return;
  const unsigned column_blocks = static_cast<unsigned>((p.hidden + kWarp - 1) / kWarp);
  NORMTUNE_CUDA_CHECK(platform::launch_grid(norm_bwd_finalize_kernel<typename Traits::Weight>,
                                            dim3(column_blocks, Traits::kOutputs), kMaxCtaThreads,
                                            0, stream, p.rows > 0, p));
  NORMTUNE_CHECK_LAUNCH();
}

// Calls fn.template operator()<Shape>(plan) with the general kernel's shape for the call.
template <typename Traits, typename Fn>
auto with_general_bwd_shape(const BwdArgs& args, Fn&& fn) {
  using I = typename Traits::Input;
  constexpr int kVec = 16 / sizeof(I);
  const bool aligned = bwd_vector_aligned<Traits, kVec>(args.params);
  const BwdPlan plan = backward_plan(args.params.hidden, aligned ? kVec : 1, args.clusters, args.smem_per_cta);
  const bool columns = plan.layout == BwdLayout::kColumns;
  if (aligned) {
    if (columns) return fn.template operator()<BwdShape<kVec, 0>>(plan);
    if (plan.layout == BwdLayout::kPipelined) {
      // One row group: the kernel without groups (kR = 1); row groups (2 vectors per thread
      // only: with 4, LayerNorm's kernel spilled) counted at run time.
      if (plan.vecs_per_thread == 2) {
        if (plan.rows_per_cta == 1) return fn.template operator()<BwdShape<kVec, 2, 0, 0, true, 0, 1>>(plan);
        return fn.template operator()<BwdShape<kVec, 2, 0, 0, true, 0, 0>>(plan);
      }
      if (plan.vecs_per_thread == 4) return fn.template operator()<BwdShape<kVec, 4, 0, 0, true, 0, 1>>(plan);
    }
    switch (plan.vecs_per_thread) {
      case 1: return fn.template operator()<BwdShape<kVec, 1>>(plan);
      case 2: return fn.template operator()<BwdShape<kVec, 2>>(plan);
      case 4: return fn.template operator()<BwdShape<kVec, 4>>(plan);
    }
  } else {
    if (columns) return fn.template operator()<BwdShape<1, 0>>(plan);
    if (plan.vecs_per_thread == 8) return fn.template operator()<BwdShape<1, 8>>(plan);
  }
  NORMTUNE_ERROR("internal: no backward kernel variant for plan ", config_string(plan), " aligned=", aligned);
}

// The general entry of one (types, variant): any hidden size, any alignment.
template <typename Traits>
struct GeneralBwd {
  static constexpr const char* kConfig =
      "layout planned per call: row in registers (vector or scalar), pipelined over a cluster, or column tiles";

  static void run(const void* opaque, cudaStream_t stream) {
    const BwdArgs& args = *static_cast<const BwdArgs*>(opaque);
    with_general_bwd_shape<Traits>(args, [&]<typename Shape>(const BwdPlan& plan) {
      launch_bwd<Traits, Shape>(args, plan, stream);
    });
  }
  static size_t workspace(const void* opaque) {
    const BwdArgs& args = *static_cast<const BwdArgs*>(opaque);
    return with_general_bwd_shape<Traits>(args, [&]<typename Shape>(const BwdPlan& plan) {
      return bwd_geometry<Traits, Shape>(args, plan).workspace_bytes;
    });
  }
};

// A tuned entry: hidden size and plan fixed at compile time (a table line); needs
// vector-aligned data.
template <typename Traits, int kHidden, BwdPlan kPlan>
struct TunedBwd {
  using I = typename Traits::Input;
  static constexpr int kVec = 16 / sizeof(I);
  static constexpr bool kRegisters = kPlan.layout == BwdLayout::kRegisters;
  static constexpr bool kPipelined = kPlan.layout == BwdLayout::kPipelined;
  static constexpr bool kHoldsRow = kRegisters || kPipelined;
  using Shape = BwdShape<kVec, kHoldsRow ? kPlan.vecs_per_thread : 0, kHidden, kHoldsRow ? kPlan.threads_per_row : 0,
                         kPipelined, kPipelined ? kPlan.ctas_per_row : 0, kPipelined && kPlan.rows_per_cta == 1 ? 1 : 0>;
  static_assert(kHidden % kVec == 0, "a tuned hidden size must be a multiple of the vector");
  static_assert(!kHoldsRow || kPlan.vecs_per_thread * kPlan.threads_per_row * (kPipelined ? kPlan.ctas_per_row : 1) * kVec >= kHidden,
                "the tuned layout does not cover the row");
  static_assert(!kPipelined || (kPlan.threads_per_row <= kMaxCtaThreads && kPlan.ctas_per_row >= 1 &&
                                kPlan.ctas_per_row <= kMaxCtasPerRow),
                "a pipelined line: at most kMaxCtaThreads threads and kMaxCtasPerRow CTAs per row");
  // A pipelined line's one row group is a constant (its kernel is the one without groups:
  // with the count at run time, LayerNorm 8192x7168 ran 4.5% slower); several stay a run-time
  // count, as measured (with the count a constant, H200 session 28, the row-group lines ran
  // 2-6% slower than with it at run time: RMSNorm 16384x4096 1.095x the 2r1w op against 1.037x).
  static_assert(!kPipelined || kPlan.rows_per_cta >= 1, "a pipelined line's row groups: at least one");
  static_assert(!kPipelined || kPlan.rows_per_cta == 1 ||
                    (kPlan.ctas_per_row == 1 && kPlan.vecs_per_thread == 2 && kPlan.rows_per_cta <= kMaxBwdRowGroups &&
                     kPlan.threads_per_row * kPlan.rows_per_cta <= kMaxCtaThreads),
                "a pipelined line's row groups: one CTA per row, 2 vectors per thread, at most kMaxBwdRowGroups, "
                "kMaxCtaThreads threads");
  static_assert(!kRegisters || (kPlan.threads_per_row * kPlan.rows_per_cta <= kMaxCtaThreads && kPlan.rows_per_cta >= 1),
                "at most kMaxCtaThreads threads per CTA");

  static const char* can_implement(const void* opaque) {
    const BwdArgs& args = *static_cast<const BwdArgs*>(opaque);
    if constexpr (kPipelined && kPlan.ctas_per_row > 1) {
      if (!args.clusters) return "the device has no thread-block clusters";
    }
    return bwd_vector_aligned<Traits, kVec>(args.params) ? nullptr : "data is not 16-byte aligned";
  }
  static void run(const void* opaque, cudaStream_t stream) {
    launch_bwd<Traits, Shape>(*static_cast<const BwdArgs*>(opaque), kPlan, stream);
  }
  static size_t workspace(const void* opaque) {
    return bwd_geometry<Traits, Shape>(*static_cast<const BwdArgs*>(opaque), kPlan).workspace_bytes;
  }
};

}  // namespace normtune
