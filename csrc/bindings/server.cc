#include "bindings/server.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "bindings/deferred_delete.h"
#include "bindings/errors.h"
#include "bindings/message.h"
#include "bindings/response_queue.h"
#include "bindings/server_options.h"
#include "core_api.h"
#include "pyinterop/gil.h"
#include "pyinterop/parameters.h"

namespace py = pybind11;

namespace tritonpy {

void ServerHandle::Track(const std::shared_ptr<ResponseQueue>& queue) {
  std::lock_guard<std::mutex> lock(queues_mutex_);
  if (queues_.size() >= prune_at_) {  // amortized: drop the finished ones
    queues_.erase(std::remove_if(queues_.begin(), queues_.end(),
                                 [](const std::weak_ptr<ResponseQueue>& w) { return w.expired(); }),
                  queues_.end());
    prune_at_ = std::max<size_t>(64, queues_.size() * 2);
  }
  queues_.push_back(queue);
}

size_t ServerHandle::AbandonUnfinished(const std::string& message) {
  std::vector<std::weak_ptr<ResponseQueue>> queues;
  {
    std::lock_guard<std::mutex> lock(queues_mutex_);
    queues.swap(queues_);
  }
  size_t ended = 0;
  for (auto& weak : queues) {
    if (auto queue = weak.lock()) ended += queue->Abandon(TRITONSERVER_ERROR_UNAVAILABLE, message);
  }
  return ended;
}

namespace {

// Core 2.51 keeps one pinned-memory manager per process: the first server
// makes it, and deleting any server resets it (~InferenceServer calls
// PinnedMemoryManager::Reset). The servers still alive then get null
// buffers from every host allocation the core makes for them, and crash
// where the core does not check (seen: the first request of a sequence
// with implicit state copies its initial state into one). So a server
// whose handle goes while others live is stopped at once and deleted only
// with the last server of the process.
struct Census {
  std::mutex mutex;
  size_t alive = 0;
  std::vector<TRITONSERVER_Server*> stopped;  // deletion deferred
};
Census& Servers() {
  static auto* census = new Census();  // never destroyed: used until exit
  return *census;
}

}  // namespace

ServerHandle::ServerHandle(TRITONSERVER_Server* server, bool reuse_requests)
    : server_(server),
      in_flight_(std::make_shared<std::atomic<int64_t>>(0)),
      pool_(reuse_requests && server != nullptr) {
  if (server_ == nullptr) return;
  std::lock_guard<std::mutex> lock(Servers().mutex);
  ++Servers().alive;
}

ServerHandle::~ServerHandle() {
  if (server_ == nullptr) return;
  // Stop and ServerDelete wait for models to unload (and for the python
  // backend's stub processes to exit); no Python object is touched, so let
  // other threads run meanwhile.
  pyinterop::ReleaseGil unlocked;
  pool_.Close();  // kept requests keep their models loaded
  {
    ErrorPtr ignored(Core().TRITONSERVER_ServerStop(server_));
  }
  std::vector<TRITONSERVER_Server*> to_delete;
  {
    std::lock_guard<std::mutex> lock(Servers().mutex);
    if (--Servers().alive > 0) {
      Servers().stopped.push_back(server_);
      return;
    }
    to_delete.swap(Servers().stopped);
  }
  to_delete.push_back(server_);
  for (TRITONSERVER_Server* server : to_delete) {
    ErrorPtr ignored(Core().TRITONSERVER_ServerDelete(server));
  }
}

Server::Server(ServerOptions& options) {
  TRITONSERVER_Server* server = nullptr;
  {
    // ServerNew loads every startup model: it can take seconds and runs
    // backend code that may call back into Python.
    py::gil_scoped_release unlocked;
    Check(TRITON_FN(TRITONSERVER_ServerNew)(&server, options.get()));
  }
  handle_ = std::make_shared<ServerHandle>(server, !options.polls());
}

namespace {

// Servers whose stop failed (their exit timeout expired with work still
// running). Core 2.51 crashes if such a server is deleted while that work
// runs (seen: an abort within a second of ServerDelete), and so does a
// process that exits under it (its static destructors race the backend
// threads). So they are kept, and deleted once the core has released
// every request (DeleteIdleKeptServers, called at interpreter exit).
// Never destroyed: backend threads may still reach them during exit.
// Where it can, the package does not let the core's stop give up (its
// EXPLICIT-mode stop keeps a busy server running, and frees it once the
// model index shows every model gone: tritonserver._control.teardown), as
// a stopped core no longer says when the thread deleting a model is done.
struct KeptServers {
  std::mutex mutex;
  std::vector<std::shared_ptr<ServerHandle>> servers;
};
KeptServers& Kept() {
  static auto* kept = new KeptServers();
  return *kept;
}

void Keep(std::shared_ptr<ServerHandle> handle) {
  std::lock_guard<std::mutex> lock(Kept().mutex);
  Kept().servers.push_back(std::move(handle));
}

// Waits up to `timeout_s` for the kept servers' requests to be released,
// deletes the servers that have none left, and returns how many are still
// busy (those stay kept).
size_t DeleteIdleKeptServers(double timeout_s) {
  std::vector<std::shared_ptr<ServerHandle>> kept;
  {
    std::lock_guard<std::mutex> lock(Kept().mutex);
    kept.swap(Kept().servers);
  }
  py::gil_scoped_release unlocked;  // the requests' callbacks may need it
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(std::max(0.0, timeout_s)));
  auto busy = [](const std::shared_ptr<ServerHandle>& h) { return h->in_flight()->load() > 0; };
  while (std::any_of(kept.begin(), kept.end(), busy) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<std::shared_ptr<ServerHandle>> still_busy;
  for (auto& handle : kept) {
    if (busy(handle)) still_busy.push_back(std::move(handle));
  }
  kept.clear();  // ServerDelete of the idle ones (the GIL is already released)
  std::lock_guard<std::mutex> lock(Kept().mutex);
  for (auto& handle : still_busy) Kept().servers.push_back(std::move(handle));
  return still_busy.size();
}

// A stop that gave up, for `why`: whatever did not finish ends now for
// its reader (no iterator may wait on a server that gave up; the core may
// still run it, unseen), and the stop raises UnavailableError. The one
// place both texts are written, for the core's stop (Server::Stop) and the
// package's own (tritonserver._control.core_control).
[[noreturn]] void GiveUp(ServerHandle& handle, const std::string& why) {
  const size_t ended =
      handle.AbandonUnfinished("the server stopped before this request finished (" + why + ")");
  throw Error(TRITONSERVER_ERROR_UNAVAILABLE,
              "the server did not stop cleanly (" + why + "): " + std::to_string(ended) +
                  " request(s) had not finished and were ended with an error; the "
                  "server is freed at interpreter exit, once the core has finished them");
}

}  // namespace

void Server::Stop(bool models_gone, std::optional<unsigned int> exit_timeout_s) {
  DeleteReleased();  // released requests keep their models: let them go first
  std::shared_ptr<ServerHandle> handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handle = std::move(handle_);
  }
  if (!handle) return;
  const CoreApi& api = Core();
  TRITONSERVER_Error* err = nullptr;
  {
    // Stop unloads the models and waits (up to the exit timeout) for work
    // in flight; callbacks that need the GIL must be able to run.
    py::gil_scoped_release unlocked;
    handle->pool().Close();  // kept requests keep their models loaded
    if (exit_timeout_s && api.TRITONSERVER_ServerSetExitTimeout != nullptr) {
      ErrorPtr ignored(api.TRITONSERVER_ServerSetExitTimeout(handle->get(), *exit_timeout_s));
    }
    err = api.TRITONSERVER_ServerStop(handle->get());
  }
  if (err != nullptr && models_gone && handle->in_flight()->load() == 0) {
    // With the models gone and nothing in flight, what the core still
    // counted can only be the stale entry of a failed reload, which no call
    // clears (docs/reliability.md): "Exit timeout expired" is no failure.
    ErrorPtr ignored(err);
    err = nullptr;
  }
  if (err == nullptr) {
    // Every model is unloaded: no response can come any more. A request
    // still waiting was released by its backend without a final response
    // (the core sends none then): end it, or its reader waits forever.
    handle->AbandonUnfinished(
        "the server stopped, and this request's backend released it without a final response");
    handle.reset();  // ServerDelete (it releases the GIL itself)
    return;
  }
  ErrorPtr owned(err);
  Keep(handle);
  GiveUp(*handle, Core().TRITONSERVER_ErrorMessage(err));
}

