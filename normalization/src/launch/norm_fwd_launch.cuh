// Launchers for the forward kernels: the general entry (plans the layout at run time) and the
// tuned entries (layout fixed at compile time from a table line).
#pragma once

#include <algorithm>
#include <type_traits>

#include <normtune/common/error.h>

#include <normtune/tuning.h>

#include "kernels/norm_fwd.cuh"
#include "kernels/norm_fwd_mx_cluster.cuh"
#include "kernels/norm_fwd_mx_tile.cuh"
#include "kernels/norm_fwd_pipelined.cuh"
#include "kernels/norm_fwd_staged.cuh"
#include "launch/launch_util.cuh"

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
  if (plan.ctas_per_row > kMaxPortableCtasPerRow) {
    static std::array<std::once_flag, kMaxDevices> allowed;
    once_per_device(allowed, [&] { NORMTUNE_CUDA_CHECK(platform::allow_non_portable_cluster(kernel)); });
  }
  const int threads = plan.threads_per_row * plan.rows_per_cta;
  const int64_t tiles = (p.rows + plan.rows_per_cta - 1) / plan.rows_per_cta;
  const int64_t resident =
      static_cast<int64_t>(args.sm_bound) * resident_ctas_per_sm<norm_fwd_kernel<Traits, Shape>>(threads) / plan.ctas_per_row;
  const int64_t clusters = std::max<int64_t>(1, plan.persistent ? std::min(tiles, resident) : tiles);
  NORMTUNE_CUDA_CHECK(platform::launch(kernel, static_cast<unsigned>(clusters * plan.ctas_per_row),
                                       static_cast<unsigned>(threads),
                                       platform::LaunchOptions{.cluster = plan.ctas_per_row, .dependent = true},
                                       stream, p));
  NORMTUNE_CHECK_LAUNCH();
}

// The staged layout (kernels/norm_fwd_staged.cuh): one CTA (or cluster) per row tile, the
// slices in dynamic shared memory; gamma and beta staged too when the grid has at most one CTA
// per SM (the few-row, latency-bound case).
// Returns false, launching nothing, when the device cannot hold the plan (shared memory, or a
// cluster that never fits).
template <typename Traits, typename Shape>
bool launch_fwd_staged(const FwdArgs& args, const FwdPlan& plan, cudaStream_t stream) {
  using Layout = StagedLayout<Traits, Shape::kVec>;
  constexpr auto kernel = norm_fwd_staged_kernel<Traits, Shape>;
  FwdParams p = args.params;
  p.threads_per_row = plan.threads_per_row;
  p.ctas_per_row = plan.ctas_per_row;
  p.vecs_per_thread = plan.vecs_per_thread;
  const size_t smem_limit = prepare_cluster_smem_kernel<kernel>();
  const int threads = plan.threads_per_row * plan.rows_per_cta;
  const int64_t tiles = (p.rows + plan.rows_per_cta - 1) / plan.rows_per_cta;
  const int slice = plan.vecs_per_thread * plan.threads_per_row;
  p.stage_weights = plan.stage_weights || tiles * plan.ctas_per_row <= args.sm_bound;
  size_t smem = plan.rows_per_cta * Layout::group_bytes(slice, p.stage_weights);
  if (smem > smem_limit && p.stage_weights) {
    p.stage_weights = false;
    smem = plan.rows_per_cta * Layout::group_bytes(slice, false);
  }
  if (smem > smem_limit || !cluster_fits<kernel>(threads, smem, plan.ctas_per_row)) {
    return false;
  }
  if (p.rows == 0) return true;
  NORMTUNE_CUDA_CHECK(platform::launch(
      kernel, static_cast<unsigned>(tiles * plan.ctas_per_row), static_cast<unsigned>(threads),
      platform::LaunchOptions{.cluster = plan.ctas_per_row, .smem = smem, .dependent = true}, stream, p));
  NORMTUNE_CHECK_LAUNCH();
  return true;
}

