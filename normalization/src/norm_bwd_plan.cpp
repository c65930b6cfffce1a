// The backward kernels' layout heuristic (host only).
#include <normtune/tuning.h>

#include <normtune/common/platform.h>

#include "norm_fwd_plan.h"

namespace normtune {

namespace {

constexpr int kMaxThreads = 512;  // the kernels' launch bound
constexpr int kWarpSize = platform::kWarpSize;

thread_local const BwdPlan* t_plan_override = nullptr;

// Whether a plan can run a row of `hidden` elements at vector width `vec`.
bool plan_fits(const BwdPlan& p, int hidden, int vec) {
  const int nvec = (hidden + vec - 1) / vec;
  if (p.vecs_per_thread == 0) return true;  // long rows: any row
  const int g = p.threads_per_row;
  const bool n_ok = vec == 1 ? p.vecs_per_thread == 8
                             : p.vecs_per_thread == 1 || p.vecs_per_thread == 2 || p.vecs_per_thread == 4;
  const bool g_ok = g >= 1 && (g >= kWarpSize ? g % kWarpSize == 0 : (g & (g - 1)) == 0);
  return n_ok && g_ok && p.rows_per_cta >= 1 && g * p.rows_per_cta <= kMaxThreads &&
         p.vecs_per_thread * g >= nvec;
}

BwdPlan plan_backward(int hidden, int vec) {
  const int nvec = (hidden + vec - 1) / vec;
  // Vectors per thread: x and dz are both held, so the row in registers is half the
  // forward's. Up to 2 vectors per thread fit 64 registers (1024 threads per SM), 4 take
  // 128 (the fp32 partials of wide layouts live in shared memory); longer rows use the
  // column-tiled path.
  int n = 0;
  if (vec == 1) {
    n = nvec <= 8 * kMaxThreads ? 8 : 0;
  } else if (nvec <= 2 * kMaxThreads) {
    n = nvec >= 2 ? 2 : 1;
  } else if (nvec <= 4 * kMaxThreads) {
    n = 4;
  }
  if (n == 0) return {0, 0, 0};
  const FwdPlan rows = plan_row_in_registers(nvec, n);
  return {n, rows.threads_per_row, rows.rows_per_cta};
}

}  // namespace

const BwdPlan* set_backward_plan_override(const BwdPlan* plan) {
  const BwdPlan* previous = t_plan_override;
  t_plan_override = plan;
  return previous;
}

const BwdPlan* backward_plan_override() { return t_plan_override; }

BwdPlan backward_plan(int hidden, int vec) {
  if (t_plan_override != nullptr && plan_fits(*t_plan_override, hidden, vec)) return *t_plan_override;
  return plan_backward(hidden, vec);
}

}  // namespace normtune
