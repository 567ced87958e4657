// Responses as typed records. The core's completion callback reads each
// response at once, on the core's thread and without the GIL, into a
// ResponseRecord: error, id, parameters and one OutputRecord per output,
// each output holding a reference to its buffer (memory the core owns rather
// than our allocator is copied into one). The core response is deleted right
// there, so no response ever keeps a model, or a stopping server, waiting on
// what the program does with its tensors.
//
// Python gets each record as a named, read-only struct sequence
// (tritonserver._c.triton_bindings.Response, with a tuple of Output), made
// when it pops it: cheap to build, no object registry to join. An Output's
// `memory` field owns its buffer (a capsule whose destructor drops the
// reference).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings/allocator.h"
#include "pyinterop/parameters.h"
#include "triton/tritonserver.h"

namespace tritonpy {

// One output tensor of a response and one reference to its buffer.
class OutputRecord {
 public:
  OutputRecord() = default;
  ~OutputRecord();
  OutputRecord(OutputRecord&& other) noexcept;
  OutputRecord(const OutputRecord&) = delete;
  OutputRecord& operator=(const OutputRecord&) = delete;
  OutputRecord& operator=(OutputRecord&&) = delete;

  std::string name;
  int datatype = 0;
  std::vector<int64_t> shape;
  uintptr_t data_ptr = 0;
  size_t byte_size = 0;
  int memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  OutputBuffer* buffer = nullptr;  // one reference; null for an empty output
};

// Which class labels ReadResponse reads, set before the request is sent.
struct LabelRequest {
  // The first output's, over its last dimension (the in-process
  // "classification" request parameter).
  bool first_output = false;
  // The named outputs' (the frontends' classification extension), over one
  // batch item: the whole output, or all but its first dimension when
  // `batched` (the model batches).
  std::vector<std::string> outputs;
  bool batched = false;

  bool any() const { return first_output || !outputs.empty(); }
};

// The labels of one output's classes, by class index; nullopt where the
// model's label file has none.
using ClassLabels = std::vector<std::optional<std::string>>;

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
  std::vector<OutputRecord> outputs;
  // When classification was asked for: the label of each class of the first
  // output (its last dimension), None where the model's label file has none.
  std::optional<ClassLabels> class_labels;
  // For LabelRequest::outputs: each named output present in the response,
  // with its labels.
  std::optional<std::vector<std::pair<std::string, ClassLabels>>> output_labels;

  bool final() const { return (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0; }
};

// Reads (and deletes, whatever happens) a core response, with the class
// labels `labels` asks for, into `record`: a new record, or null for one made
// here.
void ReadResponse(TRITONSERVER_InferenceResponse* response, uint32_t flags,
                  const LabelRequest& labels, std::unique_ptr<ResponseRecord>& record);

// A record that ends a request with an error of our own.
std::unique_ptr<ResponseRecord> ErrorRecord(uint32_t flags, TRITONSERVER_Error_Code code,
                                            std::string message);

// The capsule that takes over `output`'s buffer reference (which must be set).
pybind11::object OutputMemory(OutputRecord& output);

// The record as its Python struct sequence (with the GIL); the buffers move
// into the Outputs' capsules.
pybind11::object RecordToPython(ResponseRecord& record);

// The struct sequence types Response and Output, added to `m`.
void RegisterResponseRecord(pybind11::module_& m);

}  // namespace tritonpy
