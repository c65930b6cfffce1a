// How a forward call lays a row over threads (see kernels/norm_fwd.cuh): host-only, so the
// same plan serves the launcher, the tests and `normtune bench`.
#pragma once

namespace normtune {

struct FwdPlan {
  int vecs_per_thread = 1;  // kN; 0 = streaming (row re-read from L2)
  int threads_per_row = 1;  // G
  int ctas_per_row = 1;     // C (a cluster when > 1)
  int rows_per_cta = 1;     // R
};

// vec: elements per vector access (1 when the data is not vector-aligned).
// clusters: whether rows may be split over a thread-block cluster.
FwdPlan plan_forward(int hidden, int vec, bool clusters);

}  // namespace normtune
