#include "fwd_tuned_sm90.cuh"

namespace normtune {
template void register_tuned_fwd_sm90<1>(Registry& registry);
}  // namespace normtune