// Shared memory the pipelined layout fills with stages and LayerNorm's beta, within the
// device's limit (measured on the H200, 8192 x 32768 bf16: 2 stages of 32 KiB 287 µs, 3 stages
// 278, 4 stages 275; the one-CTA-per-SM kernels' 64 KiB stages get 3 of 192 KiB).
inline constexpr size_t kPipelinedSmemBudget = 192 * 1024;
// The kernels budgeted for two CTAs per SM (kPipelinedMinBlocks): stages and LayerNorm's beta
// within this, so that two CTAs fit an SM's shared memory.
inline constexpr size_t kPipelinedTwoCtaSmem = 96 * 1024;

// The workspace of the tuned pipelined entries of one CTA per row: the counter of their
// dynamic row schedule (FwdParams::row_counter), zeroed by the launcher (a memset) before each
// launch that uses it: those of at least kDynamicRowsPerCta rows per CTA. The memset costs
// about 3 µs of the stream's time (tools/ab.sh on the H200, session 31: 512 x 32768 bf16,
// 3.9 rows per CTA, 23.0 -> 26.7 µs), what the schedule gained on 8192 x 32768 (62 rows per
// CTA, 280.4 -> 268.5 µs) in about 16 rows per CTA.
inline constexpr size_t kRowCounterBytes = 16;
inline constexpr int64_t kDynamicRowsPerCta = 16;
inline size_t row_counter_workspace(const void*) { return kRowCounterBytes; }

// The pipelined layout (kernels/norm_fwd_pipelined.cuh): a persistent grid of as many
// clusters (one CTA each when ctas_per_row is 1) as are resident at once, within the SM bound.
// row_counter (kRowCounterBytes of the caller's workspace, or null: the fixed walk): one CTA
// per row takes its rows from it when there are kDynamicRowsPerCta rows per CTA or more.
// Returns false, launching nothing, when the device cannot hold the plan.
template <typename Traits, typename Shape>
bool launch_fwd_pipelined(const FwdArgs& args, const FwdPlan& plan, cudaStream_t stream,
                          void* row_counter = nullptr) {
  using Layout = PipelinedLayout<Traits, Shape::kVec>;
  constexpr auto kernel = norm_fwd_pipelined_kernel<Traits, Shape>;
  FwdParams p = args.params;
  p.threads_per_row = plan.threads_per_row;
  p.ctas_per_row = plan.ctas_per_row;
  p.vecs_per_thread = plan.vecs_per_thread;
  const size_t smem_limit = prepare_cluster_smem_kernel<kernel>();
  const int threads = plan.threads_per_row;
  const int cluster = plan.ctas_per_row;
  // As many stages (up to kMaxPipelineStages) as fit the budget, at least two.
  const int slice = plan.vecs_per_thread * plan.threads_per_row;
  size_t budget = std::min(kPipelinedSmemBudget, smem_limit);
  if constexpr (kPipelinedMinBlocks<Traits, Shape> == 2) budget = kPipelinedTwoCtaSmem;
  budget -= std::min(budget, Layout::beta_bytes(slice));
  p.stages = static_cast<int>(std::clamp<size_t>(budget / Layout::stage_bytes(slice), 2, kMaxPipelineStages));
  const size_t smem = Layout::bytes(slice, p.stages);
  if (smem > smem_limit) return false;
  const int64_t sm_bound = std::max(args.sm_bound, 1);
  int64_t clusters = 0;
  if (cluster > 1) {
    const int sms = device_info(current_device()).sm_count;
    const int64_t resident = resident_clusters<kernel>(threads, smem, cluster);
    if (resident == 0) return false;
    clusters = std::max<int64_t>(1, resident * std::min<int64_t>(sm_bound, sms) / sms);
  } else {
    clusters = sm_bound * resident_ctas_per_sm<kernel>(threads, smem);
  }
  if (p.rows == 0) return true;
  clusters = std::min<int64_t>(clusters, p.rows);
  // The dynamic row schedule (kernels/norm_fwd_pipelined.cuh): one CTA per row, or clusters
  // whose tuned line says dynamic_rows; enough rows that a CTA draws a few tickets.
  if (row_counter != nullptr && (cluster == 1 || Shape::kDynamicRows) &&
      p.rows >= kDynamicRowsPerCta * clusters) {
    p.row_counter = static_cast<unsigned*>(row_counter);
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(row_counter, 0, sizeof(unsigned), stream));
  }
  NORMTUNE_CUDA_CHECK(platform::launch(kernel, static_cast<unsigned>(clusters * cluster), static_cast<unsigned>(threads),
                                       platform::LaunchOptions{.cluster = cluster, .smem = smem, .dependent = true},
                                       stream, p));
  NORMTUNE_CHECK_LAUNCH();
  return true;
}

