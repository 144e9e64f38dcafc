// Same job as OpenReg's torch_openreg/csrc/Module.cpp (torch_npu: csrc/npu/Module.cpp):
// the Python face of the runtime, and the only file that includes Python and pybind11.
// Not torch/extension.h: it also brings the whole C++ frontend (torch/all.h), which made
// this file compile in 23 s instead of 14 s -- the critical path of the first import.
#include <torch/csrc/autograd/python_variable.h>  // at::Tensor <-> torch.Tensor
#include <torch/csrc/utils/pybind.h>              // pybind11 casters for torch's types

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/utils/device_lazy_init.h>  // fork handling, as torch.cuda's

#include "ToyChipAllocator.h"
#include "ToyChipFunctions.h"
#include "ToyChipGenerator.h"
#include "ToyChipGuard.h"
#include "ToyChipProfiler.h"

#include <c10/util/ApproximateClock.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace toychip {
namespace {

// Calling into Python from C++ that PyTorch runs at any time (an event freed at exit,
// a guard used by the autograd engine's thread) needs the interpreter to still be there.
bool python_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

// A Python callable that the C++ hooks can copy and drop on any thread: its reference is
// released under the GIL, or leaked once the interpreter is gone.
struct PyCallable {
  PyObject* fn;
  explicit PyCallable(const py::object& f) : fn(f.inc_ref().ptr()) {}
  PyCallable(const PyCallable&) = delete;
  PyCallable& operator=(const PyCallable&) = delete;
  ~PyCallable() {
    if (python_alive()) {
      py::gil_scoped_acquire gil;
      Py_DECREF(fn);
    }
  }
  template <typename... Args>
  py::object operator()(Args&&... args) const {
    return py::handle(fn)(std::forward<Args>(args)...);
  }
};

std::shared_ptr<PyCallable> callable(const py::object& f, const char* name) {
  if (f.is_none()) {
    return nullptr;
  }
  if (!PyCallable_Check(f.ptr())) {
    throw py::type_error(std::string("toychip: the ") + name + " hook must be callable or None");
  }
  return std::make_shared<PyCallable>(f);
}

// The callables each set_*_hooks call was given last (all None: none), for Python to save
// and restore. Leaked, like the hooks: no Python object may be released after the interpreter.
struct RegisteredHooks {
  py::object memory = py::make_tuple(py::none(), py::none(), py::none(), py::none());
  py::object events = py::make_tuple(py::none(), py::none(), py::none(), py::none(), py::none(), py::none(),
                                     py::none());
  py::object profiler = py::make_tuple(py::none(), py::none());
};
RegisteredHooks& registered() {
  static auto* hooks = new RegisteredHooks();  // first called from Python, with the GIL held
  return *hooks;
}

// ---------------------------------------------------------------- memory statistics
// torch.cuda.memory_stats()'s flat keys: "<group>.<pool>.<metric>" for the StatArrays.
constexpr std::array<const char*, 3> kPools = {"all", "small_pool", "large_pool"};

template <typename F>
void for_each_metric(c10::CachingAllocator::Stat& stat, F f) {
  f("current", stat.current);
  f("peak", stat.peak);
  f("allocated", stat.allocated);
  f("freed", stat.freed);
}

template <typename F>
void for_each_counter(DeviceStats& s, F f) {
  f("num_alloc_retries", s.num_alloc_retries);
  f("num_ooms", s.num_ooms);
  f("num_sync_all_streams", s.num_sync_all_streams);
  f("num_device_alloc", s.num_device_alloc);
  f("num_device_free", s.num_device_free);
  f("max_split_size", s.max_split_size);
}

py::dict stats_to_dict(DeviceStats s) {
  py::dict out;
  for_each_stat_array(s, [&](const char* group, auto& array) {
    for (size_t pool = 0; pool < kPools.size(); ++pool) {
      for_each_metric(array[pool], [&](const char* metric, int64_t value) {
        out[py::str(std::string(group) + "." + kPools[pool] + "." + metric)] = value;
      });
    }
  });
  for_each_counter(s, [&](const char* name, int64_t value) { out[name] = value; });
  return out;
}

// The inverse, for the Python allocator's dict: keys it does not give stay 0.
DeviceStats dict_to_stats(const py::handle& stats) {
  TORCH_CHECK(PyDict_Check(stats.ptr()), "toychip: the stats hook must return a dict");
  py::dict d = py::reinterpret_borrow<py::dict>(stats);
  auto read = [&](const std::string& key, int64_t& into) {
    PyObject* value = PyDict_GetItemString(d.ptr(), key.c_str());  // borrowed
    if (value != nullptr) {
      into = py::cast<int64_t>(value);
    }
  };
  DeviceStats s;
  for_each_stat_array(s, [&](const char* group, auto& array) {
    for (size_t pool = 0; pool < kPools.size(); ++pool) {
      for_each_metric(array[pool], [&](const char* metric, int64_t& value) {
        read(std::string(group) + "." + kPools[pool] + "." + metric, value);
      });
    }
  });
  for_each_counter(s, [&](const char* name, int64_t& value) { read(name, value); });
  return s;
}

void set_memory_hooks_py(const py::object& stats, const py::object& reset_peak,
                         const py::object& reset_accumulated, const py::object& empty_cache) {
  MemoryHooks hooks;
  if (auto f = callable(stats, "stats")) {
    hooks.stats = [f](c10::DeviceIndex device) {
      py::gil_scoped_acquire gil;
      return dict_to_stats((*f)(static_cast<int>(device)));
    };
  }
  if (auto f = callable(reset_peak, "reset_peak")) {
    hooks.reset_peak = [f](c10::DeviceIndex device) {
      py::gil_scoped_acquire gil;
      (*f)(static_cast<int>(device));
    };
  }
  if (auto f = callable(reset_accumulated, "reset_accumulated")) {
    hooks.reset_accumulated = [f](c10::DeviceIndex device) {
      py::gil_scoped_acquire gil;
      (*f)(static_cast<int>(device));
    };
  }
  if (auto f = callable(empty_cache, "empty_cache")) {
    hooks.empty_cache = [f]() {
      py::gil_scoped_acquire gil;
      (*f)();
    };
  }
  set_memory_hooks(std::move(hooks));
  registered().memory = py::make_tuple(stats, reset_peak, reset_accumulated, empty_cache);
}

// ---------------------------------------------------------------- events
void set_event_hooks_py(const py::object& record, const py::object& block, const py::object& elapsed,
                        const py::object& destroy, const py::object& synchronize_stream,
                        const py::object& synchronize_event, const py::object& synchronize_device) {
  EventHooks hooks;
  if (auto f = callable(record, "record")) {
    hooks.record = [f](int64_t event, c10::DeviceIndex device, c10::StreamId stream) {
      py::gil_scoped_acquire gil;
      (*f)(event, static_cast<int>(device), stream);
    };
  }
  if (auto f = callable(block, "block")) {
    hooks.block = [f](int64_t event, c10::DeviceIndex device, c10::StreamId stream) {
      py::gil_scoped_acquire gil;
      (*f)(event, static_cast<int>(device), stream);
    };
  }
  if (auto f = callable(elapsed, "elapsed")) {
    hooks.elapsed = [f](int64_t start, int64_t end) {
      py::gil_scoped_acquire gil;
      return py::cast<double>((*f)(start, end));
    };
  }
  if (auto f = callable(destroy, "destroy")) {
    hooks.destroy = [f](int64_t event) {
      if (!python_alive()) {
        return;  // an event freed at interpreter exit: nothing left to tell
      }
      py::gil_scoped_acquire gil;
      py::error_scope raising;  // an error already being raised (say by elapsed) stays raised
      try {
        (*f)(event);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("toychip's event destroy hook");
      }
    };
  }
  if (auto f = callable(synchronize_stream, "synchronize_stream")) {
    hooks.synchronize_stream = [f](c10::DeviceIndex device, c10::StreamId stream) {
      py::gil_scoped_acquire gil;
      (*f)(static_cast<int>(device), stream);
    };
  }
  if (auto f = callable(synchronize_event, "synchronize_event")) {
    hooks.synchronize_event = [f](int64_t event) {
      py::gil_scoped_acquire gil;
      (*f)(event);
    };
  }
  if (auto f = callable(synchronize_device, "synchronize_device")) {
    hooks.synchronize_device = [f](c10::DeviceIndex device) {
      py::gil_scoped_acquire gil;
      (*f)(static_cast<int>(device));
    };
  }
  set_event_hooks(std::move(hooks));
  registered().events = py::make_tuple(record, block, elapsed, destroy, synchronize_stream, synchronize_event,
                                       synchronize_device);
}

// ---------------------------------------------------------------- profiler
// stop() returns what the chip ran as (name, is_copy, device, stream, start_ns, duration_ns,
// launch_ns, correlation) tuples.
void set_profiler_hooks_py(const py::object& start, const py::object& stop) {
  ProfilerHooks hooks;
  if (auto f = callable(start, "start")) {
    hooks.start = [f](int64_t origin_ns) {
      py::gil_scoped_acquire gil;
      (*f)(origin_ns);
    };
  }
  if (auto f = callable(stop, "stop")) {
    hooks.stop = [f]() {
      py::gil_scoped_acquire gil;
      std::vector<DeviceActivity> ran;
      for (const auto& item : (*f)()) {
        auto op = item.cast<py::tuple>();
        ran.push_back({op[0].cast<std::string>(), op[1].cast<bool>(), op[2].cast<c10::DeviceIndex>(),
                       op[3].cast<c10::StreamId>(), op[4].cast<int64_t>(), op[5].cast<int64_t>(),
                       op[6].cast<int64_t>(), op[7].cast<int64_t>()});
      }
      return ran;
    };
  }
  set_profiler_hooks(std::move(hooks));
  registered().profiler = py::make_tuple(start, stop);
}

// ---------------------------------------------------------------- storage bytes
const c10::Storage& unpack_storage(const py::handle& obj) {
  // Exact type first: the isinstance check is the slow part of this call.
  if (!THPStorage_CheckExact(obj.ptr()) && !THPStorage_Check(obj.ptr())) {
    throw py::type_error("toychip.runtime.buffer expects a torch.UntypedStorage, not " +
                         std::string(Py_TYPE(obj.ptr())->tp_name));
  }
  return THPStorage_Unpack(obj.ptr());
}

// A flat uint8 NumPy array over a storage's bytes that does not own them: no copy and no
// reference to the storage (which would make a cycle when the array is kept on the
// storage). It is valid while the storage's memory is, i.e. until the storage dies or
// is resized.
py::object buffer(const py::handle& obj) {
  const c10::Storage& storage = unpack_storage(obj);
  Py_intptr_t nbytes = static_cast<Py_intptr_t>(storage.nbytes());
  void* data = nbytes == 0 ? nullptr : storage.mutable_data();
  TORCH_CHECK(nbytes == 0 || data != nullptr,
              "toychip.runtime.buffer: this storage has no memory (", storage.device(), ")");
  auto& api = py::detail::npy_api::get();
  // pybind11's py::array would copy without a base object; NumPy's C API does not.
  PyObject* array = api.PyArray_NewFromDescr_(
      api.PyArray_Type_, api.PyArray_DescrFromType_(py::detail::npy_api::NPY_UINT8_), 1, &nbytes,
      nullptr, data, py::detail::npy_api::NPY_ARRAY_WRITEABLE_, nullptr);
  if (array == nullptr) {
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(array);
}

// A kernel's result, a fresh NumPy array, becomes a storage's memory without a copy (a
// real chip's kernel writes straight into the memory the allocator gave it; the toy
// chip's NumPy kernels allocate their own). The storage keeps the array alive and drops
// it under the GIL when it is freed or resized, as torch.from_numpy's deleter does.
void release_array(void* array) {
  if (python_alive()) {
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(array));
  }
}

c10::DataPtr owned_by(const py::array& array, c10::Device device) {
  TORCH_CHECK_VALUE(array.flags() & py::array::c_style,
                    "toychip.runtime.adopt: the array must be C-contiguous");
  return c10::DataPtr(const_cast<void*>(array.data()), array.inc_ref().ptr(), &release_array, device);
}

// A new tensor on toychip:device whose storage is the array's memory.
at::Tensor adopt(const py::array& array, c10::ScalarType dtype, c10::DeviceIndex device) {
  device = resolve(device);
  std::vector<int64_t> size(array.shape(), array.shape() + array.ndim());
  TORCH_CHECK_VALUE(static_cast<size_t>(array.itemsize()) == c10::elementSize(dtype),
                    "toychip.runtime.adopt: a ", array.itemsize(), "-byte array cannot hold ", dtype);
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), static_cast<size_t>(array.nbytes()),
      owned_by(array, c10::Device(c10::DeviceType::PrivateUse1, device)), &device_allocator(),
      /*resizable=*/true);
  auto tensor = at::detail::make_tensor_base<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::scalarTypeToTypeMeta(dtype));
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  return at::Tensor(std::move(tensor));
}

