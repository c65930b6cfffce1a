// The layout heuristics (forward and backward), what fits, the tuner's candidates and the
// per-thread overrides. Host only.
#include <algorithm>

#include <normtune/common/platform.h>
#include <normtune/tuning.h>

namespace normtune {

namespace {

constexpr int kWarpSize = platform::kWarpSize;
constexpr int kTargetThreads = 128;  // threads per CTA for short rows (tuned)

int ceil_div(int a, int b) { return (a + b - 1) / b; }

bool is_group_size(int g) {
  return g >= 1 && (g >= kWarpSize ? g % kWarpSize == 0 : (g & (g - 1)) == 0);
}

// A row of nvec vectors held n per thread by one CTA; 128-thread CTAs for short rows.
FwdPlan row_in_registers(int nvec, int n) {
  FwdPlan plan;
  plan.vecs_per_thread = n;
  plan.threads_per_row = threads_per_row_for(nvec, n, kWarpSize);
  plan.rows_per_cta = plan.threads_per_row >= kTargetThreads ? 1 : kTargetThreads / plan.threads_per_row;
  return plan;
}

FwdPlan streaming() {
  FwdPlan plan;
  plan.layout = FwdLayout::kStreaming;
  plan.threads_per_row = kMaxCtaThreads;
  return plan;
}

// Staged slices: at most this many 16-byte vectors per CTA for the planner's choice (32 KiB:
// several CTAs per SM), and at most kMaxStagedVecs per thread for any plan.
constexpr int kStagedSliceVecs = 2048;
constexpr int kMaxStagedVecs = 32;

FwdPlan staged(int nvec, int ctas, int threads) {
  FwdPlan plan;
  plan.layout = FwdLayout::kStaged;
  plan.ctas_per_row = ctas;
  plan.threads_per_row = threads;
  plan.vecs_per_thread = ceil_div(ceil_div(nvec, ctas), threads);
  return plan;
}

// Pipelined: the row over `ctas` CTAs of `threads` threads holding n vectors each, one row per
// CTA at a time, several rows in flight.
FwdPlan pipelined(int ctas, int threads, int n) {
  FwdPlan plan;
  plan.layout = FwdLayout::kPipelined;
  plan.ctas_per_row = ctas;
  plan.threads_per_row = threads;
  plan.vecs_per_thread = n;
  return plan;
}

}  // namespace

FwdPlan forward_streaming_plan() { return streaming(); }

int threads_per_row_for(int nvec, int n, int warp_size) {
  const int threads = ceil_div(nvec, n);
  if (threads >= warp_size) return ceil_div(threads, warp_size) * warp_size;
  int g = 1;
  while (g < threads) g *= 2;
  return g;
}

// ---- forward ----------------------------------------------------------------------------
// Rows longer than registers hold, staged in shared memory, x read once. With clusters, the
// row is split over the fewest CTAs (up to kMaxCtasPerRow) that keep each slice within 32
// KiB, 256 threads each (several CTAs per SM overlap); past 16 CTAs the slices grow (512
// threads). Without clusters, one CTA holds the row when it fits 64 KiB. Beyond that, rows
// stream through L2 (read twice). The launcher streams as well when the device cannot hold
// the plan.
namespace {
FwdPlan staged_long_rows(int nvec, bool clusters) {
  if (clusters) {
    int c = 2;
    while (c < kMaxCtasPerRow && ceil_div(nvec, c) > kStagedSliceVecs) c *= 2;
    const FwdPlan plan = staged(nvec, c, ceil_div(nvec, c) > kStagedSliceVecs ? kMaxCtaThreads : 256);
    if (plan.vecs_per_thread <= kMaxStagedVecs) return plan;
  } else if (nvec <= 2 * kStagedSliceVecs) {
    return staged(nvec, 1, kMaxCtaThreads);
  }
  return streaming();
}
}  // namespace

FwdPlan plan_forward(int hidden, int vec, bool clusters, NormType /*norm: the same plans*/, Stage stage) {
  const int nvec = ceil_div(hidden, vec);
  if (vec == 1) {
    // Unaligned data: scalar accesses, 8 per thread in registers, or streaming.
    return nvec <= 8 * kMaxCtaThreads ? row_in_registers(nvec, 8) : streaming();
  }
  // Four vectors per thread (what `normtune tune` found fastest on the H200 for every hidden
  // size from 128 to 4096), fewer only for tiny rows.
  if (nvec <= 4 * kMaxCtaThreads) return row_in_registers(nvec, nvec >= 4 ? 4 : nvec >= 2 ? 2 : 1);
  // Longer rows with clusters: pipelined, the row over the fewest CTAs (up to
  // kMaxCtasPerRow) that keep each slice within 4096 vectors of 512 threads (64 KiB a stage
  // for 16-bit x; 2048 with the fused add, whose stages hold the residual too), 4 vectors
  // per thread when 2048 suffice. What `normtune tune` found fastest on the H200 (bf16,
  // 8192 x 32768: one CTA of 8 x 512 vectors, 285 µs; 1024 x 262144: 8 CTAs, 283 µs; a
  // cluster of 16 CTAs of 512 threads ran 369 µs there). The staged layout, one slice per
  // CTA, measured 1.2-1.4x a copy on such rows: every CTA idles on HBM while it reduces,
  // and re-reads gamma from L2 for each row. LayerNorm takes it too since its pipelined
  // kernel holds beta in shared memory (with gamma and beta both in registers it spilled and
  // ran slower than its staged layout, 1.6-2.1x the copy).
  if (clusters) {
    const int max_slice = stage == Stage::kForwardAdd ? 4 * kMaxCtaThreads : 8 * kMaxCtaThreads;
    int c = 1;
    while (c < kMaxCtasPerRow && ceil_div(nvec, c) > max_slice) c *= 2;
    const int per_cta = ceil_div(nvec, c);
    if (per_cta <= 4 * kMaxCtaThreads) return pipelined(c, kMaxCtaThreads, 4);
    if (per_cta <= max_slice) return pipelined(c, kMaxCtaThreads, 8);
  }
  return staged_long_rows(nvec, clusters);
}

FwdPlan plan_forward_block_scaled(int hidden, int vec, bool clusters, int block_elements) {
  const int nvec = ceil_div(hidden, vec);
  const int group = std::max(block_elements / vec, 1);  // lanes that hold one block
  // Rows of up to 4 vectors per thread: staged, the shape of the register layout (four
  // vectors per thread, 128-thread CTAs), at least one block's lanes per row.
  if (nvec <= 4 * kMaxCtaThreads) {
    const int g = std::max(threads_per_row_for(nvec, nvec >= 4 ? 4 : nvec >= 2 ? 2 : 1, kWarpSize), group);
    FwdPlan plan = staged(nvec, 1, g);
    plan.rows_per_cta = g < kTargetThreads ? kTargetThreads / g : 1;
    return plan;
  }
  // Longer rows: the staged plan of a high-precision z (its thread counts are whole warps),
  // else one CTA (no clusters) or the largest cluster, kMaxCtaThreads each.
  const FwdPlan plan = vec > 1 ? staged_long_rows(nvec, clusters) : streaming();
  if (plan.layout == FwdLayout::kStaged) return plan;
  return staged(nvec, clusters ? kMaxCtasPerRow : 1, kMaxCtaThreads);
}

bool plan_fits(const FwdPlan& p, int hidden, int vec, bool clusters) {
  const int nvec = ceil_div(hidden, vec);
  const bool registers = p.layout == FwdLayout::kRegisters;
  const bool staged_layout = p.layout == FwdLayout::kStaged;
  const bool shape_ok = is_group_size(p.threads_per_row) && p.rows_per_cta >= 1 &&
                        p.threads_per_row * p.rows_per_cta <= kMaxCtaThreads;
  const bool n_ok = registers ? p.vecs_per_thread == 1 || p.vecs_per_thread == 2 || p.vecs_per_thread == 4 ||
                                    p.vecs_per_thread == 8
                              : !staged_layout || (p.vecs_per_thread >= 1 && p.vecs_per_thread <= kMaxStagedVecs);
  const bool cluster_ok = p.ctas_per_row == 1 ||
                          (clusters && p.ctas_per_row >= 1 && p.ctas_per_row <= kMaxCtasPerRow &&
                           p.rows_per_cta == 1 && p.threads_per_row >= kWarpSize);
  const bool covers = p.layout == FwdLayout::kStreaming || p.vecs_per_thread * p.threads_per_row * p.ctas_per_row >= nvec;
  if (p.layout == FwdLayout::kPipelined) {
    // 16-byte vectors, 2, 4 or 8 per thread, whole warps, one row per CTA.
    return vec > 1 && (p.vecs_per_thread == 2 || p.vecs_per_thread == 4 || p.vecs_per_thread == 8) &&
           p.threads_per_row >= kWarpSize && p.threads_per_row % kWarpSize == 0 &&
           p.threads_per_row <= kMaxCtaThreads && p.rows_per_cta == 1 && p.ctas_per_row >= 1 &&
           p.ctas_per_row <= kMaxCtasPerRow && (p.ctas_per_row == 1 || clusters) && covers;
  }
  // Scalar (unaligned) data: registers with 8 per thread, or streaming; staged copies need
  // 16-byte vectors.
  const bool scalar_ok = vec > 1 || (registers ? p.vecs_per_thread == 8 : !staged_layout);
  return shape_ok && n_ok && cluster_ok && covers && scalar_ok;
}

std::vector<FwdPlan> forward_plan_candidates(int hidden, int vec, int warp, int max_cluster) {
  std::vector<FwdPlan> out;
  const int nvec = ceil_div(hidden, vec);
  for (int n : {1, 2, 4, 8}) {
    const int g = threads_per_row_for(nvec, n, warp);
    for (int r : {1, 2, 4, 8, 16, 32, 64}) {
      const int threads = g * r;
      if (threads > kMaxCtaThreads || threads < 64) continue;
      for (bool persistent : {true, false}) {
        const FwdPlan plan{.vecs_per_thread = n, .threads_per_row = g, .rows_per_cta = r, .persistent = persistent};
        if (plan_fits(plan, hidden, vec, false)) out.push_back(plan);
      }
    }
  }
  // Rows of 1024 vectors and more: split over clusters of 2..max_cluster CTAs, at least two
  // warps per CTA, each CTA's slice in registers.
  for (int c = 2; c <= max_cluster && nvec >= 1024; c *= 2) {
    for (int n : {2, 4, 8}) {
      const int g = threads_per_row_for(ceil_div(nvec, c), n, warp);
      if (g < 2 * warp || g > kMaxCtaThreads) continue;
      for (bool persistent : {true, false}) {
        const FwdPlan plan{.vecs_per_thread = n, .threads_per_row = g, .ctas_per_row = c, .persistent = persistent};
        if (plan_fits(plan, hidden, vec, true)) out.push_back(plan);
      }
    }
  }
  // Staged: one CTA holding 1..16 rows, or a cluster of 2..max_cluster CTAs per row.
  for (int n : {1, 2, 4, 8, 16}) {
    const int g = threads_per_row_for(nvec, n, warp);
    for (int r : {1, 2, 4, 8, 16}) {
      const int threads = g * r;
      if (threads > kMaxCtaThreads || threads < 64) continue;
      for (bool weights : {false, true}) {
        FwdPlan plan = staged(nvec, 1, g);
        plan.rows_per_cta = r;
        plan.stage_weights = weights;
        if (plan_fits(plan, hidden, vec, false) && std::find(out.begin(), out.end(), plan) == out.end()) {
          out.push_back(plan);
        }
      }
    }
  }
  for (int c = 2; c <= max_cluster && nvec >= 1024; c *= 2) {
    for (int g : {128, 256, 512}) {
      for (bool weights : {false, true}) {
        FwdPlan plan = staged(nvec, c, g);
        plan.stage_weights = weights;
        if (plan.vecs_per_thread <= 16 && plan_fits(plan, hidden, vec, true) &&
            std::find(out.begin(), out.end(), plan) == out.end()) {
          out.push_back(plan);
        }
      }
    }
  }
  // Pipelined: rows of 256 vectors and more over 1..max_cluster CTAs, each slice at most
  // twice what the row needs.
  for (int c = 1; c <= std::max(max_cluster, 1) && nvec >= 256; c *= 2) {
    for (int g : {128, 256, 512}) {
      for (int n : {2, 4, 8}) {
        const FwdPlan plan = pipelined(c, g, n);
        if (n * g * c < 2 * nvec && plan_fits(plan, hidden, vec, c > 1)) out.push_back(plan);
      }
    }
  }
  // Streaming for every row longer than the cluster-free register layouts hold.
  if (nvec > 4 * kMaxCtaThreads) out.push_back(streaming());
  if (out.empty()) out.push_back(streaming());
  return out;
}

// ---- backward ---------------------------------------------------------------------------
// The pipelined backward layout (rows too long for one CTA's registers): 512 threads, 4
// vectors of x and dz per thread where a cluster of up to 16 CTAs holds the row with two
// ring stages of that size in the device's shared memory, else 2; 0 CTAs: the row does not
// fit.
namespace {
BwdPlan bwd_pipelined(int ctas, int threads, int vecs) {
  return BwdPlan{.layout = BwdLayout::kPipelined, .vecs_per_thread = vecs, .threads_per_row = threads,
                 .ctas_per_row = ctas};
}
int bwd_pipelined_ctas(int nvec, int vecs) { return ceil_div(nvec, vecs * kMaxCtaThreads); }
}  // namespace

size_t pipelined_backward_min_smem(const BwdPlan& plan) {
  constexpr size_t kStaticReserve = 2048;  // the row reduction's and the cluster exchange's slots
  const size_t slice = static_cast<size_t>(plan.vecs_per_thread) * plan.threads_per_row;
  // two stages of x and dz per row group, 16-byte vectors
  return static_cast<size_t>(std::max(plan.rows_per_cta, 1)) * 2 * 2 * slice * 16 + kStaticReserve;
}

BwdPlan plan_backward(int hidden, int vec, bool clusters, size_t smem_per_cta) {
  const int nvec = ceil_div(hidden, vec);
  // Vectors per thread: x and dz are both held, so the row in registers is half the
  // forward's. Up to 2 vectors per thread fit 64 registers (1024 threads per SM), 4 take
  // 128 (the fp32 partials of wide layouts live in shared memory); longer rows use the
  // column-tiled path.
  int n = 0;
  if (vec == 1) {
    n = nvec <= 8 * kMaxCtaThreads ? 8 : 0;
  } else if (nvec <= 2 * kMaxCtaThreads) {
    n = nvec >= 2 ? 2 : 1;
  } else if (nvec <= 4 * kMaxCtaThreads) {
    n = 4;
  }
  if (n == 0) {
    // Rows over a cluster: x and dz read once (the column tiles read them twice); 4 vectors
    // per thread on half the CTAs first, as the bf16 RMSNorm and LayerNorm lines at 32768 and
    // 65536 (2 where the stages of 4 do not fit the device's shared memory).
    for (int vecs : {4, 2}) {
      const BwdPlan plan = bwd_pipelined(bwd_pipelined_ctas(nvec, vecs), kMaxCtaThreads, vecs);
      const bool smem_ok = smem_per_cta == 0 || pipelined_backward_min_smem(plan) <= smem_per_cta;
      if (plan_fits(plan, hidden, vec, clusters) && smem_ok) return plan;
    }
    return BwdPlan{.layout = BwdLayout::kColumns};
  }
  const FwdPlan rows = row_in_registers(nvec, n);
  return BwdPlan{.vecs_per_thread = n, .threads_per_row = rows.threads_per_row, .rows_per_cta = rows.rows_per_cta};
}

bool plan_fits(const BwdPlan& p, int hidden, int vec, bool clusters) {
  if (p.layout == BwdLayout::kColumns) return true;  // any row
  const int nvec = ceil_div(hidden, vec);
  if (p.layout == BwdLayout::kPipelined) {
    // 16-byte vectors, 2 or 4 per thread, whole warps; one row per CTA, or with one CTA per row
    // and 2 vectors per thread up to kMaxBwdRowGroups row groups (a named barrier each; with 4
    // vectors, LayerNorm's general kernel with groups spilled).
    const bool groups_ok = p.rows_per_cta == 1 || (p.rows_per_cta >= 1 && p.rows_per_cta <= kMaxBwdRowGroups &&
                                                   p.ctas_per_row == 1 && p.vecs_per_thread == 2);
    return vec > 1 && (p.vecs_per_thread == 2 || p.vecs_per_thread == 4) && p.threads_per_row >= kWarpSize &&
           p.threads_per_row % kWarpSize == 0 && p.threads_per_row * p.rows_per_cta <= kMaxCtaThreads && groups_ok &&
           p.ctas_per_row >= 1 && p.ctas_per_row <= kMaxCtasPerRow && (p.ctas_per_row == 1 || clusters) &&
           p.vecs_per_thread * p.threads_per_row * p.ctas_per_row >= nvec;
  }
  if (p.ctas_per_row != 1) return false;
  const int g = p.threads_per_row;
  const bool n_ok = vec == 1 ? p.vecs_per_thread == 8
                             : p.vecs_per_thread == 1 || p.vecs_per_thread == 2 || p.vecs_per_thread == 4;
  return n_ok && is_group_size(g) && p.rows_per_cta >= 1 && g * p.rows_per_cta <= kMaxCtaThreads &&
         p.vecs_per_thread * g >= nvec;
}

// Backward layouts: 1, 2 or 4 vectors of x and dz per thread, every rows-per-CTA count up
// to kMaxCtaThreads threads, the long-row (column-tiled) path, and the pipelined ones below.
std::vector<BwdPlan> backward_plan_candidates(int hidden, int vec, int warp, int max_cluster) {
  std::vector<BwdPlan> out{BwdPlan{.layout = BwdLayout::kColumns}};
  const int nvec = ceil_div(hidden, vec);
  for (int n : {1, 2, 4}) {
    const int g = threads_per_row_for(nvec, n, warp);
    for (int r : {1, 2, 4, 8, 16, 32, 64}) {
      const int threads = g * r;
      if (threads > kMaxCtaThreads || threads < 64) continue;
      const BwdPlan plan{.vecs_per_thread = n, .threads_per_row = g, .rows_per_cta = r};
      if (plan_fits(plan, hidden, vec)) out.push_back(plan);
    }
  }
  // Pipelined: rows of 1024 vectors and more over 1..max_cluster CTAs, each slice at most
  // twice what the row needs.
  for (int c = 1; c <= std::max(max_cluster, 1) && nvec >= 1024; c *= 2) {
    for (int g : {128, 256, 512}) {
      for (int n : {2, 4}) {
        const BwdPlan plan = bwd_pipelined(c, g, n);
        if (n * g * c < 2 * nvec && plan_fits(plan, hidden, vec, c > 1)) out.push_back(plan);
      }
    }
  }
  // Pipelined on one CTA from 128 vectors (1024 bf16 elements) up, as many threads as the row
  // needs: the next rows' x and dz wait in shared memory rather than in more resident CTAs, so
  // there are fewer programs per SM than with the register layouts, and fewer fp32 partial
  // rows of dgamma for the finalize to read (slices of at most 4 x kMaxCtaThreads vectors, as
  // above: two stages of x and dz in 128 KiB).
  // And those CTAs in row groups of 2..4 (one partial row per CTA rather than per group; 2
  // vectors per thread).
  for (int n : {2, 4}) {
    for (int r : {1, 2, 3, 4}) {
      BwdPlan plan = bwd_pipelined(1, threads_per_row_for(nvec, n, warp), n);
      plan.rows_per_cta = r;
      if (nvec >= 128 && plan_fits(plan, hidden, vec) && std::find(out.begin(), out.end(), plan) == out.end()) {
        out.push_back(plan);
      }
    }
  }
  // And the heuristic's (its cluster need not be a power of two).
  const BwdPlan heuristic = plan_backward(hidden, vec, max_cluster > 1);
  if (heuristic.layout == BwdLayout::kPipelined && heuristic.ctas_per_row <= max_cluster &&
      std::find(out.begin(), out.end(), heuristic) == out.end()) {
    out.push_back(heuristic);
  }
  return out;
}

// ---- overrides --------------------------------------------------------------------------
namespace {
thread_local const FwdPlan* t_fwd_override = nullptr;
thread_local const BwdPlan* t_bwd_override = nullptr;
}  // namespace

const FwdPlan* set_forward_plan_override(const FwdPlan* plan) {
  const FwdPlan* previous = t_fwd_override;
  t_fwd_override = plan;
  return previous;
}

const FwdPlan* forward_plan_override() { return t_fwd_override; }

FwdPlan forward_plan(int hidden, int vec, bool clusters, NormType norm, Stage stage) {
  if (t_fwd_override != nullptr && plan_fits(*t_fwd_override, hidden, vec, clusters)) return *t_fwd_override;
  return plan_forward(hidden, vec, clusters, norm, stage);
}

const BwdPlan* set_backward_plan_override(const BwdPlan* plan) {
  const BwdPlan* previous = t_bwd_override;
  t_bwd_override = plan;
  return previous;
}

const BwdPlan* backward_plan_override() { return t_bwd_override; }

BwdPlan backward_plan(int hidden, int vec, bool clusters, size_t smem_per_cta) {
  if (t_bwd_override != nullptr && plan_fits(*t_bwd_override, hidden, vec, clusters)) return *t_bwd_override;
  return plan_backward(hidden, vec, clusters, smem_per_cta);
}

}  // namespace normtune