// The pipelined layout with the plan's vectors per thread as a compile-time count (the
// general entry; tuned entries fix every field).
template <typename Traits, int kVec>
bool launch_fwd_pipelined_any(const FwdArgs& args, const FwdPlan& plan, cudaStream_t stream,
                              void* row_counter = nullptr) {
  switch (plan.vecs_per_thread) {
    case 2:
      return launch_fwd_pipelined<Traits, FwdShape<kVec, 2>>(args, plan, stream, row_counter);
    case 4:
      return launch_fwd_pipelined<Traits, FwdShape<kVec, 4>>(args, plan, stream, row_counter);
    case 8:
      return launch_fwd_pipelined<Traits, FwdShape<kVec, 8>>(args, plan, stream, row_counter);
  }
  NORMTUNE_ERROR("internal: no pipelined forward kernel for plan ", config_string(plan));
}

// A block-scaled z with column-wise data (MXFP8, NVFP4), the tile on chip
// (kernels/norm_fwd_mx_cluster.cuh): the fewest CTAs per cluster (up to kMaxCtasPerRow; 1
// without clusters) whose slices of whole row blocks (32 columns; NVFP4: 16) fit
// kMxSliceBudget, or, when more are needed, shared memory up to the device's limit; one CTA
// per row may take several tiles (p.tiles_per_cta). Returns false, launching nothing, when no
// cluster holds the tile (rows too long: launch_fwd_mx_tile then).
template <typename Traits>
bool launch_fwd_mx_cluster(const FwdArgs& args, cudaStream_t stream) {
  constexpr auto kernel = norm_fwd_mx_cluster_kernel<Traits>;
  constexpr int kVec = 16 / sizeof(typename Traits::Input);
  FwdParams p = args.params;
  const size_t limit = prepare_cluster_smem_kernel<kernel>();
  const int max_ctas = args.clusters && !platform::kIsHip ? kMaxCtasPerRow : 1;
  constexpr int kUnit = block_elements(Traits::kScaling);  // a row block: the slices' unit
  const int64_t blocks = p.hidden / kUnit;  // row blocks of a row
  const size_t block_bytes = size_t{kMxBlock} * kUnit * sizeof(typename Traits::Input);  // 32 rows of one
  const int64_t fewest = (static_cast<int64_t>(blocks * block_bytes) + kMxSliceBudget - 1) / kMxSliceBudget;
  for (int64_t c = std::clamp<int64_t>(fewest, 1, max_ctas); c <= std::min<int64_t>(max_ctas, blocks); ++c) {
    const int64_t per = (blocks + c - 1) / c;  // row blocks (slices' units) per CTA
    const int ctas = static_cast<int>((blocks + per - 1) / per);
    const size_t smem = static_cast<size_t>(per) * block_bytes;
    if (smem > limit || !cluster_fits<kernel>(kMxTileThreads, smem, ctas)) continue;
    if (p.rows == 0) return true;
    p.ctas_per_row = ctas;
    p.vecs_per_thread = static_cast<int>(per * (kUnit / kVec));  // the slice's vectors per row
    const int64_t tiles = (p.rows + kMxBlock - 1) / kMxBlock;
    // One CTA per row: as many tiles per CTA as give each warp a strip of the output stage,
    // within the slice budget, while the grid still has two CTAs per resident one.
    int64_t per_cta = 1;
    if (ctas == 1) {
      const int64_t strips = (p.vecs_per_thread + kMxStripVecs - 1) / kMxStripVecs;
      const int64_t resident =
          int64_t{std::max(args.sm_bound, 1)} * std::max(1, resident_ctas_per_sm<kernel>(kMxTileThreads, smem));
      per_cta = std::min<int64_t>({kMxMaxTiles, std::max<int64_t>(1, kMxTileGroups / strips),
                                   static_cast<int64_t>(std::max<size_t>(1, kMxSliceBudget / smem)),
                                   std::max<int64_t>(1, tiles / (2 * resident))});
    }
    p.tiles_per_cta = static_cast<int>(per_cta);
    const size_t bytes = smem * static_cast<size_t>(per_cta);
    const int64_t grid = (tiles + per_cta - 1) / per_cta * ctas;
    NORMTUNE_CUDA_CHECK(platform::launch(kernel, static_cast<unsigned>(grid), kMxTileThreads,
                                         platform::LaunchOptions{.cluster = ctas, .smem = bytes, .dependent = true},
                                         stream, p));
    NORMTUNE_CHECK_LAUNCH();
    return true;
  }
  return false;
}

