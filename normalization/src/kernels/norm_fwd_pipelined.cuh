// Forward RMSNorm / LayerNorm (optionally with the residual add), pipelined layout for long
// rows: persistent CTAs, a row split over a thread-block cluster of C CTAs (C = 1: one CTA),
// each CTA's slice of the row staged in shared memory by cp.async in a ring of S stages
// (2..4, p.stages), so that the next S - 1 rows' copies are in flight while this row
// reduces and stores. x is read
// from HBM once, gamma (and beta) once per CTA into registers: the staged layout
// (norm_fwd_staged.cuh), one slice per CTA, leaves every CTA idle on HBM while it reduces
// and re-reads gamma's slice from L2 for every row.
// Every z: unscaled, per-tensor FP8 (store_output), and row-wise block-scaled
// (store_block_scaled_part, kernels/block_quant.cuh: G a multiple of the block's lanes).
//
// Layout. CTA `rank` of cluster k walks rows k, k + K, k + 2K, ... (K clusters in the grid).
// Thread t copies, and later reads back, the vectors v = rank * (N * G) + i * G + t (i < N)
// of each row: only its own bytes, so no barrier between the copy and the read, and none
// before a stage is refilled.
// Exchange (C > 1): the row's statistics cross the cluster through distributed shared memory,
// one transaction barrier per stage, no cluster barrier per row (pipeline.cuh).
// Schedule. One CTA per row (C = 1) with p.row_counter: CTA k takes rows k, k + K, ...,
// k + (S - 1) K first and then row S K + n for each ticket n it draws from the counter (one
// atomicAdd per row, drawn a row ahead so that its latency hides behind a row's work), so that
// a CTA whose SM streams more slowly takes fewer rows (ncu, 8192 x 32768 bf16 on the H200,
// fixed rows per CTA: the SMs idle 7.6% of the kernel's cycles, waiting for the slowest). Rows
// are independent: the outputs are the same bits either way. A cluster (C > 1) does the same
// when its tuned line says dynamic_rows (Shape::kDynamicRows): rank 0's thread 0 draws the
// tickets and sends each to every CTA of the cluster with its partial statistics (one more
// word on the row's transaction barrier, ClusterRowExchange::combine), so the cluster learns
// its next row at no cost in latency. It is a per-line choice: on the H200 it gained 3-5% on
// the RMSNorm lines at 65536 and 262144 (there on wider clusters than the walk's best) and the
// fused add's at 32768 and 65536, and lost 4-30% on most other cluster lines
// (docs/perf/h200_2026-12-04_s38, _s39); without it cluster k walks rows k, k + K, ...
// Programmatic dependent launch: nothing global is touched before wait_for_prior_grid().
#pragma once

#include "kernels/block_quant.cuh"
#include "kernels/norm_fwd.cuh"
#include "kernels/norm_fwd_staged.cuh"
#include "kernels/pipeline.cuh"