std::shared_ptr<ServerHandle> Server::Handle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!handle_) {
    throw Error(TRITONSERVER_ERROR_UNAVAILABLE, "the server is stopped");
  }
  return handle_;
}

namespace {

// TRITONSERVER_Parameter objects built from parameters, freed together.
// It keeps the parameters: a BYTES parameter points into them.
class ParameterList {
 public:
  explicit ParameterList(pyinterop::Parameters items) : items_(std::move(items)) {
    const CoreApi& api = Core();
    for (const auto& [name, value] : items_) {
      TRITONSERVER_Parameter* p = std::visit(
          [&, &name = name](const auto& v) -> TRITONSERVER_Parameter* {
            using T = std::decay_t<decltype(v)>;
            const char* n = CString(name, "parameter name");
            if constexpr (std::is_same_v<T, bool>) {
              return api.TRITONSERVER_ParameterNew(n, TRITONSERVER_PARAMETER_BOOL, &v);
            } else if constexpr (std::is_same_v<T, int64_t>) {
              return api.TRITONSERVER_ParameterNew(n, TRITONSERVER_PARAMETER_INT, &v);
            } else if constexpr (std::is_same_v<T, std::string>) {
              return api.TRITONSERVER_ParameterNew(n, TRITONSERVER_PARAMETER_STRING,
                                                   CString(v, "parameter value"));
            } else if constexpr (std::is_same_v<T, pyinterop::ParameterBytes>) {
              return api.TRITONSERVER_ParameterBytesNew(n, v.data.data(), v.data.size());
            } else {
              return nullptr;  // doubles: not a load parameter
            }
          },
          value);
      if (p == nullptr) {
        throw Error(TRITONSERVER_ERROR_INVALID_ARG, "cannot create parameter '" + name + "'");
      }
      params_.push_back(p);
    }
  }
  ~ParameterList() {
    for (auto* p : params_) Core().TRITONSERVER_ParameterDelete(p);
  }
  ParameterList(const ParameterList&) = delete;
  ParameterList& operator=(const ParameterList&) = delete;
  const TRITONSERVER_Parameter** data() {
    return const_cast<const TRITONSERVER_Parameter**>(params_.data());
  }
  size_t size() const { return params_.size(); }

