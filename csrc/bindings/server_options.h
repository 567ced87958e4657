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
  // Whether the model control mode set is POLL (the core loads by itself).
  bool polls() const { return polls_; }
  void set_polls(bool polls) { polls_ = polls; }

 private:
  TRITONSERVER_ServerOptions* options_ = nullptr;
  bool polls_ = false;
};

void RegisterServerOptions(pybind11::module_& m);

}  // namespace tritonpy