// A block-scaled z with column-wise data, rows too long to hold a tile: tiles of 32 rows
// (kernels/norm_fwd_mx_tile.cuh) read twice, the columns split over up to kMxTileMaxSplits
// CTAs when there are fewer tiles than the device holds at once (each split reads the whole
// rows of its tile again for their statistics).
// The fused add keeps one CTA per tile: it writes residual_out and reads it back, possibly
// in place of residual.
inline constexpr int64_t kMxTileMaxSplits = 4;
template <typename Traits>
void launch_fwd_mx_tile(const FwdArgs& args, cudaStream_t stream) {
  const FwdParams& p = args.params;
  if (p.rows == 0) return;
  constexpr int kVec = 16 / sizeof(typename Traits::Input);
  const int64_t tiles = (p.rows + kMxBlock - 1) / kMxBlock;
  const int64_t chunks = (p.hidden / kVec + kMxTileLanes - 1) / kMxTileLanes;
  const int64_t resident =
      int64_t{std::max(args.sm_bound, 1)} * resident_ctas_per_sm<norm_fwd_mx_tile_kernel<Traits>>(kMxTileThreads);
  const int64_t splits =
      Traits::kResidualAdd || tiles >= resident
          ? 1
          : std::clamp<int64_t>((resident + tiles - 1) / tiles, 1, std::min(chunks, kMxTileMaxSplits));
  NORMTUNE_CUDA_CHECK(platform::launch_grid(norm_fwd_mx_tile_kernel<Traits>,
                                            dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)),
                                            kMxTileThreads, 0, stream, true, p));
  NORMTUNE_CHECK_LAUNCH();
}

// The general entry of one (types, variant): any hidden size, any alignment; the layout is
// planned per call.
template <typename Traits>
struct GeneralFwd {
  static constexpr const char* kConfig =
      Traits::kMxfp8 ? "layout planned per call: staged in shared memory, a 32-element block per group of adjacent "
                       "lanes; with column-wise data, tiles of 32 rows"
      : Traits::kScaling == ScalingMode::kNvfp4_1D
          ? "layout planned per call: staged in shared memory, a 16-element block per group of adjacent lanes; "
            "with column-wise data (the transpose), tiles of 32 rows"
      : Traits::kBlockScaled ? "layout planned per call: staged in shared memory, a block of z's scales per group of "
                               "adjacent lanes"
                             : "layout planned per call: registers (vector or scalar), staged in shared memory "
                               "(a cluster for long rows), or streamed";
  // The row counter when the call's plan (the autotuner's override, or the planner's for
  // aligned data: a size query's null pointers count as aligned) is pipelined on one CTA per
  // row; run_unscaled uses it only then, and only when the real call's plan is that one.
  static size_t workspace(const void* opaque) {
    return counted_plan(*static_cast<const FwdArgs*>(opaque), true) ? kRowCounterBytes : 0;
  }

