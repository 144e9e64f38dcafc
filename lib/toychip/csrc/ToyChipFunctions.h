// Same job as OpenReg's csrc/runtime/OpenRegFunctions.h (torch_npu: csrc/core/npu/NPUFunctions.h).
#pragma once

#include <c10/core/Device.h>

namespace toychip {

// The chip's devices are fixed-size tables (current stream, default generator, stats):
// no locking on the hot paths, and 16 is far more than a course needs.
constexpr c10::DeviceIndex kMaxDevices = 16;

// How many devices toychip:N may address. Set once from Python before the first tensor.
c10::DeviceIndex device_count() noexcept;
void set_device_count(c10::DeviceIndex count);

// The first allocation, stream or generator calls this: from then on the count is fixed,
// because tensors, streams and generators refer to device indices.
void freeze_device_count() noexcept;

// The calling thread's current device (default 0), like cudaGetDevice/cudaSetDevice.
c10::DeviceIndex current_device() noexcept;
void set_device(c10::DeviceIndex index);
c10::DeviceIndex exchange_device(c10::DeviceIndex index);

// index == -1 means "the current device" everywhere PyTorch passes a DeviceIndex.
c10::DeviceIndex resolve(c10::DeviceIndex index);

// TORCH_CHECKs that toychip:index exists, naming the valid range.
void check_device(c10::DeviceIndex index);

} // namespace toychip
