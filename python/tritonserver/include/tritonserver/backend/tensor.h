// Typed views of a request's input tensors and of the output tensors a
// backend fills.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tritonserver/backend/cuda.h"
#include "tritonserver/backend/error.h"

namespace tritonserver::backend {

// ---- Datatypes --------------------------------------------------------------

// DataTypeOf<T>::value: the Triton datatype stored as C++ type T (for the
// fixed-size types with a C++ equivalent; FP16, BF16 and BYTES have none).
template <typename T>
struct DataTypeOf;
#define TRITONSERVER_BACKEND_DATATYPE_(CxxType, Value)                        \
  template <>                                                                 \
  struct DataTypeOf<CxxType> {                                                \
    static constexpr TRITONSERVER_DataType value = TRITONSERVER_TYPE_##Value; \
  };
TRITONSERVER_BACKEND_DATATYPE_(bool, BOOL)
TRITONSERVER_BACKEND_DATATYPE_(uint8_t, UINT8)
TRITONSERVER_BACKEND_DATATYPE_(uint16_t, UINT16)
TRITONSERVER_BACKEND_DATATYPE_(uint32_t, UINT32)
TRITONSERVER_BACKEND_DATATYPE_(uint64_t, UINT64)
TRITONSERVER_BACKEND_DATATYPE_(int8_t, INT8)
TRITONSERVER_BACKEND_DATATYPE_(int16_t, INT16)
TRITONSERVER_BACKEND_DATATYPE_(int32_t, INT32)
TRITONSERVER_BACKEND_DATATYPE_(int64_t, INT64)
TRITONSERVER_BACKEND_DATATYPE_(float, FP32)
TRITONSERVER_BACKEND_DATATYPE_(double, FP64)
#undef TRITONSERVER_BACKEND_DATATYPE_

inline const char* DataTypeName(TRITONSERVER_DataType dtype) {
  return TRITONSERVER_DataTypeString(dtype);
}

// Bytes per element; 0 for BYTES (variable size) and INVALID.
inline uint64_t ElementByteSize(TRITONSERVER_DataType dtype) {
  return TRITONSERVER_DataTypeByteSize(dtype);
}

// The number of elements of `shape`; throws for a negative dimension.
inline uint64_t ElementCount(const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      throw Error::InvalidArgument("shape has a negative dimension");
    }
    count *= static_cast<uint64_t>(dim);
  }
  return count;
}

inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

