#include "bindings/server.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "bindings/errors.h"
#include "bindings/gil.h"
#include "bindings/message.h"
#include "bindings/response.h"
#include "bindings/server_options.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {

void ServerHandle::Track(const std::shared_ptr<ResponseSink>& sink) {
  std::lock_guard<std::mutex> lock(sinks_mutex_);
  if (sinks_.size() >= prune_at_) {  // amortized: drop the finished ones
    sinks_.erase(std::remove_if(sinks_.begin(), sinks_.end(),
                                [](const std::weak_ptr<ResponseSink>& w) { return w.expired(); }),
                 sinks_.end());
    prune_at_ = std::max<size_t>(64, sinks_.size() * 2);
  }
  sinks_.push_back(sink);
}

size_t ServerHandle::AbandonUnfinished(const std::string& message) {
  std::vector<std::weak_ptr<ResponseSink>> sinks;
  {
    std::lock_guard<std::mutex> lock(sinks_mutex_);
    sinks.swap(sinks_);
  }
  size_t ended = 0;
  for (auto& weak : sinks) {
    if (auto sink = weak.lock()) ended += sink->Abandon(TRITONSERVER_ERROR_UNAVAILABLE, message);
  }
  return ended;
}

ServerHandle::~ServerHandle() {
  if (server_ == nullptr) return;
  // ServerDelete waits for models to unload (and for the python backend's
  // stub processes to exit); no Python object is touched, so let other
  // threads run meanwhile.
  GilReleaseIfHeld unlocked;
  ErrorPtr ignored(Core().TRITONSERVER_ServerDelete(server_));
}

Server::Server(ServerOptions& options) {
  TRITONSERVER_Server* server = nullptr;
  {
    // ServerNew loads every startup model: it can take seconds and runs
    // backend code that may call back into Python.
    py::gil_scoped_release unlocked;
    Check(TRITON_FN(TRITONSERVER_ServerNew)(&server, options.get()));
  }
  handle_ = std::make_shared<ServerHandle>(server);
}

namespace {

// Servers whose stop failed (their exit timeout expired with work still
// running). Core 2.51 crashes if such a server is deleted (seen: an abort
// within a second of ServerDelete), so they are kept for the life of the
// process, where the core finishes their requests; exiting with them is
// clean.
void KeepForever(std::shared_ptr<ServerHandle> handle) {
  static auto* kept = new std::vector<std::shared_ptr<ServerHandle>>();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(handle));
}

}  // namespace

void Server::Stop() {
  std::shared_ptr<ServerHandle> handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handle = std::move(handle_);
  }
  if (!handle) return;
  TRITONSERVER_Error* err = nullptr;
  {
    // Stop unloads the models and waits (up to the exit timeout) for work
    // in flight; callbacks that need the GIL must be able to run.
    py::gil_scoped_release unlocked;
    err = TRITON_FN(TRITONSERVER_ServerStop)(handle->get());
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
  const std::string why = Core().TRITONSERVER_ErrorMessage(err);
  // Whatever did not finish ends now for its reader (no iterator may wait
  // on a server that gave up); the core may still run it, unseen.
  const size_t ended = handle->AbandonUnfinished(
      "the server stopped before this request finished (" + why + ")");
  KeepForever(std::move(handle));
  throw TritonError(TRITONSERVER_ERROR_UNAVAILABLE,
                    "the server did not stop cleanly (" + why + "): " + std::to_string(ended) +
                        " request(s) had not finished and were ended with an error; the "
                        "server's memory is kept until the process exits");
}

std::shared_ptr<ServerHandle> Server::Handle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!handle_) {
    throw TritonError(TRITONSERVER_ERROR_UNAVAILABLE,
                      "the server is stopped");
  }
  return handle_;
}

namespace {

// bytes first: pybind11 would also turn a bytes object into std::string;
// bool before int: a Python bool is an int.
using ParamValue = std::variant<py::bytes, bool, int64_t, std::string>;

// TRITONSERVER_Parameter objects built from Python values, freed together.
class ParameterList {
 public:
  explicit ParameterList(const std::vector<std::pair<std::string, ParamValue>>& items) {
    const CoreApi& api = Core();
    for (const auto& [name, value] : items) {
      TRITONSERVER_Parameter* p = nullptr;
      if (const bool* b = std::get_if<bool>(&value)) {
        p = api.TRITONSERVER_ParameterNew(name.c_str(), TRITONSERVER_PARAMETER_BOOL, b);
      } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
        p = api.TRITONSERVER_ParameterNew(name.c_str(), TRITONSERVER_PARAMETER_INT, i);
      } else if (const std::string* s = std::get_if<std::string>(&value)) {
        p = api.TRITONSERVER_ParameterNew(name.c_str(), TRITONSERVER_PARAMETER_STRING, s->c_str());
      } else {
        std::string_view data = std::get<py::bytes>(value);
        p = api.TRITONSERVER_ParameterBytesNew(name.c_str(), data.data(), data.size());
      }
      if (p == nullptr) {
        throw TritonError(TRITONSERVER_ERROR_INVALID_ARG,
                          "cannot create parameter '" + name + "'");
      }
      params_.push_back(p);
    }
  }
  ~ParameterList() {
    for (auto* p : params_) Core().TRITONSERVER_ParameterDelete(p);
  }
  const TRITONSERVER_Parameter** data() {
    return const_cast<const TRITONSERVER_Parameter**>(params_.data());
  }
  size_t size() const { return params_.size(); }

 private:
  std::vector<TRITONSERVER_Parameter*> params_;
};

