// Same job as OpenReg's csrc/runtime/OpenRegDeviceAllocator.cpp (torch_npu: csrc/core/npu/NPUCachingAllocator.cpp).
#include "ToyChipAllocator.h"

#include "ToyChipFunctions.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace toychip {

namespace {

constexpr size_t kAlignment = 64;              // a cache line, like c10's CPU allocator
constexpr size_t kSmallSize = 1 << 20;         // CUDA's small/large pool boundary (1 MiB)

struct Block {
  size_t size;
  c10::DeviceIndex device;
};

// Leaked on purpose: tensors can be freed by other libraries' static destructors at exit,
// after this file's statics would have been destroyed (and the hooks hold Python objects,
// which must not be released once the interpreter is gone).
struct State {
  std::mutex mutex;  // one mutex: allocation is not the chip's bottleneck
  // ptr -> block, ordered so that a pointer *inside* a block finds it (getDeviceFromPtr
  // gets data_ptr() of views)
  std::map<uintptr_t, Block> blocks;
  std::array<DeviceStats, kMaxDevices> stats;
  std::shared_ptr<const MemoryHooks> hooks = std::make_shared<MemoryHooks>();  // swapped whole
};
State& state() {
  static auto* s = new State();
  return *s;
}

std::shared_ptr<const MemoryHooks> memory_hooks() {
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  return st.hooks;
}

using c10::CachingAllocator::StatType;

// What one block does to the counters: the aggregate and the pool its size falls in.
template <typename F>
void for_pools(size_t size, F f) {
  f(static_cast<size_t>(StatType::AGGREGATE));
  f(static_cast<size_t>(size < kSmallSize ? StatType::SMALL_POOL : StatType::LARGE_POOL));
}

// One block of `size` bytes given out (allocated) or taken back (!allocated). No cache sits
// between the chip and its memory: every block is its own segment, so the allocated,
// reserved, active and requested groups move together.
void count(DeviceStats& s, size_t size, bool allocated) {
  for_pools(size, [&](size_t pool) {
    for (auto* stat : {&s.allocation[pool], &s.segment[pool], &s.active[pool]}) {
      allocated ? stat->increase(1) : stat->decrease(1);
    }
    for (auto* stat : {&s.allocated_bytes[pool], &s.reserved_bytes[pool], &s.active_bytes[pool],
                       &s.requested_bytes[pool]}) {
      allocated ? stat->increase(size) : stat->decrease(size);
    }
  });
  (allocated ? s.num_device_alloc : s.num_device_free) += 1;
}

void free_block(void* ptr) {
  {
    auto& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    auto it = st.blocks.find(reinterpret_cast<uintptr_t>(ptr));
    TORCH_INTERNAL_ASSERT(it != st.blocks.end(), "toychip: freeing memory it did not allocate");
    count(st.stats[it->second.device], it->second.size, /*allocated=*/false);
    st.blocks.erase(it);
  }
  std::free(ptr);
}

} // namespace

void set_memory_hooks(MemoryHooks hooks) {
  std::shared_ptr<const MemoryHooks> fresh = std::make_shared<MemoryHooks>(std::move(hooks));
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  st.hooks.swap(fresh);  // the old set is released after the lock, by `fresh`
}

c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes) {
  check_device(device);
  freeze_device_count();
  const c10::Device where(c10::DeviceType::PrivateUse1, device);
  if (nbytes == 0) {
    // As CUDA: no memory, no deleter, but the right device.
    return c10::DataPtr(nullptr, nullptr, &free_block, where);
  }
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  TORCH_CHECK(ptr != nullptr, "toychip: out of host memory allocating ", nbytes, " bytes on ", where);
  {
    auto& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    st.blocks.emplace(reinterpret_cast<uintptr_t>(ptr), Block{nbytes, device});
    count(st.stats[device], nbytes, /*allocated=*/true);
  }
  return c10::DataPtr(ptr, ptr, &free_block, where);
}

