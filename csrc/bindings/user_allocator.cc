#include "bindings/user_allocator.h"

#include <mutex>
#include <string>

#include "bindings/allocator.h"
#include "bindings/errors.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

// Keeps the MemoryBuffer a Python allocator returned (dropped under the GIL,
// on whichever thread lets go last).
class PythonBuffer final : public OutputBuffer {
 public:
  explicit PythonBuffer(py::object memory_buffer) : memory_buffer_(std::move(memory_buffer)) {}

 private:
  pyinterop::OwnedRef memory_buffer_;
};

TRITONSERVER_Error* ReleaseBuffer(TRITONSERVER_ResponseAllocator*, void*, void* buffer_userp,
                                  size_t, TRITONSERVER_MemoryType, int64_t) {
  if (buffer_userp != nullptr) static_cast<OutputBuffer*>(buffer_userp)->Unref();
  return nullptr;
}

}  // namespace

UserAllocator::UserAllocator(py::object allocator, int preferred_type, int64_t preferred_id)
    : allocator_(std::move(allocator)),
      preferred_type_(preferred_type),
      preferred_id_(preferred_id) {}

TRITONSERVER_Error* UserAllocator::Alloc(TRITONSERVER_ResponseAllocator*, const char* name,
                                         size_t byte_size, TRITONSERVER_MemoryType memory_type,
                                         int64_t memory_type_id, void* userp, void** buffer,
                                         void** buffer_userp, TRITONSERVER_MemoryType* actual_type,
                                         int64_t* actual_id) {
  auto* self = static_cast<UserAllocator*>(userp);
  *buffer = nullptr;
  *buffer_userp = nullptr;
  *actual_type = TRITONSERVER_MEMORY_CPU;
  *actual_id = 0;
  if (byte_size == 0) return nullptr;
  pyinterop::AcquireGil gil;
  if (!gil.held()) {
    return MakeError(TRITONSERVER_ERROR_UNAVAILABLE, "the Python interpreter is shutting down");
  }
  const std::string output = name ? name : "";
  try {
    int type = self->preferred_type_ >= 0 ? self->preferred_type_ : static_cast<int>(memory_type);
    int64_t id = self->preferred_type_ >= 0 ? self->preferred_id_ : memory_type_id;
    // An allocator that places outputs by name (tritonserver's shared memory
    // regions) has _allocate_output(name, size, type, id); its TritonError
    // reaches the client with its own code and message.
    py::handle target = self->allocator_.object();
    py::object result;
    if (py::hasattr(target, "_allocate_output")) {
      try {
        result = target.attr("_allocate_output")(output, byte_size, type, id);
      } catch (py::error_already_set& e) {
        pyinterop::Failure failure = pyinterop::DescribePython(e.value());
        return MakeError(failure.code, failure.message);
      }
    } else {
      result = target.attr("allocate")(byte_size, type, id);
    }
    auto ptr = result.attr("data_ptr").cast<uintptr_t>();
    auto size = result.attr("size").cast<size_t>();
    int got_type = result.attr("memory_type").cast<int>();
    int64_t got_id = result.attr("memory_type_id").cast<int64_t>();
    if (size < byte_size) {
      return MakeError(TRITONSERVER_ERROR_INVALID_ARG,
                       "output_memory_allocator returned " + std::to_string(size) +
                           " bytes for output '" + output + "', which needs " +
                           std::to_string(byte_size));
    }
    if (ptr == 0) {
      return MakeError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "output_memory_allocator returned a null buffer for output '" + output + "'");
    }
    *buffer = reinterpret_cast<void*>(ptr);
    *buffer_userp = static_cast<OutputBuffer*>(new PythonBuffer(std::move(result)));
    *actual_type = static_cast<TRITONSERVER_MemoryType>(got_type);
    *actual_id = got_id;
    return nullptr;
  } catch (py::error_already_set& e) {
    std::string what = e.what();
    return MakeError(TRITONSERVER_ERROR_INTERNAL,
                     "output_memory_allocator failed for output '" + output + "': " + what);
  } catch (const std::exception& e) {
    return MakeError(TRITONSERVER_ERROR_INTERNAL,
                     "output_memory_allocator failed for output '" + output + "': " + e.what());
  }
}

TRITONSERVER_ResponseAllocator* UserAllocator::CoreAllocator() {
  static std::once_flag once;
  static TRITONSERVER_ResponseAllocator* allocator = nullptr;
  std::call_once(once, [] {
    Check(TRITON_FN(TRITONSERVER_ResponseAllocatorNew)(&allocator, &UserAllocator::Alloc,
                                                       &ReleaseBuffer, /*start_fn=*/nullptr));
  });
  if (allocator == nullptr) {
    throw Error(TRITONSERVER_ERROR_INTERNAL, "the response allocator could not be created");
  }
  return allocator;
}

}  // namespace tritonpy
