// Same job as OpenReg's csrc/runtime/OpenRegHostAllocator.h (torch_npu: csrc/core/npu/CachingHostAllocator.h).
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace toychip {

// Pinned host memory: what tensor.pin_memory() and torch.empty(..., pin_memory=True) get.
// A real chip page-locks it so the DMA engine can read it; the toy chip's memory is host
// memory already, so "pinned" is a registry of the blocks this allocator handed out.
struct ToyChipHostAllocator final : public at::HostAllocator {
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool record_event(void*, void*, c10::Stream) override { return true; }  // synchronous chip
  void empty_cache() override {}  // caches nothing
  at::HostStats get_stats() override;
  void reset_accumulated_stats() override;
  void reset_peak_stats() override;
};

// Whether ptr points into a block of pinned memory (tensor.is_pinned() asks the hooks).
bool is_pinned(const void* ptr);

} // namespace toychip
