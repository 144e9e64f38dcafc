// Same job as OpenReg's csrc/runtime/OpenRegHostAllocator.cpp (torch_npu: csrc/core/npu/CachingHostAllocator.cpp).
#include "ToyChipHostAllocator.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <map>
#include <mutex>

namespace toychip {

namespace {

constexpr size_t kAlignment = 64;

// Leaked on purpose: pinned tensors can be freed by other libraries' static destructors
// at exit, after this file's statics would have been destroyed.
struct State {
  std::mutex mutex;
  std::map<uintptr_t, size_t> blocks;  // ordered: is_pinned() of a view's pointer finds its block
  at::HostStats stats;
};
State& state() {
  static auto* s = new State();
  return *s;
}

void free_pinned(void* ptr) {
  {
    auto& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    auto it = st.blocks.find(reinterpret_cast<uintptr_t>(ptr));
    TORCH_INTERNAL_ASSERT(it != st.blocks.end(), "toychip: freeing pinned memory it did not allocate");
    st.stats.active_requests.decrease(1);
    st.stats.active_bytes.decrease(it->second);
    st.stats.allocations.decrease(1);
    st.stats.allocated_bytes.decrease(it->second);
    st.stats.num_host_free += 1;
    st.blocks.erase(it);
  }
  std::free(ptr);
}

} // namespace

c10::DataPtr ToyChipHostAllocator::allocate(size_t nbytes) {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (nbytes == 0) {
    return c10::DataPtr(nullptr, nullptr, &free_pinned, cpu);
  }
  void* ptr = std::aligned_alloc(kAlignment, (nbytes + kAlignment - 1) / kAlignment * kAlignment);
  TORCH_CHECK(ptr != nullptr, "toychip: out of host memory pinning ", nbytes, " bytes");
  {
    auto& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    st.blocks.emplace(reinterpret_cast<uintptr_t>(ptr), nbytes);
    st.stats.active_requests.increase(1);
    st.stats.active_bytes.increase(nbytes);
    st.stats.allocations.increase(1);
    st.stats.allocated_bytes.increase(nbytes);
    st.stats.num_host_alloc += 1;
  }
  return c10::DataPtr(ptr, ptr, &free_pinned, cpu);  // pinned memory is CPU memory
}

c10::DeleterFnPtr ToyChipHostAllocator::raw_deleter() const {
  return &free_pinned;
}

void ToyChipHostAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

at::HostStats ToyChipHostAllocator::get_stats() {
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  return st.stats;
}

void ToyChipHostAllocator::reset_accumulated_stats() {
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  for (auto* stat : {&st.stats.active_requests, &st.stats.active_bytes, &st.stats.allocations,
                     &st.stats.allocated_bytes}) {
    stat->reset_accumulated();
  }
  st.stats.num_host_alloc = st.stats.num_host_free = 0;
}

void ToyChipHostAllocator::reset_peak_stats() {
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  for (auto* stat : {&st.stats.active_requests, &st.stats.active_bytes, &st.stats.allocations,
                     &st.stats.allocated_bytes}) {
    stat->reset_peak();
  }
}

bool is_pinned(const void* ptr) {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  auto it = st.blocks.upper_bound(address);
  if (it == st.blocks.begin()) {
    return false;
  }
  --it;
  return address < it->first + it->second;
}

// at::getHostAllocator(at::kPrivateUse1) finds it; the hooks' getPinnedMemoryAllocator returns it.
// Never freed: ATen keeps a raw pointer to it.
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, new ToyChipHostAllocator());

} // namespace toychip
