// Responses as the public API's objects, made in C++ when Python pops them.
//
// tritonserver._response registers its classes once at import
// (set_response_classes): InferenceResponse, Tensor and MemoryBuffer, the
// DataType and MemoryType members by value, and the Python function that
// builds the responses this file leaves to it. A record that is outputs
// alone (no error, no class labels: nearly every response) becomes an
// InferenceResponse here, with one Tensor per output over a MemoryBuffer
// whose owner is the output's memory capsule, each field written straight
// into the slot its class keeps it in (tritonserver._slots); the Python function gets the
// others as the struct sequence (RecordToPython), so each field is
// computed in one place for each kind of record.
#pragma once

#include <pybind11/pybind11.h>

#include "bindings/response_record.h"

namespace tritonpy {

// The InferenceResponse of `record` for `model` (request_id: the request's
// own, used when the core's record has none). With the GIL.
pybind11::object RecordToResponse(ResponseRecord& record, pybind11::handle model,
                                  pybind11::handle request_id);

// Reads `final` and `error` (borrowed) of `response` from their slots when it
// is an InferenceResponse of the registered class with both set; false
// otherwise (the caller reads the attributes). With the GIL.
bool FinalAndError(PyObject* response, bool* final, PyObject** error);

void RegisterResponseObjects(pybind11::module_& m);

}  // namespace tritonpy