std::optional<c10::DeviceIndex> device_of(const void* ptr) {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  auto it = st.blocks.upper_bound(address);  // first block starting after ptr
  if (it == st.blocks.begin()) {
    return std::nullopt;
  }
  --it;
  if (address < it->first + std::max<size_t>(it->second.size, 1)) {
    return it->second.device;
  }
  return std::nullopt;
}

DeviceStats real_stats(c10::DeviceIndex device) {
  device = resolve(device);
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  return st.stats[device];
}

// ------------------------------------------------------------------ the c10 allocator
c10::DataPtr ToyChipDeviceAllocator::allocate(size_t nbytes) {
  return allocate_on(current_device(), nbytes);
}

c10::DeleterFnPtr ToyChipDeviceAllocator::raw_deleter() const {
  return &free_block;
}

void ToyChipDeviceAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);  // device memory is host memory
}

void ToyChipDeviceAllocator::emptyCache(c10::MempoolId_t) {
  auto hooks = memory_hooks();
  if (hooks->empty_cache) {
    hooks->empty_cache();
  }  // the real allocator caches nothing
}

DeviceStats ToyChipDeviceAllocator::getDeviceStats(c10::DeviceIndex device) {
  device = resolve(device);
  auto hooks = memory_hooks();
  return hooks->stats ? hooks->stats(device) : real_stats(device);
}

void ToyChipDeviceAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  device = resolve(device);
  auto hooks = memory_hooks();
  if (hooks->reset_accumulated) {
    hooks->reset_accumulated(device);
    return;
  }
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  auto& s = st.stats[device];
  for_each_stat_array(s, [](const char*, auto& array) {
    for (auto& stat : array) stat.reset_accumulated();
  });
  s.num_alloc_retries = s.num_ooms = s.num_sync_all_streams = 0;
  s.num_device_alloc = s.num_device_free = 0;
}

void ToyChipDeviceAllocator::resetPeakStats(c10::DeviceIndex device) {
  device = resolve(device);
  auto hooks = memory_hooks();
  if (hooks->reset_peak) {
    hooks->reset_peak(device);
    return;
  }
  auto& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  for_each_stat_array(st.stats[device], [](const char*, auto& array) {
    for (auto& stat : array) stat.reset_peak();
  });
}

ToyChipDeviceAllocator& device_allocator() {
  static auto* allocator = new ToyChipDeviceAllocator();  // c10 keeps a raw pointer: never freed
  return *allocator;
}

// `torch.accelerator.memory_stats` and `torch.empty(..., device="toychip")`'s
// storage come from here (c10::GetAllocator(PrivateUse1)).
static bool g_registered [[maybe_unused]] = [] {
  c10::SetAllocator(c10::DeviceType::PrivateUse1, &device_allocator());
  return true;
}();

// ------------------------------------------------------------------ storage and tensors
void resize_bytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "toychip: this storage is not resizable");
  auto device = storage.device().has_index() ? storage.device().index() : current_device();
  c10::DataPtr fresh = allocate_on(device, nbytes);
  size_t keep = std::min(nbytes, storage.nbytes());
  if (keep > 0 && storage.data() != nullptr) {
    std::memcpy(fresh.get(), storage.data(), keep);
  }
  // set_data_ptr_noswap drops the old DataPtr, which frees the old memory.
  storage.set_data_ptr_noswap(std::move(fresh));
  storage.set_nbytes(nbytes);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype,
                         c10::DeviceIndex device) {
  TORCH_CHECK_VALUE(size.size() == stride.size(), "toychip.empty_strided: ", size.size(),
                    " sizes but ", stride.size(), " strides");
  at::detail::check_size_nonnegative(size);
  device = resolve(device);
  auto itemsize = c10::elementSize(dtype);
  size_t nbytes = at::detail::computeStorageNbytes(size, stride, itemsize);
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, allocate_on(device, nbytes),
      &device_allocator(), /*resizable=*/true);
  // TensorImpl adds the autograd keys (AutogradPrivateUse1, ADInplaceOrView) itself.
  auto tensor = at::detail::make_tensor_base<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::scalarTypeToTypeMeta(dtype));
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride);
  return at::Tensor(std::move(tensor));
}

} // namespace toychip
