// Same job as OpenReg's csrc/runtime/OpenRegHooks.h (torch_npu: csrc/core/npu/NPUHooksInterface.h).
#pragma once

#include <ATen/detail/PrivateUse1HooksInterface.h>

namespace toychip {

// What ATen asks a PrivateUse1 backend for outside the dispatcher: is it there, its
// generators, pinned memory, which device a pointer is on, resizing a storage.
struct ToyChipHooks final : public at::PrivateUse1HooksInterface {
  void init() const override {}  // nothing to start: the chip is always ready
  bool isBuilt() const override { return true; }
  bool isAvailable() const override;
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override;

  c10::DeviceIndex deviceCount() const override;
  c10::DeviceIndex getCurrentDevice() const override;
  void setCurrentDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override;

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override;
  at::Generator getNewGenerator(c10::DeviceIndex device_index = -1) const override;

  c10::Device getDeviceFromPtr(void* data) const override;
  bool isPinnedPtr(const void* data) const override;
  c10::Allocator* getPinnedMemoryAllocator() const override;
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

} // namespace toychip
