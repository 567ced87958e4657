// TRITONSERVER_Server. The handle is shared: every request and response made
// from a server keeps it, so the core object is deleted only after the last
// of them is gone, whatever order Python drops them in.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>

#include "triton/tritonserver.h"

namespace tritonpy {

class ServerHandle {
 public:
  explicit ServerHandle(TRITONSERVER_Server* server) : server_(server) {}
  ~ServerHandle();
  ServerHandle(const ServerHandle&) = delete;
  ServerHandle& operator=(const ServerHandle&) = delete;
  TRITONSERVER_Server* get() const { return server_; }

 private:
  TRITONSERVER_Server* server_;
};

// The Python-facing server: owns one reference to the handle until stop().
class Server {
 public:
  explicit Server(class ServerOptions& options);
  ~Server() = default;

  // Stops the core (unloads models) and gives up this object's reference.
  void Stop();
  // The live handle; raises UnavailableError after Stop().
  std::shared_ptr<ServerHandle> Handle() const;
  TRITONSERVER_Server* Raw() const { return Handle()->get(); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<ServerHandle> handle_;
};

void RegisterServer(pybind11::module_& m);

}  // namespace tritonpy