  static void run(const void* opaque, cudaStream_t stream) {
    const FwdArgs& args = *static_cast<const FwdArgs*>(opaque);
    using I = typename Traits::Input;
    constexpr int kVec = 16 / sizeof(I);
    const bool aligned = fwd_vector_aligned<Traits, kVec>(args.params);
    if constexpr (Traits::kBlockScaled) {
      constexpr int kBlock = block_elements(Traits::kScaling);
      NORMTUNE_CHECK(aligned && aligned_to(args.params.z, 16) && aligned_to(args.params.z_colwise, 16),
                     "a block-scaled z needs x, gamma (and beta, residual) and z at 16-byte aligned addresses");
      if constexpr (has_colwise_format(Traits::kScaling)) {
        if (args.params.z_colwise != nullptr) {
          if (launch_fwd_mx_cluster<Traits>(args, stream)) return;
          return launch_fwd_mx_tile<Traits>(args, stream);
        }
      }
      // The planner's layout, or the autotuner's override (normtune tune --out mxfp8), which
      // must then be a staged or pipelined one.
      const bool clusters = args.clusters && !platform::kIsHip;
      const FwdPlan* forced = forward_plan_override();
      // (Whole warps: the block's shuffles take every lane of a warp.)
      NORMTUNE_CHECK(
          forced == nullptr ||
              ((forced->layout == FwdLayout::kStaged || forced->layout == FwdLayout::kPipelined) &&
               plan_fits(*forced, args.params.hidden, kVec, clusters) &&
               forced->threads_per_row * forced->rows_per_cta % platform::kWarpSize == 0),
          "block-scaled output: layout ", forced ? config_string(*forced) : "",
          " is not a staged or pipelined layout of whole warps that fits this row");
      FwdPlan plan = forced ? *forced : plan_forward_block_scaled(args.params.hidden, kVec, clusters, kBlock);
      // The kernel's block = kBlock / kVec adjacent lanes of one row (store_block_scaled_part).
      NORMTUNE_CHECK(plan.threads_per_row % (kBlock / kVec) == 0, "block-scaled output: layout ", config_string(plan),
                     " has threads per row not a multiple of ", kBlock / kVec);
      // A pipelined plan (only the override's): the fixed walk, no row counter.
      if (plan.layout == FwdLayout::kPipelined) {
        const bool launched = launch_fwd_pipelined_any<Traits, kVec>(args, plan, stream);
        NORMTUNE_CHECK(launched, "block-scaled output: layout ", config_string(plan),
                       " does not fit this device (shared memory or cluster size)");
        return;
      }
      // The planner's rows up to 4 vectors per thread (hidden up to 4 x kMaxCtaThreads
      // vectors): the count fixed at 4 at compile time (the loops unrolled; a thread's vectors
      // past the row end are skipped), the rest with the count read at run time.
      const bool four = !forced && plan.ctas_per_row == 1 && plan.vecs_per_thread >= 3 && plan.vecs_per_thread <= 4;
      if (four) plan.vecs_per_thread = 4;
      const bool launched = four ? launch_fwd_staged<Traits, FwdShape<kVec, 4>>(args, plan, stream)
                                 : launch_fwd_staged<Traits, FwdShape<kVec, 0>>(args, plan, stream);
      NORMTUNE_CHECK(launched, "block-scaled output: layout ", config_string(plan),
                     " does not fit this device (shared memory or cluster size)");
      return;
    } else {
      run_unscaled(args, aligned, stream);
    }
  }

 private:
  static FwdPlan unscaled_plan(const FwdArgs& args, bool aligned) {
    constexpr int kVec = 16 / sizeof(typename Traits::Input);
    return forward_plan(args.params.hidden, aligned ? kVec : 1, args.clusters && !platform::kIsHip,
                        Traits::kNorm, Traits::kStage);
  }
  // RMSNorm with z of x's type, no residual add: measured on the H200 (session 34, tools/ab.sh,
  // best of 2, fp16, which has no table line at 32768) RMSNorm 8192x32768 284.16 -> 280.86 us,
  // 16384x32768 562.18 -> 548.35, but LayerNorm 286.91 -> 308.74 and 564.16 -> 602.59, and
  // with a per-tensor FP8 z, bf16 8192x32768 214.8 -> 256.9 (the ../shared/peers table; session
  // 31 measured a tuned FP8 line with the counter 212.5 -> 231.7).
  // (A block-scaled z is never of x's type: no counter there.)
  static constexpr bool kCounted = Traits::kRmsNorm && !Traits::kResidualAdd &&
                                   std::is_same_v<typename Traits::Output, typename Traits::Input>;
  static bool counted_plan(const FwdArgs& args, bool aligned) {
    if constexpr (!kCounted) {
      return false;
    } else {
      const FwdPlan plan = unscaled_plan(args, aligned);
      return plan.layout == FwdLayout::kPipelined && plan.ctas_per_row == 1;
    }
  }

