// hooks (test backend): records every hook call, and fails in the hook it is
// told to.
//
// Each hook appends "<hook> <subject> thread=<id>" to the file named by the
// backend setting "log" (Options.backend_configuration["hooks"]["log"]); an
// instance hook's subject is "<instance name> core=<core instance handle>".
// A hook throws when its name is the backend setting "fail_in" (initialize,
// finalize) or the model parameter "fail_in" (model_initialize,
// model_finalize, instance_initialize, instance_finalize, execute).
// Execute answers each request with OUTPUT0 = INPUT0.
#include <tritonserver/backend.h>

#include <cstdio>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

namespace tb = tritonserver::backend;

class Hooks : public tb::Backend {
 public:
  void Initialize() override { Hook("initialize", name(), nullptr); }
  void Finalize() override { Hook("finalize", name(), nullptr); }
  void ModelInitialize(tb::Model& model) override {
    Hook("model_initialize", model.name(), &model);
  }
  void ModelFinalize(tb::Model& model) override { Hook("model_finalize", model.name(), &model); }
  void InstanceInitialize(tb::Instance& instance) override {
    Hook("instance_initialize", Named(instance), &instance.model());
  }
  void InstanceFinalize(tb::Instance& instance) override {
    Hook("instance_finalize", Named(instance), &instance.model());
  }

  void Execute(tb::Instance& instance, tb::Requests& requests) override {
    Hook("execute", instance.name() + " requests=" + std::to_string(requests.size()),
         &instance.model());
    requests.ForEach([](tb::Request& request) {
      const tb::InputTensor input = request.Input("INPUT0");
      tb::Response response = request.NewResponse();
      response.SetOutputBytes("OUTPUT0", input.dtype(), input.shape(), input.Bytes().data(),
                              input.byte_size());
      response.Send();
    });
  }

 private:
  // The instance's name and the core's instance it runs behind: several
  // Instances share one core instance when the SDK runs workers.
  static std::string Named(const tb::Instance& instance) {
    std::ostringstream text;
    text << instance.name() << " core=" << static_cast<const void*>(instance.handle());
    return text.str();
  }

  void Hook(const std::string& hook, const std::string& subject, const tb::Model* model) {
    if (const auto path = Setting("log")) {
      std::ostringstream line;
      line << hook << " " << subject
           << " thread=" << std::hash<std::thread::id>()(std::this_thread::get_id()) << "\n";
      std::lock_guard<std::mutex> lock(mutex_);
      if (FILE* f = std::fopen(path->c_str(), "a")) {
        std::fputs(line.str().c_str(), f);
        std::fclose(f);
      }
    }
    const std::optional<std::string> fail =
        model != nullptr ? model->Parameter("fail_in") : Setting("fail_in");
    if (fail == hook) {
      throw tb::Error::InvalidArgument("hooks: " + hook + " failed on purpose");
    }
  }

  std::mutex mutex_;  // Execute runs concurrently on different instances
};

TRITONSERVER_BACKEND(Hooks)