namespace normtune {

// Shared memory of the ring: per stage the CTA's slice of x (and of the residual); after the
// ring, LayerNorm's slice of beta when it is held there (kBetaInSmem).
// LayerNorm keeps beta in shared memory, written once per CTA and read back by the thread
// that wrote it, and gamma in registers: with both in registers the 8-vector slices ran out
// of the 128 registers a 512-thread CTA leaves (136-176 bytes of stack per thread, spilled
// and reloaded for every row). A beta wider than x (fp32 beta with 16-bit x) would double
// that slice; it stays in registers.
template <typename Traits, int kVec>
struct PipelinedLayout {
  using VI = Vec<typename Traits::Input, kVec>;
  using VW = Vec<typename Traits::Weight, kVec>;
  static constexpr bool kBetaInSmem = !Traits::kRmsNorm && sizeof(VW) <= sizeof(VI);
  static constexpr size_t stage_bytes(int slice_vecs) {
    return static_cast<size_t>(slice_vecs) * sizeof(VI) * (Traits::kResidualAdd ? 2 : 1);
  }
  static constexpr size_t beta_bytes(int slice_vecs) {
    return kBetaInSmem ? static_cast<size_t>(slice_vecs) * sizeof(VW) : 0;
  }
  static constexpr size_t bytes(int slice_vecs, int stages) {
    return stages * stage_bytes(slice_vecs) + beta_bytes(slice_vecs);
  }
};

// Register budget: 128 (one 512-thread CTA per SM), or 64 (two) for the plain forward's slices
// of up to 4 vectors per thread with weights as wide as x. ptxas (bf16): RMSNorm / LayerNorm at 8
// vectors take 96 / 109 registers (spilling at 64); at 4 they took 80 / 72 under the 128 budget
// and fit 64 with no spills, which, with the launcher's smaller stage budget for them
// (kPipelinedTwoCtaSmem), lets two CTAs share an SM: 32 warps instead of 16 to hide the
// latency of a layout that ncu found latency-bound (LayerNorm 1024 x 262144: 4 warps per
// scheduler, DRAM at 57% of peak). The fused add keeps 128: its stages hold the residual too,
// so two CTAs would not fit anyway.
template <typename Traits, typename Shape>
inline constexpr int kPipelinedMinBlocks =
    !Traits::kResidualAdd && Shape::kN <= 4 && sizeof(typename Traits::Weight) == sizeof(typename Traits::Input) ? 2 : 1;

template <typename Traits, typename Shape>
__global__ void __launch_bounds__(kMaxCtaThreads, (kPipelinedMinBlocks<Traits, Shape>))
    norm_fwd_pipelined_kernel(const FwdParams p) {
  static_assert(Shape::kN >= 1, "the pipelined layout holds kN vectors per thread");
  using W = typename Traits::Weight;
  using I = typename Traits::Input;
  using O = typename Traits::Output;
  constexpr bool kRms = Traits::kRmsNorm;
  constexpr bool kAdd = Traits::kResidualAdd;
  constexpr int kVec = Shape::kVec;
  constexpr int N = Shape::kN;
  constexpr int K = kRms ? 1 : 3;
  using Layout = PipelinedLayout<Traits, kVec>;
  using VI = typename Layout::VI;
  using VW = typename Layout::VW;
  constexpr bool kBetaInSmem = Layout::kBetaInSmem;

  extern __shared__ __align__(kDynamicSmemAlign) uint4 staged_smem[];
  __shared__ ReduceSmem<K> smem;
  __shared__ ClusterRowExchange<K, kMaxPipelineStages> exchange;
  // Dynamic schedule: the rows of the stages' next fills, [(j / S + 1) % 2][j % S] written by
  // thread 0 in row j (for row j + S, before the reduction's CTA barrier) and read in rows j
  // (after it) and j + S.
  __shared__ unsigned next_rows[2][kMaxPipelineStages];
  __shared__ float block_table[kBlockTableSize<Traits>];  // NVFP4 z: BlockQuantizer's multipliers
  int phase = 0;

  const int hidden = Shape::kHidden ? Shape::kHidden : p.hidden;
  const int G = Shape::kG ? Shape::kG : static_cast<int>(blockDim.x);  // one row per CTA
  const int C = Shape::kC ? Shape::kC : p.ctas_per_row;
  const int nvec = hidden / kVec;
  const int slice = N * G;
  const int S = p.stages;
  const int t = threadIdx.x;
  const int rank = C > 1 ? platform::cluster_rank() : 0;
  const int64_t first_row = blockIdx.x / C;
  const int64_t row_step = gridDim.x / C;
  // The dynamic schedule: one CTA per row, or a cluster whose tuned line says dynamic_rows
  // (kernels without it leave that code out).
  constexpr bool kClusterTickets = Shape::kDynamicRows;
  unsigned* const counter = kClusterTickets || C == 1 ? p.row_counter : nullptr;
  // (The thread that draws the CTA's, or the cluster's, tickets.)
  const bool drawer = counter != nullptr && t == 0 && rank == 0;

  exchange.begin(S, C);

  auto vec_of = [&](int i) { return rank * slice + i * G + t; };  // the row's vector index
  // The ring: x (and the residual) of the next S rows.
  const SliceRing<VI, N, kAdd ? 2 : 1> ring{reinterpret_cast<char*>(staged_smem), slice, G, t, rank * slice, nvec};
  const I* const inputs[2] = {static_cast<const I*>(p.x), static_cast<const I*>(p.residual)};
  auto issue = [&](int64_t row, int s) { ring.issue(inputs, row, p.rows, hidden, s); };

  platform::wait_for_prior_grid();
  for (int s = 0; s < S; ++s) issue(first_row + s * row_step, s);
  // The ticket of the row after the first S (the counter was zeroed before the launch).
  unsigned pending = drawer ? atomicAdd(counter, 1u) : 0u;

  // This thread's gamma (and beta), loaded once while the first rows land: gamma into
  // registers, beta into registers or into its slice after the ring (this thread's own
  // vectors, read back only by it: no barrier).
  const W* gamma = static_cast<const W*>(p.gamma);
  const W* beta = static_cast<const W*>(p.beta);
  VW* beta_s = reinterpret_cast<VW*>(reinterpret_cast<char*>(staged_smem) + S * Layout::stage_bytes(slice));
  VW g[N], b[kBetaInSmem ? 1 : N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int v = vec_of(i);
    if (v < nvec) {
      g[i].load(gamma + static_cast<int64_t>(v) * kVec);
      if constexpr (kBetaInSmem) {
        VW bv;
        bv.load(beta + static_cast<int64_t>(v) * kVec);
        beta_s[i * G + t] = bv;
      } else if constexpr (!kRms) {
        b[i].load(beta + static_cast<int64_t>(v) * kVec);
      }
    }
  }
  // Block-scaled z: the quantizer of the CTA's rows (NVFP4: its table filled while the first
  // rows' copies are in flight); the vectors computed branch-free where the compile-time shape
  // covers the row exactly (every tuned line).
  if constexpr (1 < kBlockTableSize<Traits>) {
    BlockQuantizer<Traits>::fill_table(p, block_table);
    __syncthreads();
  }
  const auto quant = [&] {
    if constexpr (Traits::kBlockScaled) {
      return BlockQuantizer<Traits>(p, block_table);
    } else {
      return 0;
    }
  }();
  constexpr bool kExact = Shape::kHidden > 0 && Shape::kG > 0 && Shape::kC > 0 &&
                          N * Shape::kG * Shape::kC * kVec == Shape::kHidden;
  OutputScale q = output_scale<Traits>(p);
  const float gamma_shift = p.zero_centered_gamma ? 1.f : 0.f;
  const float inv_hidden = 1.f / static_cast<float>(hidden);

  const int64_t first_dynamic = static_cast<int64_t>(S) * row_step;  // the row of ticket 0
  int j = 0;
  for (;; ++j) {
    const int s = j % S;
    const int64_t row = counter == nullptr || j < S ? first_row + j * row_step : next_rows[(j / S) & 1][s];
    if (row >= p.rows) break;  // (rows are handed out in increasing order: so are all later ones)
    unsigned* const next_slot = &next_rows[(j / S + 1) & 1][s];
    // The row to fill this stage with next (the drawer's; a cluster's other CTAs and threads
    // get it through the exchange below), and the ticket after it drawn now.
    unsigned refill = 0;
    if (drawer) {
      refill = static_cast<unsigned>(first_dynamic) + pending;
      if (C == 1) *next_slot = refill;
      pending = atomicAdd(counter, 1u);
    }
    ring.wait(S);  // row j's copies (this thread's) have landed
    VI* xs = ring.stage(s);  // [x slice][residual slice]

    RowStats<kRms> stats;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int v = vec_of(i);
      if (v < nvec) {
        VI in = xs[i * G + t];
        if constexpr (kAdd) {
          const VI r = xs[slice + i * G + t];
#pragma unroll
          for (int k = 0; k < kVec; ++k) in.v[k] = from_float<I>(to_float(in.v[k]) + to_float(r.v[k]));
          in.store(static_cast<I*>(p.residual_out) + row * hidden + static_cast<int64_t>(v) * kVec);
          xs[i * G + t] = in;
        }
        stats.add(in);
      }
    }

    Floats<K> part;
    if constexpr (kRms) {
      part = group_reduce(Floats<1>{{stats.a}}, AddOp{}, G, 1, smem, phase);
    } else {
      // (MeanVarOp even on a tuned line covering its row exactly: row_mean_var's equal-count
      // merge measured neutral or slower here, H100, session 47: LayerNorm MXFP8 8192x32768
      // 304.2 -> 319.7 us, ptxas giving the kernel 80 registers where it had 127; FP8 1024x262144
      // 1.017x; a bf16 z 0.99-1.00x.)
      part = group_reduce(stats.to_mean_var(), MeanVarOp{}, G, 1, smem, phase);
    }
    // (Dynamic schedule: the reduction's CTA barrier orders the drawer's write of next_slot
    // before every thread's read; a one-warp CTA syncs its lanes instead.)
    if (counter != nullptr && G <= kWarp) platform::sync_warp();
    // (Dynamic schedule on a cluster: rank 0's drawer sends the refill row with its partials;
    // thread 0 keeps it for row j + S, read there after the CTA barriers of rows j + 1 ...)
    const bool ticket = kClusterTickets && counter != nullptr;
    if constexpr (kRms) {
      part = exchange.combine(part, AddOp{}, j, S, G, C, rank, ticket, refill);
    } else {
      part = exchange.combine(part, MeanVarOp{}, j, S, G, C, rank, ticket, refill);
    }
    if (ticket) {
      refill = exchange.ticket(j, S);
      if (t == 0) *next_slot = refill;
    }
    const float mean = kRms ? 0.f : part.v[K == 3 ? 1 : 0];
    const float rsigma = rsqrtf(part.v[K - 1] * inv_hidden + p.epsilon);
    if (t == 0 && rank == 0) {
      p.rsigma[row] = rsigma;
      if constexpr (!kRms) p.mu[row] = mean;
    }
    const NormValue<kRms, true> norm(mean, rsigma, gamma_shift);  // (one loop: see NormValue)
    if constexpr (Traits::kBlockScaled) {
      auto values = [&](int i, int, float(&y)[kVec]) {
        float xf[kVec], gf[kVec], bf[kVec];
        unpack_floats(xs[i * G + t], xf);
        unpack_floats(g[i], gf);
        if constexpr (kBetaInSmem) {
          unpack_floats(beta_s[i * G + t], bf);
        } else if constexpr (!kRms) {
          unpack_floats(b[i], bf);
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) y[k] = norm(xf[k], gf[k], kRms ? 0.f : bf[k]);
      };
      store_block_scaled_part<Traits, kVec, N, kExact>(p, quant, row, true, hidden, G, N, vec_of(0),
                                                       values);
    } else {
      O* z = static_cast<O*>(p.z) + row * hidden;
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const int v = vec_of(i);
        if (v < nvec) {
          O* zv = z + static_cast<int64_t>(v) * kVec;
          if constexpr (kBetaInSmem) {
            store_output(xs[i * G + t], g[i], beta_s[i * G + t], norm, zv, q);
          } else {
            store_output(xs[i * G + t], g[i], b[i], norm, zv, q);
          }
        }
      }
    }
    // Refill this stage (this thread's own bytes, all read above) with the row after next.
    issue(counter == nullptr ? row + S * row_step
                             : static_cast<int64_t>(kClusterTickets ? refill : *next_slot),
          s);
  }
  exchange.end(j, C);
  platform::allow_dependent_grid();
  finish_output<Traits>(p, q, &smem.warp_parts[0][0][0]);
}

}  // namespace normtune
