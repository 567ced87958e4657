// What the response iterators' C types share (response_stream.cc defines
// them; async_stream.cc builds the asynchronous one on ResponseStream).
#pragma once

#include <pybind11/pybind11.h>

namespace tritonpy {

// The state of a response iterator (tritonserver._iterators), the instance
// layout of ResponseStream and of every type built on it.
// clang-format would join PyObject_HEAD (a macro ending in a member) with the next line.
// clang-format off
struct StreamObject {
  PyObject_HEAD
  PyObject* weakrefs;
  PyObject* model;       // _model: the Model the responses are of
  PyObject* request;     // _request: the binding's InferenceRequest, sent
  PyObject* request_id;  // _request_id: the id responses get when the core gives none
  PyObject* forwarder;   // _forwarder: None, or what moves responses into a user's queue
  char raise_on_error;   // _raise_on_error
  char complete;         // _complete: the final response was delivered
};
// clang-format on

// Takes `response` (a new reference; null: the error set) for `stream`'s
// reader: marks the end at the final response and, when the stream raises
// on errors, raises a response's error instead of returning it.
PyObject* DeliverResponse(StreamObject* stream, PyObject* response);

// A new instance of `type` (ResponseStream or a type built on it) over
// `request`, already sent, with no id and no forwarder: `_sent`. Borrowed
// arguments; null with the error set.
PyObject* NewSentStream(PyTypeObject* type, PyObject* model, PyObject* request,
                        PyObject* raise_on_error);

// Whether the stream was set up (_setup or _sent); if not, a RuntimeError is set.
bool StreamIsSetUp(StreamObject* stream);

// The `inputs` of a call made with that one keyword argument and nothing
// else (borrowed); null, with no error set, for any other call. After
// inputs_sender().
PyObject* InputsOnly(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);

// send_inputs: `model`'s request of `inputs`, sent, when the fast path may
// take it; None (nothing sent) when not; null with the error set. A new
// reference. After inputs_sender().
PyObject* SendInputsFast(PyObject* model, PyObject* inputs);

// `name` as an interned str, a new reference kept by the caller for the
// process (attribute names looked up on the hot path); throws on failure.
PyObject* InternedName(const char* name);

// Model.async_infer's fast path and the asynchronous stream, built on `base`
// (ResponseStream).
void RegisterAsyncResponseStream(pybind11::module_& m, PyObject* base);

}  // namespace tritonpy