  static void run_unscaled(const FwdArgs& args, bool aligned, cudaStream_t stream) {
    using I = typename Traits::Input;
    constexpr int kVec = 16 / sizeof(I);
    const FwdPlan plan = unscaled_plan(args, aligned);
    if (plan.layout == FwdLayout::kPipelined) {
      // (The workspace holds the counter when the aligned plan is this one: workspace(). With
      // aligned data this plan is the aligned one.)
      const bool counted = plan.ctas_per_row == 1 && (aligned ? kCounted : counted_plan(args, true));
      void* counter = counted ? args.workspace : nullptr;
      if (launch_fwd_pipelined_any<Traits, kVec>(args, plan, stream, counter)) return;
      // The device cannot hold this plan: stream the rows instead.
      return launch_fwd<Traits, FwdShape<kVec, 0>>(args, forward_streaming_plan(), stream);
    }
    if (plan.layout == FwdLayout::kStaged) {
      if (launch_fwd_staged<Traits, FwdShape<kVec, 0>>(args, plan, stream)) return;
      // The device cannot hold this staged plan: stream the rows instead.
      return launch_fwd<Traits, FwdShape<kVec, 0>>(args, forward_streaming_plan(), stream);
    }
    const bool stream_row = plan.layout == FwdLayout::kStreaming;
    if (aligned) {
      if (stream_row) return launch_fwd<Traits, FwdShape<kVec, 0>>(args, plan, stream);
      switch (plan.vecs_per_thread) {
        case 1: return launch_fwd<Traits, FwdShape<kVec, 1>>(args, plan, stream);
        case 2: return launch_fwd<Traits, FwdShape<kVec, 2>>(args, plan, stream);
        case 4: return launch_fwd<Traits, FwdShape<kVec, 4>>(args, plan, stream);
        case 8: return launch_fwd<Traits, FwdShape<kVec, 8>>(args, plan, stream);
      }
    } else {
      if (stream_row) return launch_fwd<Traits, FwdShape<1, 0>>(args, plan, stream);
      if (plan.vecs_per_thread == 8) return launch_fwd<Traits, FwdShape<1, 8>>(args, plan, stream);
    }
    NORMTUNE_ERROR("internal: no forward kernel variant for plan ", config_string(plan), " aligned=", aligned);
  }
};

// The warp of the architecture the tuned tables are written for (registry/tuned/sm90.def).
inline constexpr int kSm90WarpSize = 32;

