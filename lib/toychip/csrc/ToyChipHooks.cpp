// Same job as OpenReg's csrc/runtime/OpenRegHooks.cpp (torch_npu: csrc/core/npu/NPUHooksInterface.cpp).
#include "ToyChipHooks.h"

#include "ToyChipAllocator.h"
#include "ToyChipFunctions.h"
#include "ToyChipGenerator.h"
#include "ToyChipHostAllocator.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/Exception.h>

namespace toychip {

bool ToyChipHooks::isAvailable() const {
  return device_count() > 0;
}

bool ToyChipHooks::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return device_index >= 0 && device_index < device_count();  // no context to create
}

c10::DeviceIndex ToyChipHooks::deviceCount() const {
  return device_count();
}

c10::DeviceIndex ToyChipHooks::getCurrentDevice() const {
  return current_device();
}

void ToyChipHooks::setCurrentDevice(c10::DeviceIndex device) const {
  set_device(device);
}

c10::DeviceIndex ToyChipHooks::exchangeDevice(c10::DeviceIndex device) const {
  return exchange_device(device);
}

c10::DeviceIndex ToyChipHooks::maybeExchangeDevice(c10::DeviceIndex device) const {
  // "maybe": restoring a device that is not valid (-1, no device was set) is a no-op.
  if (device < 0 || device >= device_count()) {
    return current_device();
  }
  return exchange_device(device);
}

const at::Generator& ToyChipHooks::getDefaultGenerator(c10::DeviceIndex device_index) const {
  return default_generator(device_index);
}

at::Generator ToyChipHooks::getNewGenerator(c10::DeviceIndex device_index) const {
  return new_generator(device_index);
}

c10::Device ToyChipHooks::getDeviceFromPtr(void* data) const {
  auto device = device_of(data);
  TORCH_CHECK(device.has_value(), "toychip: ", data, " is not in the chip's memory");
  return c10::Device(c10::DeviceType::PrivateUse1, *device);
}

bool ToyChipHooks::isPinnedPtr(const void* data) const {
  return is_pinned(data);
}

c10::Allocator* ToyChipHooks::getPinnedMemoryAllocator() const {
  return at::getHostAllocator(at::kPrivateUse1);
}

void ToyChipHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  resize_bytes(storage, newsize);
}

// Registered when the extension is loaded; ATen keeps the raw pointer for good.
static bool g_registered [[maybe_unused]] = [] {
  at::RegisterPrivateUse1HooksInterface(new ToyChipHooks());
  return true;
}();

} // namespace toychip
