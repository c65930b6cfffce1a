#include "bwd_tuned_sm90.cuh"

namespace normtune {
template void register_tuned_bwd_sm90<3>(Registry& registry);
}  // namespace normtune
