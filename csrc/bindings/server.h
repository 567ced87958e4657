// TRITONSERVER_Server. The handle is shared: every request and response made
// from a server keeps it, so the core object is deleted only after the last
// of them is gone, whatever order Python drops them in.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings/request_pool.h"
#include "triton/tritonserver.h"

namespace tritonpy {

class ServerHandle {
 public:
  // `reuse_requests`: whether sent requests may be kept for reuse
  // (request_pool.h; not where the core loads models by itself).
  ServerHandle(TRITONSERVER_Server* server, bool reuse_requests);
  // Stops the server; deletes it, unless other servers of this process are
  // alive (then it is deleted with the last of them: see server.cc).
  ~ServerHandle();
  ServerHandle(const ServerHandle&) = delete;
  ServerHandle& operator=(const ServerHandle&) = delete;
  TRITONSERVER_Server* get() const { return server_; }
  // Requests the core holds (sent, not yet released). Shared so a request
  // can count itself out without keeping the server alive.
  const std::shared_ptr<std::atomic<int64_t>>& in_flight() const { return in_flight_; }

  // Queues of sent requests, so a stop that gives up can finish them.
  void Track(const std::shared_ptr<class ResponseQueue>& queue);
  // Gives every unfinished queue a final error response; returns how many.
  size_t AbandonUnfinished(const std::string& message);
  // Core requests kept for reuse; emptied around every model load and unload.
  RequestPool& pool() { return pool_; }
  // Whether requests sent from now on time their first response
  // (first_response.h: --metrics-config histogram_latencies=true).
  bool time_first_response() const { return time_first_response_.load(std::memory_order_relaxed); }
  void set_time_first_response(bool on) { time_first_response_.store(on); }

 private:
  TRITONSERVER_Server* server_;
  std::shared_ptr<std::atomic<int64_t>> in_flight_;
  std::mutex queues_mutex_;
  std::vector<std::weak_ptr<ResponseQueue>> queues_;
  size_t prune_at_ = 64;
  std::atomic<bool> time_first_response_{false};
  RequestPool pool_;  // emptied (closed) before the server stops
};

// The Python-facing server: owns one reference to the handle until stop().
class Server {
 public:
  explicit Server(class ServerOptions& options);
  ~Server() = default;

  // Stops the core (unloads models) and gives up this object's reference.
  // `models_gone`: the caller saw every model unloaded and no request in
  // flight; then an expired exit timeout is no failure (only a stale entry
  // of a failed reload can be left: docs/reliability.md). `exit_timeout_s`
  // replaces the server's exit timeout.
  void Stop(bool models_gone = false, std::optional<unsigned int> exit_timeout_s = std::nullopt);
  // The live handle; raises UnavailableError after Stop().
  std::shared_ptr<ServerHandle> Handle() const;
  TRITONSERVER_Server* Raw() const { return Handle()->get(); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<ServerHandle> handle_;
};

void RegisterServer(pybind11::module_& m);

}  // namespace tritonpy