// A tuned entry: hidden size and plan fixed at compile time (a table line); needs 16-byte
// aligned data.
template <typename Traits, int kHidden, FwdPlan kPlan>
struct TunedFwd {
  using I = typename Traits::Input;
  static constexpr int kVec = 16 / sizeof(I);
  static constexpr bool kRegisters = kPlan.layout == FwdLayout::kRegisters;
  static constexpr bool kStaged = kPlan.layout == FwdLayout::kStaged;
  static constexpr bool kPipelined = kPlan.layout == FwdLayout::kPipelined;
  using Shape = FwdShape<kVec, kPlan.layout != FwdLayout::kStreaming ? kPlan.vecs_per_thread : 0,
                         kHidden, kPlan.threads_per_row, kPlan.ctas_per_row, kPlan.dynamic_rows>;
  static_assert(kHidden % kVec == 0, "a tuned hidden size must be a multiple of the vector");
  static_assert(kPlan.layout == FwdLayout::kStreaming ||
                    kPlan.vecs_per_thread * kPlan.threads_per_row * kPlan.ctas_per_row * kVec >= kHidden,
                "the tuned layout does not cover the row");
  static_assert(!(kStaged || kPipelined) || kPlan.ctas_per_row == 1 || kPlan.threads_per_row >= kMaxCtasPerRow,
                "a staged or pipelined cluster plan needs a thread per peer CTA");
  static_assert(!kPipelined || (kPlan.rows_per_cta == 1 && (kPlan.vecs_per_thread == 2 || kPlan.vecs_per_thread == 4 ||
                                                           kPlan.vecs_per_thread == 8)),
                "a pipelined plan holds one row per CTA, 2, 4 or 8 vectors per thread");
  static_assert(!kPipelined || PipelinedLayout<Traits, kVec>::bytes(kPlan.vecs_per_thread * kPlan.threads_per_row, 2) <=
                                   227 * 1024 - 4096,
                "a pipelined tuned plan needs more shared memory than sm_90 offers");
  // The tuned tables are per architecture; sm_90 lets a CTA have 227 KiB of shared memory,
  // of which the kernel's static part (reductions, the exchange slots) takes under 4 KiB.
  // Whether a cluster of the plan fits the device is known only at run time: run() says so.
  static_assert(!kStaged || kPlan.rows_per_cta * StagedLayout<Traits, kVec>::group_bytes(
                                                      kPlan.vecs_per_thread * kPlan.threads_per_row, false) <=
                                227 * 1024 - 4096,
                "a staged tuned plan needs more shared memory than sm_90 offers");
  static_assert(kPlan.threads_per_row * kPlan.rows_per_cta <= kMaxCtaThreads && kPlan.ctas_per_row <= kMaxCtasPerRow &&
                    (kPlan.ctas_per_row == 1 || (kPlan.rows_per_cta == 1 && kPlan.threads_per_row >= platform::kWarpSize)),
                "at most kMaxCtaThreads threads per CTA, kMaxCtasPerRow CTAs per row; in a cluster one row per "
                "CTA and at least a warp per CTA (the cluster reduction's push uses one thread per peer)");
  // (Whole warps of the table's architecture: sm_90's 32 lanes. The HIP build compiles the
  // sm_90 table too, with 64-lane wavefronts, but never selects its entries: another family.)
  static_assert(!Traits::kBlockScaled ||
                    ((kStaged || kPipelined) &&
                     kPlan.threads_per_row % (block_elements(Traits::kScaling) / kVec) == 0 &&
                     kPlan.threads_per_row * kPlan.rows_per_cta % kSm90WarpSize == 0),
                "a block-scaled tuned plan is staged or pipelined, with whole blocks per group of "
                "lanes and whole warps (the block's shuffles take every lane of a warp)");
  static_assert(!kStaged || kPlan.threads_per_row * kPlan.rows_per_cta <= kStagedMaxThreads<Traits, Shape>,
                "a staged tuned plan's CTA is within its kernel's launch bound (kStagedMaxThreads)");
  static_assert(
      !kPlan.dynamic_rows || (kPipelined && kPlan.ctas_per_row > 1),
      "dynamic_rows: the pipelined layout on clusters (one CTA per row always draws rows)");
  // (The row counter of the pipelined layout on one CTA per row, or on clusters with
  // dynamic_rows; the general entry's pipelined plans keep the fixed walk, as it answers no
  // workspace.)
  static constexpr WorkspaceFn workspace =
      kPipelined && (kPlan.ctas_per_row == 1 || kPlan.dynamic_rows) ? &row_counter_workspace
                                                                    : nullptr;

  static const char* can_implement(const void* opaque) {
    const FwdArgs& args = *static_cast<const FwdArgs*>(opaque);
    if (!fwd_vector_aligned<Traits, kVec>(args.params)) return "data is not 16-byte aligned";
    if (Traits::kBlockScaled && !aligned_to(args.params.z, 16)) return "a block-scaled z is not 16-byte aligned";
    if (args.params.z_colwise != nullptr) return "column-wise output takes the general kernel";
    if (kPlan.ctas_per_row > 1 && !args.clusters) return "the device cannot launch thread-block clusters";
    return nullptr;
  }
  static void run(const void* opaque, cudaStream_t stream) {
    const FwdArgs& args = *static_cast<const FwdArgs*>(opaque);
    if constexpr (kStaged || kPipelined) {
      bool launched = false;
      if constexpr (kStaged) {
        launched = launch_fwd_staged<Traits, Shape>(args, kPlan, stream);
      } else {
        launched = launch_fwd_pipelined<Traits, Shape>(args, kPlan, stream, args.workspace);
      }
      NORMTUNE_CHECK(launched, "tuned kernel ", config_string(kPlan),
                     ": the device cannot hold this layout (shared memory per CTA, or CTAs per cluster); "
                     "replace the table line");
    } else {
      launch_fwd<Traits, Shape>(args, kPlan, stream);
    }
  }
};

}  // namespace normtune
