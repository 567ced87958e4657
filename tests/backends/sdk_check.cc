// sdk_check (test backend): exercises the SDK's request handling.
//
// INPUT (INT64) comes back as OUTPUT, and BATCH = [number of requests in the
// Execute call]; a BYTES INPUT comes back with "!" added to each string.
// Response parameters describe what the SDK showed: dtype, shape, buffers,
// memory_type of INPUT; the model's max_batch_size, config dims and "greeting"
// parameter; the backend's "greeting" setting; the request's id, correlation id
// and "scale" parameter; the instance's host policy as the core gave it
// (JSON) and the CPUs the executing thread may run on.
//
// Failures, per request:
//  - a negative value in INPUT: the request fails (thrown inside ForEach);
//  - request parameter "execute_throws" = message: after answering the other
//    requests, Execute throws std::runtime_error(message);
//  - request parameter "no_answer" = true: the request is left unanswered.
// Decoupled models get one response per value of INPUT (OUTPUT = [value]),
// then the final flag; a negative value fails the request mid-stream.
#include <tritonserver/backend.h>

#include <sched.h>

#include <stdexcept>

namespace tb = tritonserver::backend;

class SdkCheck : public tb::Backend {
 public:
  void Execute(tb::Instance& instance, tb::Requests& requests) override {
    const int64_t batch = static_cast<int64_t>(requests.size());
    const tb::Model& model = instance.model();
    std::string execute_throws;
    requests.ForEach([&](tb::Request& request) {
      if (const auto message = request.StringParameter("execute_throws")) {
        execute_throws = *message;
        return;
      }
      if (request.BoolParameter("no_answer").value_or(false)) return;

      const tb::InputTensor input = request.Input("INPUT");
      if (input.dtype() == TRITONSERVER_TYPE_BYTES) {  // each string + "!"
        std::vector<std::string> out;
        for (const std::string_view text : input.Strings()) {
          out.emplace_back(std::string(text) + "!");
        }
        tb::Response response = request.NewResponse();
        response.SetStringOutput("OUTPUT", input.shape(), out);
        response.Send();
        return;
      }
      const tb::Span<const int64_t> values = input.As<int64_t>();
      if (model.decoupled()) {
        for (const int64_t value : values) {
          if (value < 0) Negative(value);
          tb::Response response = request.NewResponse();
          response.SetOutput("OUTPUT", {1}, &value, 1);
          response.Send(/*final=*/false);
        }
        request.Finish();
        return;
      }
      for (const int64_t value : values) {
        if (value < 0) Negative(value);
      }
      tb::Response response = request.NewResponse();
      response.SetOutput("OUTPUT", input.shape(), values.data(), values.size());
      response.SetOutput("BATCH", {1}, &batch, 1);
      response.SetStringParameter("dtype", tb::DataTypeName(input.dtype()));
      response.SetStringParameter("shape", tb::ShapeString(input.shape()));
      response.SetIntParameter("buffers", static_cast<int64_t>(input.buffers().size()));
      response.SetStringParameter("memory_type",
                                  TRITONSERVER_MemoryTypeString(input.memory_type()));
      response.SetIntParameter("max_batch_size", model.max_batch_size());
      response.SetIntParameter("config_dim0", model.config()["input"][0]["dims"][0].AsInt());
      response.SetStringParameter("greeting", model.Parameter("greeting").value_or(""));
      response.SetStringParameter("setting", Setting("greeting").value_or(""));
      response.SetStringParameter("request_id", request.id());
      response.SetStringParameter("correlation_id", request.correlation_id().Key());
      response.SetIntParameter("scale", request.IntParameter("scale").value_or(0));
      response.SetStringParameter("host_policy", HostPolicy(instance));
      response.SetStringParameter("cpus", AllowedCpus());
      response.Send();
    });
    if (!execute_throws.empty()) throw std::runtime_error(execute_throws);
  }

 private:
  static std::string HostPolicy(const tb::Instance& instance) {
    TRITONSERVER_Message* policy = nullptr;  // owned by the core
    tb::Check(TRITONBACKEND_ModelInstanceHostPolicy(instance.handle(), &policy));
    return tb::detail::MessageJson(policy);
  }

  // "0,3": the CPUs this thread may run on.
  static std::string AllowedCpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return "?";
    std::string cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &set)) continue;
      if (!cpus.empty()) cpus += ",";
      cpus += std::to_string(cpu);
    }
    return cpus;
  }

  [[noreturn]] static void Negative(int64_t value) {
    throw tb::Error::InvalidArgument("sdk_check: negative value " + std::to_string(value));
  }
};

TRITONSERVER_BACKEND(SdkCheck)