// A contiguous run of T (C++17 has no std::span).
template <typename T>
class Span {
 public:
  Span() = default;
  Span(T* data, size_t size) : data_(data), size_(size) {}
  T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() const { return data_; }
  T* end() const { return data_ + size_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// One buffer of a tensor's data, where the core put it.
struct Buffer {
  const void* data = nullptr;
  uint64_t byte_size = 0;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
};

// ---- Inputs -----------------------------------------------------------------

// One input tensor of a request. Its data stays in the core's buffers (one
// or more, possibly in GPU memory) and lives as long as the request.
class InputTensor {
 public:
  InputTensor(TRITONBACKEND_Input* input, const char* host_policy) {
    const char* name = nullptr;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    uint32_t buffer_count = 0;
    Check(TRITONBACKEND_InputPropertiesForHostPolicy(input, host_policy, &name, &dtype_, &shape,
                                                     &dims, &byte_size_, &buffer_count));
    name_ = name;
    shape_.assign(shape, shape + dims);
    buffers_.resize(buffer_count);
    for (uint32_t i = 0; i < buffer_count; ++i) {
      Buffer& b = buffers_[i];
      Check(TRITONBACKEND_InputBufferForHostPolicy(input, host_policy, i, &b.data, &b.byte_size,
                                                   &b.memory_type, &b.memory_type_id));
    }
  }

  const std::string& name() const { return name_; }
  TRITONSERVER_DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  uint64_t byte_size() const { return byte_size_; }
  uint64_t element_count() const { return ElementCount(shape_); }
  const std::vector<Buffer>& buffers() const { return buffers_; }
  // The memory type of the data (of its first buffer; CPU when empty).
  TRITONSERVER_MemoryType memory_type() const {
    return buffers_.empty() ? TRITONSERVER_MEMORY_CPU : buffers_.front().memory_type;
  }
  bool in_host_memory() const {
    for (const Buffer& b : buffers_) {
      if (!IsHostMemory(b.memory_type)) return false;
    }
    return true;
  }

  // Copies the whole tensor to `dst`, byte_size() bytes in `dst_type`
  // memory (on GPU `dst_id` for GPU memory), from wherever its buffers are
  // (a device's memory through the CUDA runtime: cuda.h).
  void CopyTo(void* dst, TRITONSERVER_MemoryType dst_type = TRITONSERVER_MEMORY_CPU,
              int64_t dst_id = 0) const {
    char* out = static_cast<char*>(dst);
    for (const Buffer& b : buffers_) {
      CopyMemory(out, dst_type, dst_id, b.data, b.memory_type, b.memory_type_id, b.byte_size);
      out += b.byte_size;
    }
  }

  // The data as one contiguous host block: the core's own buffer when it is
  // one buffer in host memory (zero copy), else a gathered copy owned by
  // this object (from GPU memory too).
  Span<const char> Bytes() const {
    if (buffers_.size() == 1 && IsHostMemory(buffers_[0].memory_type)) {
      return {static_cast<const char*>(buffers_[0].data),
              static_cast<size_t>(buffers_[0].byte_size)};
    }
    if (gathered_.size() != byte_size_) {
      gathered_.resize(byte_size_);
      CopyTo(gathered_.data());
    }
    return {gathered_.data(), gathered_.size()};
  }

  // The elements as T, in place (see Bytes()); T must match dtype() and the
  // data must hold exactly element_count() elements.
  template <typename T>
  Span<const T> As() const {
    CheckElements<T>();
    const Span<const char> bytes = Bytes();
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }

  // A copy of the elements as T (same checks as As()).
  template <typename T>
  std::vector<T> Values() const {
    const Span<const T> view = As<T>();
    return std::vector<T>(view.begin(), view.end());
  }

  // The elements of a BYTES tensor, each a view of the tensor's data.
  std::vector<std::string_view> Strings() const {
    if (dtype_ != TRITONSERVER_TYPE_BYTES) {
      throw Error::InvalidArgument("input '" + name_ + "' is " + DataTypeName(dtype_) +
                                   ", not BYTES");
    }
    const Span<const char> bytes = Bytes();
    std::vector<std::string_view> out;
    size_t pos = 0;
    while (pos < bytes.size()) {
      uint32_t length = 0;
      if (bytes.size() - pos < sizeof(length)) break;
      std::memcpy(&length, bytes.data() + pos, sizeof(length));
      pos += sizeof(length);
      if (bytes.size() - pos < length) {
        throw Error::InvalidArgument("input '" + name_ + "': a BYTES element overruns the data");
      }
      out.emplace_back(bytes.data() + pos, length);
      pos += length;
    }
    if (pos != bytes.size() || out.size() != element_count()) {
      throw Error::InvalidArgument("input '" + name_ + "': BYTES data does not hold " +
                                   std::to_string(element_count()) + " elements of shape " +
                                   ShapeString(shape_));
    }
    return out;
  }

 private:
  template <typename T>
  void CheckElements() const {
    if (dtype_ != DataTypeOf<T>::value) {
      throw Error::InvalidArgument("input '" + name_ + "' is " + DataTypeName(dtype_) + ", not " +
                                   DataTypeName(DataTypeOf<T>::value));
    }
    if (byte_size_ != element_count() * sizeof(T)) {
      throw Error::InvalidArgument("input '" + name_ + "' has " + std::to_string(byte_size_) +
                                   " bytes, which does not match its shape " + ShapeString(shape_));
    }
  }

  std::string name_;
  TRITONSERVER_DataType dtype_ = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape_;
  uint64_t byte_size_ = 0;
  std::vector<Buffer> buffers_;
  mutable std::vector<char> gathered_;
};

// ---- Outputs ----------------------------------------------------------------

// One output tensor of a response and its buffer: in host memory for
// Response::AddOutput, where the core's allocator put it (memory_type())
// for Response::AddOutputBuffer. Lives (and its buffer with it) until the
// response is sent or dropped.
class OutputTensor {
 public:
  OutputTensor(std::string name, TRITONSERVER_DataType dtype, std::vector<int64_t> shape,
               void* data, uint64_t byte_size,
               TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU,
               int64_t memory_type_id = 0)
      : name_(std::move(name)),
        dtype_(dtype),
        shape_(std::move(shape)),
        data_(data),
        byte_size_(byte_size),
        memory_type_(memory_type),
        memory_type_id_(memory_type_id) {}

  const std::string& name() const { return name_; }
  TRITONSERVER_DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  void* data() const { return data_; }
  uint64_t byte_size() const { return byte_size_; }
  TRITONSERVER_MemoryType memory_type() const { return memory_type_; }
  int64_t memory_type_id() const { return memory_type_id_; }

  // The buffer as T; T must match dtype(), and the buffer be in host memory.
  template <typename T>
  Span<T> As() const {
    if (!IsHostMemory(memory_type_)) {
      throw Error::Unsupported("output '" + name_ + "' is in " +
                               TRITONSERVER_MemoryTypeString(memory_type_) +
                               " memory: fill it with CopyMemory");
    }
    if (dtype_ != DataTypeOf<T>::value) {
      throw Error::InvalidArgument("output '" + name_ + "' is " + DataTypeName(dtype_) + ", not " +
                                   DataTypeName(DataTypeOf<T>::value));
    }
    return {static_cast<T*>(data_), static_cast<size_t>(byte_size_ / sizeof(T))};
  }

 private:
  std::string name_;
  TRITONSERVER_DataType dtype_;
  std::vector<int64_t> shape_;
  void* data_;
  uint64_t byte_size_;
  TRITONSERVER_MemoryType memory_type_;
  int64_t memory_type_id_;
};

// The BYTES wire format of `values`: each a 4-byte little-endian length, then
// its bytes.
template <typename Strings>
std::string SerializeStrings(const Strings& values) {
  std::string out;
  for (const auto& value : values) {
    const std::string_view view(value);
    const uint32_t length = static_cast<uint32_t>(view.size());
    out.append(reinterpret_cast<const char*>(&length), sizeof(length));
    out.append(view.data(), view.size());
  }
  return out;
}

}  // namespace tritonserver::backend
