// The backward kernels' layout heuristic (host only).
#include <normtune/tuning.h>

#include "norm_fwd_plan.h"

namespace normtune {

namespace {
constexpr int kMaxThreads = 512;  // the kernels' launch bound
}

BwdPlan backward_plan(int hidden, int vec) {
  const int nvec = (hidden + vec - 1) / vec;
  // Vectors per thread: x and dz are both held, with fp32 dgamma (and dbeta) partials, so
  // the row in registers is half the forward's. Up to 2 vectors per thread the next row is
  // prefetched (64 registers); 4 vectors take 128 registers; longer rows use the
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

}  // namespace normtune
