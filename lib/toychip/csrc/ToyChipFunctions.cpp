// Same job as OpenReg's csrc/runtime/OpenRegFunctions.cpp (torch_npu: csrc/core/npu/NPUFunctions.cpp).
#include "ToyChipFunctions.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace toychip {

namespace {
std::atomic<c10::DeviceIndex> g_device_count{2};
std::atomic<bool> g_frozen{false};
// Thread-local like a CUDA context's current device: each thread selects its own chip.
thread_local c10::DeviceIndex t_current_device = 0;
} // namespace

c10::DeviceIndex device_count() noexcept {
  return g_device_count.load(std::memory_order_relaxed);
}

void set_device_count(c10::DeviceIndex count) {
  TORCH_CHECK_VALUE(
      count >= 1 && count <= kMaxDevices,
      "toychip: the device count must be between 1 and ", static_cast<int>(kMaxDevices),
      ", not ", static_cast<int>(count));
  if (count == device_count()) {
    return;
  }
  TORCH_CHECK(
      !g_frozen.load(),
      "toychip: set_device_count(", static_cast<int>(count),
      ") comes too late: tensors, streams or generators already exist on ",
      static_cast<int>(device_count()), " device(s); set the count before the first one");
  g_device_count.store(count);
}

void freeze_device_count() noexcept {
  g_frozen.store(true, std::memory_order_relaxed);
}

void check_device(c10::DeviceIndex index) {
  auto count = device_count();
  TORCH_CHECK(
      index >= 0 && index < count,
      "The device index is out of range: toychip:", static_cast<int>(index), " does not exist; the chip has ",
      static_cast<int>(count), count == 1 ? " device (toychip:0)" : " devices (toychip:0 … toychip:",
      count == 1 ? "" : std::to_string(count - 1), count == 1 ? "" : ")");
}

c10::DeviceIndex resolve(c10::DeviceIndex index) {
  if (index < 0) {
    return t_current_device;
  }
  check_device(index);
  return index;
}

c10::DeviceIndex current_device() noexcept {
  return t_current_device;
}

void set_device(c10::DeviceIndex index) {
  check_device(index);
  t_current_device = index;
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  check_device(index);
  auto previous = t_current_device;
  t_current_device = index;
  return previous;
}

} // namespace toychip
