// Same job as OpenReg's csrc/runtime/OpenRegGuard.cpp (torch_npu: csrc/core/npu/impl/NPUGuardImpl.cpp).
#include "ToyChipGuard.h"

#include "ToyChipFunctions.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

namespace toychip {

namespace {

// Hooks are swapped as a whole so a call in flight keeps the set it started with.
// Leaked on purpose: the hooks hold Python objects, which must not be released by a static
// destructor after the interpreter is gone.
struct HookSlot {
  std::mutex mutex;
  std::shared_ptr<const EventHooks> hooks = std::make_shared<EventHooks>();
};
HookSlot& slot() {
  static auto* s = new HookSlot();
  return *s;
}

std::shared_ptr<const EventHooks> event_hooks() {
  std::lock_guard<std::mutex> lock(slot().mutex);
  return slot().hooks;
}

// Stream 0 is each device's default stream; new ones get ids from one counter, so an
// id names one stream whatever its device (the simulated clock keys timelines by id).
std::atomic<c10::StreamId> g_next_stream{1};
// Event ids live in the `void* event` slot PyTorch keeps for the backend; 0 = none yet.
std::atomic<int64_t> g_next_event{1};

// A CUDA-like current stream per (thread, device).
thread_local std::array<c10::StreamId, kMaxDevices> t_current_stream{};

int64_t event_id(void* event) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(event));
}

c10::Device chip(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

} // namespace

void set_event_hooks(EventHooks hooks) {
  std::shared_ptr<const EventHooks> fresh = std::make_shared<EventHooks>(std::move(hooks));
  std::lock_guard<std::mutex> lock(slot().mutex);
  slot().hooks.swap(fresh);  // the old set is released after the lock, by `fresh`
}

c10::StreamId current_stream_id(c10::DeviceIndex device) {
  return t_current_stream[resolve(device)];
}

// ------------------------------------------------------------------ devices
c10::Device ToyChipGuardImpl::exchangeDevice(c10::Device device) const {
  TORCH_CHECK(device.type() == kType, "toychip's device guard got a ", device.type(), " device");
  return chip(exchange_device(resolve(device.index())));
}

c10::Device ToyChipGuardImpl::getDevice() const {
  return chip(current_device());
}

void ToyChipGuardImpl::setDevice(c10::Device device) const {
  TORCH_CHECK(device.type() == kType, "toychip's device guard got a ", device.type(), " device");
  set_device(resolve(device.index()));
}

void ToyChipGuardImpl::uncheckedSetDevice(c10::Device device) const noexcept {
  // Called from guards' destructors: must not throw, so an invalid index is ignored.
  if (device.index() >= 0 && device.index() < device_count()) {
    try {
      set_device(device.index());
    } catch (...) {
    }
  }
}

c10::DeviceIndex ToyChipGuardImpl::deviceCount() const noexcept {
  return device_count();
}

// torch.accelerator.get_device_capability: the dtypes the chip stores (toychip/dtypes.py's
// BUFFER_DTYPE, which its kernels and copies accept); no complex, quantized, float8 or
// unsigned types wider than 8 bits.
c10::DeviceCapability ToyChipGuardImpl::getDeviceCapability(c10::Device device) const {
  TORCH_CHECK(device.type() == kType, "toychip's device guard got a ", device.type(), " device");
  resolve(device.index());  // an index out of range is an error, as for every query
  c10::DeviceCapability capability;
  capability.capability_data.capability_bits = 0;
  auto& dtypes = capability.capability_data.supported_scalar_types;
  dtypes.has_Float = dtypes.has_Double = dtypes.has_Half = dtypes.has_BFloat16 = 1;
  dtypes.has_Long = dtypes.has_Int = dtypes.has_Short = dtypes.has_Char = dtypes.has_Byte = 1;
  dtypes.has_Bool = 1;
  return capability;
}

