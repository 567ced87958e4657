// TRITONSERVER_InferenceRequest. Python fills it, then Send() hands it to
// the core, which owns it until the release callback; the callback deletes
// it, so a Python object that outlives the request (an iterator kept for
// cancel()) never keeps a model loaded. Input data is read in place: the
// Python objects that own it stay referenced until release.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bindings/response.h"
#include "bindings/server.h"
#include "triton/tritonserver.h"

namespace tritonpy {

class Request : public std::enable_shared_from_this<Request> {
 public:
  Request(const Server& server, const std::string& model, int64_t version);
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // The C request, for setters; refused once the request was sent.
  TRITONSERVER_InferenceRequest* Mutable();

  // Declares input `name` and appends one buffer of its data, in place;
  // `owner` is kept alive until the core releases the request.
  void AddInput(const std::string& name, int datatype,
                const std::vector<int64_t>& shape, uintptr_t base,
                size_t byte_size, int memory_type, int64_t memory_type_id,
                pybind11::object owner);

  // Hands the request to the core; responses arrive in the returned sink.
  std::shared_ptr<ResponseSink> Send();
  void Cancel();

 private:
  static void OnRelease(TRITONSERVER_InferenceRequest* request, uint32_t flags,
                        void* userp);
  void DropOwners();

  std::weak_ptr<ServerHandle> server_;  // the request never keeps it alive
  TRITONSERVER_InferenceRequest* request_ = nullptr;  // null once released
  std::mutex mutex_;
  bool sent_ = false;
  std::vector<PyObject*> owners_;          // strong refs, dropped under the GIL
  std::shared_ptr<Request> in_flight_;     // self, while the core holds it
};

void RegisterRequest(pybind11::module_& m);

}  // namespace tritonpy
