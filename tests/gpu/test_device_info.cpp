// Device properties cache (label gpu: skips without a device).
#include <gtest/gtest.h>

#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/registry/registry.h>

namespace normtune {
namespace {

class DeviceInfoGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no GPU visible: device tests skipped";
  }
};

TEST_F(DeviceInfoGpu, PropertiesAreCachedAndSane) {
  const DeviceInfo& a = device_info(0);
  const DeviceInfo& b = device_info(0);
  EXPECT_EQ(&a, &b);
  EXPECT_GT(a.sm_count, 0);
  EXPECT_EQ(a.warp_size, platform::kWarpSize);
  EXPECT_NE(arch_family_of(a.cc_major, a.cc_minor, platform::kIsHip), ArchFamily::kAny);
  EXPECT_FALSE(a.name.empty());
}

TEST_F(DeviceInfoGpu, OutOfRangeDeviceIsAClearError) {
  EXPECT_THROW(device_info(device_count()), Error);
  EXPECT_THROW(device_info(-1), Error);
}

TEST(DeviceInfo, DeviceCountNeverThrows) { EXPECT_GE(device_count(), 0); }

}  // namespace
}  // namespace normtune
