// Tuning hooks: what the autotuner (`normtune tune`) varies. Not for production calls.
#pragma once

namespace normtune {

// How a forward call lays rows over threads (see normalization/src/kernels/norm_fwd.cuh).
struct FwdPlan {
  int vecs_per_thread = 1;  // N: vectors each thread holds in registers; 0 = streaming
  int threads_per_row = 1;  // G: threads sharing a row
  int ctas_per_row = 1;     // C: CTAs sharing a row (a thread-block cluster when > 1)
  int rows_per_cta = 1;     // R: rows a CTA holds at once
  bool persistent = true;   // grid bounded by the resident CTAs (walks row tiles), or one tile per CTA

  bool operator==(const FwdPlan&) const = default;
};

// Until cleared with nullptr, this thread's forward calls run the general kernel (never a
// tuned one) with `plan` as its layout when the plan fits the call (else the heuristic's).
// Returns the previous override.
const FwdPlan* set_forward_plan_override(const FwdPlan* plan);

const FwdPlan* forward_plan_override();

// The layout the general forward kernel would use (the heuristic, or the override).
FwdPlan forward_plan(int hidden_size, int vector_elements, bool clusters);

// How a backward call lays rows over threads (see normalization/src/kernels/norm_bwd.cuh).
struct BwdPlan {
  int vecs_per_thread = 1;  // N: vectors of x and dz each thread holds; 0 = long rows
                            // (row terms streamed, then column tiles)
  int threads_per_row = 1;  // G (register-resident rows only)
  int rows_per_cta = 1;     // R (register-resident rows only)

  bool operator==(const BwdPlan&) const = default;
};

// Until cleared with nullptr, this thread's backward calls run the general kernel with `plan`
// as its layout when the plan fits the call (else the heuristic's). Returns the previous one.
const BwdPlan* set_backward_plan_override(const BwdPlan* plan);

const BwdPlan* backward_plan_override();

// The layout the general backward kernel uses for a row of `hidden_size` elements accessed
// `vector_elements` at a time (1 when the data is not vector-aligned): the heuristic, or the
// override.
BwdPlan backward_plan(int hidden_size, int vector_elements);

}  // namespace normtune
