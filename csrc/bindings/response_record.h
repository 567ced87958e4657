// Responses as typed records. The core's completion callback reads each
// response at once, on the core's thread and without the GIL, into a
// ResponseRecord: error, id, parameters and one OutputRecord per output,
// each output holding a reference to its buffer (memory the core owns rather
// than our allocator is copied into one). The core response is deleted right
// there, so no response ever keeps a model, or a stopping server, waiting on
// what the program does with its tensors. Python reads the records through
// read-only properties (tritonserver._c.triton_bindings.Response / Output).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings/allocator.h"
#include "pyinterop/parameters.h"
#include "triton/tritonserver.h"

namespace tritonpy {

// One output tensor of a response. Its Python object owns the memory: the
// buffer lives as long as the record (and every view that keeps it).
class OutputRecord {
 public:
  OutputRecord() = default;
  ~OutputRecord();
  OutputRecord(const OutputRecord&) = delete;
  OutputRecord& operator=(const OutputRecord&) = delete;

  std::string name;
  int datatype = 0;
  std::vector<int64_t> shape;
  uintptr_t data_ptr = 0;
  size_t byte_size = 0;
  int memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  OutputBuffer* buffer = nullptr;  // one reference; null for an empty output
};

// One response of a request, or a final flag alone (no response: only
// `flags`, the rest empty).
struct ResponseRecord {
  uint32_t flags = 0;
  std::optional<int> error_code;  // set: the response is this error
  std::string error_message;
  std::string request_id;
  std::string model_name;
  int64_t model_version = -1;
  pyinterop::Parameters parameters;
  std::vector<std::shared_ptr<OutputRecord>> outputs;
  // When classification was asked for: the label of each class of the first
  // output (its last dimension), None where the model's label file has none.
  std::optional<std::vector<std::optional<std::string>>> class_labels;

  bool final() const { return (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0; }
};

// Reads (and deletes) a core response; `classify` reads the class labels.
std::unique_ptr<ResponseRecord> ReadResponse(
    TRITONSERVER_InferenceResponse* response, uint32_t flags, bool classify);

// A record that ends a request with an error of our own.
std::unique_ptr<ResponseRecord> ErrorRecord(uint32_t flags,
                                            TRITONSERVER_Error_Code code,
                                            std::string message);

void RegisterResponseRecord(pybind11::module_& m);

}  // namespace tritonpy