// ------------------------------------------------------------------ streams
c10::Stream ToyChipGuardImpl::getStream(c10::Device device) const {
  auto index = resolve(device.index());
  return c10::Stream(c10::Stream::UNSAFE, chip(index), t_current_stream[index]);
}

c10::Stream ToyChipGuardImpl::getDefaultStream(c10::Device device) const {
  return c10::Stream(c10::Stream::DEFAULT, chip(resolve(device.index())));
}

c10::Stream ToyChipGuardImpl::getStreamFromGlobalPool(c10::Device device, bool) const {
  return getNewStream(device, 0);
}

c10::Stream ToyChipGuardImpl::getNewStream(c10::Device device, int) const {
  freeze_device_count();
  return c10::Stream(c10::Stream::UNSAFE, chip(resolve(device.index())), g_next_stream++);
}

c10::Stream ToyChipGuardImpl::exchangeStream(c10::Stream stream) const {
  auto index = resolve(stream.device_index());
  auto previous = t_current_stream[index];
  t_current_stream[index] = stream.id();
  return c10::Stream(c10::Stream::UNSAFE, chip(index), previous);
}

// A kernel has finished when its call returns: nothing is ever pending.
bool ToyChipGuardImpl::queryStream(const c10::Stream&) const {
  return true;
}

// Nothing is pending in the chip itself; the hooks let the simulated clock and the race
// report know that the host has waited.
void ToyChipGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  check_device(stream.device_index());
  auto hooks = event_hooks();
  if (hooks->synchronize_stream) {
    hooks->synchronize_stream(stream.device_index(), stream.id());
  }
}

void ToyChipGuardImpl::synchronizeDevice(c10::DeviceIndex device_index) const {
  auto device = resolve(device_index);
  auto hooks = event_hooks();
  if (hooks->synchronize_device) {
    hooks->synchronize_device(device);
  }
}

// ------------------------------------------------------------------ events
void ToyChipGuardImpl::record(void** event, const c10::Stream& stream, c10::DeviceIndex,
                              c10::EventFlag) const {
  // Timing is always on: the simulated clock costs nothing to read.
  check_device(stream.device_index());
  if (*event == nullptr) {
    *event = reinterpret_cast<void*>(static_cast<intptr_t>(g_next_event++));
  }
  auto hooks = event_hooks();
  if (hooks->record) {
    hooks->record(event_id(*event), stream.device_index(), stream.id());
  }
}

void ToyChipGuardImpl::block(void* event, const c10::Stream& stream) const {
  if (event == nullptr) {
    return;  // never recorded: nothing to wait for (as CUDA)
  }
  auto hooks = event_hooks();
  if (hooks->block) {
    hooks->block(event_id(event), stream.device_index(), stream.id());
  }
}

bool ToyChipGuardImpl::queryEvent(void*) const {
  return true;
}

void ToyChipGuardImpl::synchronizeEvent(void* event) const {
  if (event == nullptr) {
    return;  // never recorded: nothing to wait for (as CUDA)
  }
  auto hooks = event_hooks();
  if (hooks->synchronize_event) {
    hooks->synchronize_event(event_id(event));
  }
}

double ToyChipGuardImpl::elapsedTime(void* start, void* end, c10::DeviceIndex) const {
  auto hooks = event_hooks();
  TORCH_CHECK(
      hooks->elapsed && start != nullptr && end != nullptr,
      "record both events on the simulated clock first: toychip's times come from Python "
      "(toychip.runtime.set_event_hooks), and no clock is registered");
  return hooks->elapsed(event_id(start), event_id(end));
}

void ToyChipGuardImpl::destroyEvent(void* event, c10::DeviceIndex) const noexcept {
  if (event == nullptr) {
    return;
  }
  try {
    auto hooks = event_hooks();
    if (hooks->destroy) {
      hooks->destroy(event_id(event));  // Module.cpp skips it once Python is finalizing
    }
  } catch (...) {
    // noexcept: an event freed by a destructor has nowhere to report an error
  }
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, ToyChipGuardImpl);

} // namespace toychip
