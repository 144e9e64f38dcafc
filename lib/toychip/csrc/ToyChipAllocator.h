// Same job as OpenReg's csrc/runtime/OpenRegDeviceAllocator.h (torch_npu: csrc/core/npu/NPUCachingAllocator.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Storage.h>

#include <functional>
#include <optional>

namespace toychip {

using c10::CachingDeviceAllocator::DeviceStats;

// Each StatArray of DeviceStats with its group's name in torch.cuda.memory_stats() keys
// ("allocated_bytes" in "allocated_bytes.all.current"): the allocator resets them, Module.cpp
// turns them into that dict and back.
template <typename F>
void for_each_stat_array(DeviceStats& s, F f) {
  f("allocation", s.allocation);
  f("segment", s.segment);
  f("active", s.active);
  f("inactive_split", s.inactive_split);
  f("allocated_bytes", s.allocated_bytes);
  f("reserved_bytes", s.reserved_bytes);
  f("active_bytes", s.active_bytes);
  f("inactive_split_bytes", s.inactive_split_bytes);
  f("requested_bytes", s.requested_bytes);
}

// The *simulated* caching allocator (size classes, reserved vs allocated) is Python's
// (toychip/allocator.py). So that torch.accelerator.memory_* and torch.toychip.memory_*
// agree, Module.cpp points these at it; unset, the real counters below answer.
struct MemoryHooks {
  std::function<DeviceStats(c10::DeviceIndex)> stats;
  std::function<void(c10::DeviceIndex)> reset_peak;
  std::function<void(c10::DeviceIndex)> reset_accumulated;
  std::function<void()> empty_cache;
};

void set_memory_hooks(MemoryHooks hooks);  // an empty MemoryHooks{} unregisters them

// Device memory: real host memory (64-byte aligned) tagged with the device it is "on".
// DeviceAllocator is what torch.accelerator.memory_stats() & co. reach through
// c10::getDeviceAllocator(PrivateUse1).
struct ToyChipDeviceAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override;  // on the current device
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // synchronous chip
  DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
};

ToyChipDeviceAllocator& device_allocator();

c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);

// The device a pointer into chip memory belongs to (any address inside a block), if any.
std::optional<c10::DeviceIndex> device_of(const void* ptr);

// The real allocator's own counters (what happened to host memory, not the simulation).
DeviceStats real_stats(c10::DeviceIndex device);

// PrivateUse1HooksInterface::resizePrivateUse1Bytes: new memory, old bytes copied, old freed.
void resize_bytes(const c10::Storage& storage, size_t nbytes);

// torch.empty_strided on toychip:device without the dispatcher: the chip's ATen kernels are
// Python, and every kernel's output comes through here.
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype,
                         c10::DeviceIndex device);

} // namespace toychip
