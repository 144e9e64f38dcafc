// Same job as OpenReg's csrc/runtime/OpenRegGuard.h (torch_npu: csrc/core/npu/impl/NPUGuardImpl.h).
#pragma once

#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdint>
#include <functional>

namespace toychip {

// The chip computes synchronously, so events have nothing to wait for; what they measure
// is the *simulated* clock, which lives in Python. Module.cpp fills these with callables
// that take the GIL; this file stays free of Python headers.
struct EventHooks {
  std::function<void(int64_t event, c10::DeviceIndex device, c10::StreamId stream)> record;
  std::function<void(int64_t event, c10::DeviceIndex device, c10::StreamId stream)> block;
  std::function<double(int64_t start, int64_t end)> elapsed;  // milliseconds
  std::function<void(int64_t event)> destroy;
  // The host waits: for a stream, for the stream an event was recorded on (up to the
  // record), or for every stream of a device (torch.accelerator.synchronize).
  std::function<void(c10::DeviceIndex device, c10::StreamId stream)> synchronize_stream;
  std::function<void(int64_t event)> synchronize_event;
  std::function<void(c10::DeviceIndex device)> synchronize_device;
};

void set_event_hooks(EventHooks hooks);  // an empty EventHooks{} unregisters them

// The calling thread's current stream on a device (0: the device's default stream).
c10::StreamId current_stream_id(c10::DeviceIndex device);

struct ToyChipGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  // devices
  c10::Device exchangeDevice(c10::Device device) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device device) const override;
  void uncheckedSetDevice(c10::Device device) const noexcept override;
  c10::DeviceIndex deviceCount() const noexcept override;
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override;

  // streams
  c10::Stream getStream(c10::Device device) const override;
  c10::Stream getDefaultStream(c10::Device device) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool isHighPriority = false) const override;
  c10::Stream getNewStream(c10::Device device, int priority = 0) const override;
  c10::Stream exchangeStream(c10::Stream stream) const override;
  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void synchronizeDevice(c10::DeviceIndex device_index) const override;

  // events
  void record(void** event, const c10::Stream& stream, c10::DeviceIndex device_index,
              c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* start, void* end, c10::DeviceIndex device_index) const override;
  void destroyEvent(void* event, c10::DeviceIndex device_index) const noexcept override;
};

} // namespace toychip
