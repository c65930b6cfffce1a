#include "norm_fwd_plan.h"

#include <normtune/common/platform.h>

namespace normtune {

namespace {

constexpr int kWarpSize = platform::kWarpSize;
constexpr int kMaxThreads = 512;  // the kernels' launch bound: up to 128 registers per thread
constexpr int kMaxCluster = 8;    // portable cluster size on sm_90
constexpr int kTargetThreads = 128;  // threads per CTA for short rows (tuned)

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Threads per row: a power of two below the warp size, else a whole number of warps.
int group_size(int threads) {
  if (threads >= kWarpSize) return ceil_div(threads, kWarpSize) * kWarpSize;
  int g = 1;
  while (g < threads) g *= 2;
  return g;
}

FwdPlan streaming() {
  FwdPlan plan;
  plan.vecs_per_thread = 0;
  plan.threads_per_row = kMaxThreads;
  return plan;
}

}  // namespace

FwdPlan plan_row_in_registers(int nvec, int n) {
  FwdPlan plan;
  plan.vecs_per_thread = n;
  plan.threads_per_row = group_size(ceil_div(nvec, n));
  plan.rows_per_cta =
      plan.threads_per_row >= kTargetThreads ? 1 : kTargetThreads / plan.threads_per_row;
  return plan;
}

FwdPlan plan_forward(int hidden, int vec, bool clusters) {
  const int nvec = ceil_div(hidden, vec);
  if (vec == 1) {
    // Unaligned data: scalar accesses, 8 per thread in registers, or streaming.
    return nvec <= 8 * kMaxThreads ? plan_row_in_registers(nvec, 8) : streaming();
  }
  // Four vectors per thread (what `normtune tune` found fastest on the H200 for every hidden
  // size from 128 to 4096), fewer only for tiny rows.
  if (nvec <= 4 * kMaxThreads) return plan_row_in_registers(nvec, nvec >= 4 ? 4 : nvec >= 2 ? 2 : 1);
  // Longer rows stream through L2 (read twice, the second time from L2). Splitting them
  // over a thread-block cluster, which the kernels support, measured slower on the H200
  // (a cluster barrier per row): tuned entries may still ask for it.
  (void)clusters;
  return streaming();
}

bool plan_fits(const FwdPlan& p, int hidden, int vec, bool clusters) {
  const int nvec = ceil_div(hidden, vec);
  const bool shape_ok = p.threads_per_row >= 1 && p.rows_per_cta >= 1 &&
                        p.threads_per_row * p.rows_per_cta <= kMaxThreads &&
                        (p.threads_per_row >= kWarpSize ? p.threads_per_row % kWarpSize == 0
                                                        : (p.threads_per_row & (p.threads_per_row - 1)) == 0);
  const bool n_ok = p.vecs_per_thread == 0 || p.vecs_per_thread == 1 || p.vecs_per_thread == 2 ||
                    p.vecs_per_thread == 4 || p.vecs_per_thread == 8;
  const bool cluster_ok = p.ctas_per_row == 1 ||
                          (clusters && p.ctas_per_row <= kMaxCluster && p.rows_per_cta == 1 &&
                           p.threads_per_row >= kWarpSize);
  const bool covers = p.vecs_per_thread == 0 ||
                      p.vecs_per_thread * p.threads_per_row * p.ctas_per_row >= nvec;
  const bool scalar_ok = vec > 1 || p.vecs_per_thread == 0 || p.vecs_per_thread == 8;
  return shape_ok && n_ok && cluster_ok && covers && scalar_ok;
}

namespace {
thread_local const FwdPlan* t_plan_override = nullptr;
}

const FwdPlan* set_forward_plan_override(const FwdPlan* plan) {
  const FwdPlan* previous = t_plan_override;
  t_plan_override = plan;
  return previous;
}

const FwdPlan* forward_plan_override() { return t_plan_override; }

FwdPlan forward_plan(int hidden, int vec, bool clusters) {
  if (t_plan_override != nullptr && plan_fits(*t_plan_override, hidden, vec, clusters)) {
    return *t_plan_override;
  }
  return plan_forward(hidden, vec, clusters);
}

}  // namespace normtune