 private:
  pyinterop::Parameters items_;
  std::vector<TRITONSERVER_Parameter*> params_;
};

// Empties the server's pool of kept requests before a model load or unload
// and again after it (request_pool.h): a request created meanwhile would
// otherwise keep the version it found.
class ModelsChanging {
 public:
  explicit ModelsChanging(ServerHandle& handle) : handle_(handle) { handle_.pool().Flush(); }
  ~ModelsChanging() { handle_.pool().Flush(); }
  ModelsChanging(const ModelsChanging&) = delete;
  ModelsChanging& operator=(const ModelsChanging&) = delete;

 private:
  ServerHandle& handle_;
};

bool QueryBool(TRITONSERVER_Error* (*fn)(TRITONSERVER_Server*, bool*), const Server& s) {
  bool value = false;
  Check(fn(s.Raw(), &value));
  return value;
}

}  // namespace

void RegisterServer(py::module_& m) {
  using S = const Server&;
  using Name = const std::string&;
  // Each JSON-returning query hands back the core's message as a str.
  py::class_<Server>(m, "Server", "A started core server; stop() ends it.")
      .def(py::init<ServerOptions&>(), py::arg("options"))
      .def("stop", &Server::Stop, py::arg("models_gone") = false,
           py::arg("exit_timeout_s") = py::none(),
           "Stops the core; models_gone: every model was seen unloaded with no request in "
           "flight, so the core need not wait for anything; exit_timeout_s: how long the core "
           "may wait for what is left (default: the server's exit timeout).")
      .def(
          "give_up", [](S s, const std::string& why) { GiveUp(*s.Handle(), why); }, py::arg("why"),
          "For a stop that gave up (for why) while the server keeps running: ends every "
          "unfinished request for its reader, with UnavailableError (the core may still run "
          "it, unseen), and raises UnavailableError saying how many.")
      .def(
          "kept_requests", [](S s) { return s.Handle()->pool().kept(); },
          "Core requests kept for reuse (sent with inputs and requested outputs only, now "
          "released).")
      .def(
          "time_first_response", [](S s, bool on) { s.Handle()->set_time_first_response(on); },
          py::arg("on"),
          "Whether requests sent from now on observe nv_inference_first_response_histogram_ms "
          "(first_response_buckets, first_response_add).")
      .def(
          "in_flight", [](S s) { return s.Handle()->in_flight()->load(); },
          "Requests sent through this binding that the core has not yet released and deleted.")
      .def_static("delete_idle_kept_servers", &DeleteIdleKeptServers, py::arg("timeout_s"),
                  "Deletes the servers whose stop gave up once the core has released their "
                  "requests (waiting up to timeout_s); returns how many are still busy.")
      .def("is_live", [](S s) { return QueryBool(TRITON_FN(TRITONSERVER_ServerIsLive), s); })
      .def("is_ready", [](S s) { return QueryBool(TRITON_FN(TRITONSERVER_ServerIsReady), s); })
      .def(
          "model_is_ready",
          [](S s, Name name, int64_t version) {
            bool ready = false;
            Check(TRITON_FN(TRITONSERVER_ServerModelIsReady)(s.Raw(), CString(name, "model name"),
                                                             version, &ready));
            return ready;
          },
          py::arg("name"), py::arg("version"))
      .def("metadata",
           [](S s) {
             return MessageJson(
                 [&](auto* msg) { return TRITON_FN(TRITONSERVER_ServerMetadata)(s.Raw(), msg); });
           })
      .def(
          "model_metadata",
          [](S s, Name name, int64_t version) {
            return MessageJson([&](auto* msg) {
              return TRITON_FN(TRITONSERVER_ServerModelMetadata)(
                  s.Raw(), CString(name, "model name"), version, msg);
            });
          },
          py::arg("name"), py::arg("version"))
      .def(
          "model_config",
          [](S s, Name name, int64_t version, uint32_t config_version) {
            return MessageJson([&](auto* msg) {
              return TRITON_FN(TRITONSERVER_ServerModelConfig)(s.Raw(), CString(name, "model name"),
                                                               version, config_version, msg);
            });
          },
          py::arg("name"), py::arg("version"), py::arg("config_version"))
      .def(
          "model_statistics",
          [](S s, Name name, int64_t version) {
            return MessageJson([&](auto* msg) {
              return TRITON_FN(TRITONSERVER_ServerModelStatistics)(
                  s.Raw(), CString(name, "model name"), version, msg);
            });
          },
          py::arg("name"), py::arg("version"))
      .def(
          "model_index",
          [](S s, uint32_t flags) {
            return MessageJson([&](auto* msg) {
              return TRITON_FN(TRITONSERVER_ServerModelIndex)(s.Raw(), flags, msg);
            });
          },
          py::arg("flags"))
      .def(
          "model_batch_properties",
          [](S s, Name name, int64_t version) {
            uint32_t flags = 0;
            void* unused = nullptr;
            Check(TRITON_FN(TRITONSERVER_ServerModelBatchProperties)(
                s.Raw(), CString(name, "model name"), version, &flags, &unused));
            return flags;
          },
          py::arg("name"), py::arg("version"))
      .def(
          "model_transaction_properties",
          [](S s, Name name, int64_t version) {
            uint32_t flags = 0;
            void* unused = nullptr;
            Check(TRITON_FN(TRITONSERVER_ServerModelTransactionProperties)(
                s.Raw(), CString(name, "model name"), version, &flags, &unused));
            return flags;
          },
          py::arg("name"), py::arg("version"))
      .def(
          "load_model",
          [](const Server& s, const std::string& name,
             const py::typing::Optional<py::typing::Dict<
                 py::str, py::typing::Union<py::str, py::int_, py::bool_, py::bytes>>>&
                 parameters) {
            auto handle = s.Handle();
            ParameterList list(
                pyinterop::ParametersFromPython(parameters, pyinterop::ParameterUse::kLoad));
            // Loading runs the backend's initialization: seconds, other threads.
            py::gil_scoped_release unlocked;
            ModelsChanging changing(*handle);
            if (list.size() == 0) {
              Check(TRITON_FN(TRITONSERVER_ServerLoadModel)(handle->get(),
                                                            CString(name, "model name")));
            } else {
              Check(TRITON_FN(TRITONSERVER_ServerLoadModelWithParameters)(
                  handle->get(), CString(name, "model name"), list.data(), list.size()));
            }
          },
          py::arg("name"), py::arg("parameters") = py::none(),
          "Load (or reload) a model; parameters: a dict of str to bool, int, str or bytes.")
      .def(
          "unload_model",
          [](S s, Name name, bool dependents) {
            auto handle = s.Handle();
            py::gil_scoped_release unlocked;  // unloading waits on the model's threads
            ModelsChanging changing(*handle);
            if (dependents) {
              Check(TRITON_FN(TRITONSERVER_ServerUnloadModelAndDependents)(
                  handle->get(), CString(name, "model name")));
            } else {
              Check(TRITON_FN(TRITONSERVER_ServerUnloadModel)(handle->get(),
                                                              CString(name, "model name")));
            }
          },
          py::arg("name"), py::arg("unload_dependents") = false)
      .def("poll_model_repository",
           [](S s) {
             auto handle = s.Handle();
             py::gil_scoped_release unlocked;  // polling may load and unload models
             ModelsChanging changing(*handle);
             Check(TRITON_FN(TRITONSERVER_ServerPollModelRepository)(handle->get()));
           })
      .def(
          "register_model_repository",
          [](const Server& s, const std::string& path,
             const std::map<std::string, std::string>& mapping) {
            pyinterop::Parameters items;
            for (const auto& [subdir, model] : mapping) items.emplace_back(subdir, model);
            auto handle = s.Handle();
            ParameterList list(items);
            py::gil_scoped_release unlocked;  // reads the repository from disk
            Check(TRITON_FN(TRITONSERVER_ServerRegisterModelRepository)(
                handle->get(), CString(path, "repository path"), list.data(),
                static_cast<uint32_t>(list.size())));
          },
          py::arg("path"), py::arg("name_mapping"))
      .def(
          "unregister_model_repository",
          [](S s, Name path) {
            auto handle = s.Handle();
            py::gil_scoped_release unlocked;
            Check(TRITON_FN(TRITONSERVER_ServerUnregisterModelRepository)(
                handle->get(), CString(path, "repository path")));
          },
          py::arg("path"))
      .def(
          "metrics",
          [](S s, int format) {
            TRITONSERVER_Metrics* metrics = nullptr;
            Check(TRITON_FN(TRITONSERVER_ServerMetrics)(s.Raw(), &metrics));
            struct Owner {
              TRITONSERVER_Metrics* m;
              ~Owner() { ErrorPtr ignored(Core().TRITONSERVER_MetricsDelete(m)); }
            } owner{metrics};
            const char* base = nullptr;
            size_t size = 0;
            Check(TRITON_FN(TRITONSERVER_MetricsFormatted)(
                metrics, static_cast<TRITONSERVER_MetricFormat>(format), &base, &size));
            return std::string(base, size);
          },
          py::arg("format"))
      .def(
          "address", [](S s) { return reinterpret_cast<uintptr_t>(s.Raw()); },
          "The TRITONSERVER_Server* as an int, for C++ code that attaches to it.");
}

}  // namespace tritonpy
