// TRITONSERVER_ServerOptions: one owner, one setter per C function.
#pragma once

#include <pybind11/pybind11.h>

#include "triton/tritonserver.h"

namespace tritonpy {

class ServerOptions {
 public:
  ServerOptions();
  ~ServerOptions();
  ServerOptions(const ServerOptions&) = delete;
  ServerOptions& operator=(const ServerOptions&) = delete;
  TRITONSERVER_ServerOptions* get() const { return options_; }

 private:
  TRITONSERVER_ServerOptions* options_ = nullptr;
};

void RegisterServerOptions(pybind11::module_& m);

}  // namespace tritonpy
