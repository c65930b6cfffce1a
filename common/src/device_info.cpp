#include <normtune/common/device_info.h>

#include <array>
#include <memory>
#include <mutex>

#include <normtune/common/error.h>

namespace normtune {

namespace {


struct Cache {
  std::array<std::once_flag, kMaxDevices> once;
  std::array<std::unique_ptr<DeviceInfo>, kMaxDevices> info;
};

Cache& cache() {
  static Cache c;
  return c;
}

std::unique_ptr<DeviceInfo> query(int device) {
  cudaDeviceProp prop{};
  NORMTUNE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  auto info = std::make_unique<DeviceInfo>();
  info->device = device;
  info->name = prop.name;
  info->sm_count = prop.multiProcessorCount;
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->warp_size = prop.warpSize;
  info->l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info->global_memory_bytes = prop.totalGlobalMem;
  info->shared_memory_per_block = prop.sharedMemPerBlock;
  info->shared_memory_per_block_optin = platform::shared_memory_optin(prop);
  info->arch_name = platform::arch_name(prop);
  info->supports_clusters = platform::supports_clusters(device);
  NORMTUNE_CHECK(info->warp_size == platform::kWarpSize, "device ", device, " (", info->name,
                 ") has warp size ", info->warp_size, ", but this build of normtune expects ",
                 platform::kWarpSize);
  return info;
}

}  // namespace

int device_count() {
  // The set of visible devices is fixed when the runtime initializes: ask once.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the "no device"/"no driver" status
      return 0;
    }
    return n;
  }();
  return count;
}

int current_device() {
  // Without a device the runtime would be asked (and fail to initialize) on every call.
  NORMTUNE_CHECK(device_count() > 0, "no GPU is visible to this process (no device or no driver)");
  int device = 0;
  NORMTUNE_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

const DeviceInfo& device_info(int device) {
  const int count = device_count();
  NORMTUNE_CHECK_ARG(device >= 0 && device < kMaxDevices && device < count, "device",
                     detail::concat("a device index in [0, ", count, ")"), device);
  Cache& c = cache();
  std::call_once(c.once[device], [&] { c.info[device] = query(device); });
  return *c.info[device];
}

}  // namespace normtune