// An existing storage (a lazy tensor's, an out= argument's) takes the array's memory.
void adopt_into(const py::handle& storage_obj, const py::array& array) {
  const c10::Storage& storage = unpack_storage(storage_obj);
  storage.set_data_ptr_noswap(owned_by(array, storage.device()));  // frees what the storage held
  storage.set_nbytes(static_cast<size_t>(array.nbytes()));
}

} // namespace
} // namespace toychip

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace toychip;
  m.doc() = "toychip's C++ runtime: devices, streams/events, memory, generators (see toychip.runtime)";

  // devices
  m.def("set_device_count", [](int count) { set_device_count(static_cast<c10::DeviceIndex>(count)); },
        py::arg("count"));
  m.def("device_count", []() { return static_cast<int>(device_count()); });
  m.def("current_device", []() { return static_cast<int>(current_device()); });
  m.def("set_device", [](int index) { set_device(static_cast<c10::DeviceIndex>(index)); },
        py::arg("index"));
  m.def("exchange_device",
        [](int index) { return static_cast<int>(exchange_device(static_cast<c10::DeviceIndex>(index))); },
        py::arg("index"));

  // fork: as torch.cuda, a process forked after the chip was initialised cannot use it
  m.def("register_fork_handler",
        []() { torch::utils::register_fork_handler_for_device_init(c10::DeviceType::PrivateUse1); });
  m.def("is_in_bad_fork", []() { return torch::utils::is_device_in_bad_fork(c10::DeviceType::PrivateUse1); });

  // memory
  m.def("empty_strided",
        [](c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype, int device) {
          return empty_strided(size, stride, dtype, static_cast<c10::DeviceIndex>(device));
        },
        py::arg("size"), py::arg("stride"), py::arg("dtype"), py::arg("device_index"));
  m.def("buffer", &buffer, py::arg("storage"));
  m.def("adopt",
        [](const py::array& array, c10::ScalarType dtype, int device) {
          return adopt(array, dtype, static_cast<c10::DeviceIndex>(device));
        },
        py::arg("array"), py::arg("dtype"), py::arg("device_index"));
  m.def("adopt_into", &adopt_into, py::arg("storage"), py::arg("array"));
  m.def("resize_storage_bytes",
        [](const py::handle& storage, int64_t nbytes) {
          TORCH_CHECK_VALUE(nbytes >= 0, "toychip: a storage cannot have ", nbytes, " bytes");
          resize_bytes(unpack_storage(storage), static_cast<size_t>(nbytes));
        },
        py::arg("storage"), py::arg("nbytes"));
  m.def("set_memory_hooks", &set_memory_hooks_py, py::arg("stats"), py::arg("reset_peak"),
        py::arg("reset_accumulated"), py::arg("empty_cache"));
  m.def("memory_hooks", []() { return registered().memory; });
  m.def("device_memory_stats",
        [](int device) { return stats_to_dict(real_stats(static_cast<c10::DeviceIndex>(device))); },
        py::arg("device_index"));
  m.def("allocator_stats",  // what torch.accelerator.memory_stats() reads: the hooks, else the real counters
        [](int device) {
          return stats_to_dict(device_allocator().getDeviceStats(static_cast<c10::DeviceIndex>(device)));
        },
        py::arg("device_index"));
  m.def("device_of",  // what the hooks' getDeviceFromPtr answers, or None outside chip memory
        [](uintptr_t address) -> std::optional<int> {
          auto device = device_of(reinterpret_cast<const void*>(address));
          return device ? std::optional<int>(*device) : std::nullopt;
        },
        py::arg("address"));

  // streams and events
  m.def("current_stream_id",
        [](int device) { return current_stream_id(static_cast<c10::DeviceIndex>(device)); },
        py::arg("device_index"));
  m.def("set_event_hooks", &set_event_hooks_py, py::arg("record"), py::arg("block"),
        py::arg("elapsed"), py::arg("destroy"), py::arg("synchronize_stream") = py::none(),
        py::arg("synchronize_event") = py::none(), py::arg("synchronize_device") = py::none());
  m.def("event_hooks", []() { return registered().events; });

  // profiler: the Kineto session's Python half, and what a launch is stamped with
  m.def("set_profiler_hooks", &set_profiler_hooks_py, py::arg("start"), py::arg("stop"));
  m.def("profiler_hooks", []() { return registered().profiler; });
  m.def("launch_stamp",  // (the launching CPU op's correlation id or 0, now on the profiler's clock in ns)
        []() { return py::make_tuple(current_correlation_id(), c10::getTime()); });

  // generators
  m.def("default_generator",
        [](int device) { return default_generator(static_cast<c10::DeviceIndex>(device)); },
        py::arg("device_index"));
  m.def("draw_seed",
        [](const py::handle& generator, int device) {
          at::Generator gen;
          if (!generator.is_none()) {
            gen = py::cast<at::Generator>(generator);
          }
          return draw_seed(gen, static_cast<c10::DeviceIndex>(device));
        },
        py::arg("generator"), py::arg("device_index"));
}