bool QueryBool(TRITONSERVER_Error* (*fn)(TRITONSERVER_Server*, bool*),
               const Server& s) {
  bool value = false;
  Check(fn(s.Raw(), &value));
  return value;
}

}  // namespace

void RegisterServer(py::module_& m) {
  py::class_<Server>(m, "Server")
      .def(py::init<ServerOptions&>(), py::arg("options"))
      .def("stop", &Server::Stop)
      .def("is_live", [](const Server& s) {
        return QueryBool(TRITON_FN(TRITONSERVER_ServerIsLive), s);
      })
      .def("is_ready", [](const Server& s) {
        return QueryBool(TRITON_FN(TRITONSERVER_ServerIsReady), s);
      })
      .def("model_is_ready", [](const Server& s, const std::string& name, int64_t version) {
        bool ready = false;
        Check(TRITON_FN(TRITONSERVER_ServerModelIsReady)(s.Raw(), name.c_str(), version, &ready));
        return ready;
      })
      .def("metadata", [](const Server& s) {
        TRITONSERVER_Message* msg = nullptr;
        Check(TRITON_FN(TRITONSERVER_ServerMetadata)(s.Raw(), &msg));
        return TakeMessageJson(msg);
      })
      .def("model_metadata", [](const Server& s, const std::string& name, int64_t version) {
        TRITONSERVER_Message* msg = nullptr;
        Check(TRITON_FN(TRITONSERVER_ServerModelMetadata)(s.Raw(), name.c_str(), version, &msg));
        return TakeMessageJson(msg);
      })
      .def("model_config", [](const Server& s, const std::string& name, int64_t version,
                              uint32_t config_version) {
        TRITONSERVER_Message* msg = nullptr;
        Check(TRITON_FN(TRITONSERVER_ServerModelConfig)(s.Raw(), name.c_str(), version,
                                                        config_version, &msg));
        return TakeMessageJson(msg);
      })
      .def("model_statistics", [](const Server& s, const std::string& name, int64_t version) {
        TRITONSERVER_Message* msg = nullptr;
        Check(TRITON_FN(TRITONSERVER_ServerModelStatistics)(s.Raw(), name.c_str(), version, &msg));
        return TakeMessageJson(msg);
      })
      .def("model_index", [](const Server& s, uint32_t flags) {
        TRITONSERVER_Message* msg = nullptr;
        Check(TRITON_FN(TRITONSERVER_ServerModelIndex)(s.Raw(), flags, &msg));
        return TakeMessageJson(msg);
      })
      .def("model_batch_properties", [](const Server& s, const std::string& name, int64_t version) {
        uint32_t flags = 0;
        void* unused = nullptr;
        Check(TRITON_FN(TRITONSERVER_ServerModelBatchProperties)(s.Raw(), name.c_str(), version,
                                                                 &flags, &unused));
        return flags;
      })
      .def("model_transaction_properties", [](const Server& s, const std::string& name,
                                              int64_t version) {
        uint32_t flags = 0;
        void* unused = nullptr;
        Check(TRITON_FN(TRITONSERVER_ServerModelTransactionProperties)(s.Raw(), name.c_str(),
                                                                       version, &flags, &unused));
        return flags;
      })
      .def("load_model", [](const Server& s, const std::string& name,
                            const std::vector<std::pair<std::string, ParamValue>>& params) {
        auto handle = s.Handle();
        ParameterList list(params);
        // Loading runs the backend's initialization: seconds, other threads.
        py::gil_scoped_release unlocked;
        if (list.size() == 0) {
          Check(TRITON_FN(TRITONSERVER_ServerLoadModel)(handle->get(), name.c_str()));
        } else {
          Check(TRITON_FN(TRITONSERVER_ServerLoadModelWithParameters)(
              handle->get(), name.c_str(), list.data(), list.size()));
        }
      }, py::arg("name"), py::arg("parameters") = std::vector<std::pair<std::string, ParamValue>>{})
      .def("unload_model", [](const Server& s, const std::string& name, bool dependents) {
        auto handle = s.Handle();
        py::gil_scoped_release unlocked;  // unloading waits on the model's threads
        if (dependents) {
          Check(TRITON_FN(TRITONSERVER_ServerUnloadModelAndDependents)(handle->get(), name.c_str()));
        } else {
          Check(TRITON_FN(TRITONSERVER_ServerUnloadModel)(handle->get(), name.c_str()));
        }
      }, py::arg("name"), py::arg("unload_dependents") = false)
      .def("poll_model_repository", [](const Server& s) {
        auto handle = s.Handle();
        py::gil_scoped_release unlocked;  // polling may load and unload models
        Check(TRITON_FN(TRITONSERVER_ServerPollModelRepository)(handle->get()));
      })
      .def("register_model_repository", [](const Server& s, const std::string& path,
                                           const std::map<std::string, std::string>& mapping) {
        std::vector<std::pair<std::string, ParamValue>> items;
        for (const auto& [subdir, model] : mapping) items.emplace_back(subdir, model);
        auto handle = s.Handle();
        ParameterList list(items);
        py::gil_scoped_release unlocked;  // reads the repository from disk
        Check(TRITON_FN(TRITONSERVER_ServerRegisterModelRepository)(
            handle->get(), path.c_str(), list.data(), static_cast<uint32_t>(list.size())));
      })
      .def("unregister_model_repository", [](const Server& s, const std::string& path) {
        auto handle = s.Handle();
        py::gil_scoped_release unlocked;
        Check(TRITON_FN(TRITONSERVER_ServerUnregisterModelRepository)(handle->get(), path.c_str()));
      })
      .def("metrics", [](const Server& s, int format) {
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
      });
}

}  // namespace tritonpy
