// The cuDNN backend's registry entries (cudnn_norm.cpp; built with NORMTUNE_ENABLE_CUDNN).
#pragma once

#include <cstddef>

#include <normtune/registry/registry.h>

namespace normtune {

// Adds a Backend::kCudnn entry for RMSNorm and LayerNorm, forward and backward, for every
// (wtype, itype) of the native type lists with z (dx) of x's dtype and no scaling.
void register_cudnn_entries(Registry& registry);

// What asked for cuDNN in this thread's current call ("NVTE_NORM_FWD_USE_CUDNN=1", ...): the
// backend's build and execution errors name it.
void set_cudnn_call_source(const char* source);

// The plan cache's state (tests, `normtune bench`).
struct CudnnCacheStats {
  size_t size = 0, capacity = 0, hits = 0, builds = 0;
};
CudnnCacheStats cudnn_plan_cache_stats();

}  // namespace normtune
