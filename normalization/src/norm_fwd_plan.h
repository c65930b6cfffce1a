// How a forward call lays a row over threads (see kernels/norm_fwd.cuh): host-only.
#pragma once

#include <normtune/tuning.h>

namespace normtune {

// The built-in heuristic. vec: elements per vector access (1 when the data is not
// vector-aligned). clusters: whether rows may be split over a thread-block cluster.
FwdPlan plan_forward(int hidden, int vec, bool clusters);

// A row of nvec vectors held n per thread by one CTA: threads per row (a power of two below
// the warp size, else whole warps) and rows per CTA (128-thread CTAs for short rows).
FwdPlan plan_row_in_registers(int nvec, int n);

// Whether a plan can run a row of `hidden` elements at vector width `vec`.
bool plan_fits(const FwdPlan& plan, int hidden, int vec, bool clusters);

}  // namespace normtune
