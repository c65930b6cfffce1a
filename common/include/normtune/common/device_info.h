// Per-device properties, queried once per device and cached (no blocking query on a hot
// launch path).
#pragma once

#include <string>

#include <normtune/common/platform.h>

namespace normtune {

// Devices a process may use; per-device caches are arrays of this size.
inline constexpr int kMaxDevices = 64;

struct DeviceInfo {
  int device = -1;
  std::string name;
  int sm_count = 0;           // streaming multiprocessors (compute units on AMD)
  int cc_major = 0;           // compute capability (gfx9 reports 9.x on HIP)
  int cc_minor = 0;
  int warp_size = 0;          // as the runtime reports it; must equal platform::kWarpSize
  size_t l2_bytes = 0;
  size_t global_memory_bytes = 0;
  size_t shared_memory_per_block = 0;
  size_t shared_memory_per_block_optin = 0;  // with the kernel attribute (227 KiB on sm_90)
  bool supports_clusters = false;  // thread-block clusters (sm_90+ on NVIDIA)
  std::string arch_name;      // "sm_90", or the gcnArchName on AMD ("gfx90a:sramecc+:xnack-")
};

// Number of visible GPUs; 0 (never an error) when there is no device or no driver.
int device_count();

// The caller's current device.
int current_device();

// Cached properties of `device`; the first call per device queries the runtime.
const DeviceInfo& device_info(int device);

}  // namespace normtune
