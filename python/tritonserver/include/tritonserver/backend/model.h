// What a backend sees of a loaded model and of its instances. The SDK creates
// a Model in TRITONBACKEND_ModelInitialize and an Instance in
// TRITONBACKEND_ModelInstanceInitialize, and deletes each in the matching
// Finalize; a backend keeps its own per-model or per-instance data in their
// state slot (EmplaceState / State).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tritonserver/backend/error.h"
#include "tritonserver/backend/json.h"

namespace tritonserver::backend {

class Backend;

namespace detail {

struct MessageDeleter {
  void operator()(TRITONSERVER_Message* message) const noexcept {
    ErrorPtr(TRITONSERVER_MessageDelete(message));
  }
};
using MessagePtr = std::unique_ptr<TRITONSERVER_Message, MessageDeleter>;

inline std::string MessageJson(TRITONSERVER_Message* message) {
  const char* base = nullptr;
  size_t size = 0;
  Check(TRITONSERVER_MessageSerializeToJson(message, &base, &size));
  return std::string(base, size);
}

// Steady-clock nanoseconds: the clock the core's statistics use.
inline uint64_t NowNs() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

template <typename T>
const void* TypeTag() noexcept {
  static const char tag = 0;
  return &tag;
}

struct Access;

}  // namespace detail

// Backend data of any type, owned by a Model or an Instance and destroyed
// with it (after the matching Finalize hook).
class StateSlot {
 public:
  StateSlot() = default;
  StateSlot(const StateSlot&) = delete;
  StateSlot& operator=(const StateSlot&) = delete;
  ~StateSlot() { Reset(); }

  // Constructs a T from `args`, replacing any previous state.
  template <typename T, typename... Args>
  T& Emplace(Args&&... args) {
    auto owned = std::make_unique<T>(std::forward<Args>(args)...);
    Reset();
    value_ = owned.release();
    deleter_ = [](void* p) { delete static_cast<T*>(p); };
    type_ = detail::TypeTag<T>();
    return *static_cast<T*>(value_);
  }

  // The state, which must have been emplaced as a T.
  template <typename T>
  T& Get() const {
    if (value_ == nullptr) {
      throw Error::Internal("no state was emplaced");
    }
    if (type_ != detail::TypeTag<T>()) {
      throw Error::Internal("the state was emplaced with another type");
    }
    return *static_cast<T*>(value_);
  }

  bool has_value() const { return value_ != nullptr; }

  void Reset() noexcept {
    if (value_ != nullptr) deleter_(value_);
    value_ = nullptr;
    deleter_ = nullptr;
    type_ = nullptr;
  }

 private:
  void* value_ = nullptr;
  void (*deleter_)(void*) = nullptr;
  const void* type_ = nullptr;
};

// A model (one version) using this backend, from its load to its unload.
// The typed state slot that Model and Instance both carry.
class WithState {
 public:
  template <typename T, typename... Args>
  T& EmplaceState(Args&&... args) {
    return state_.Emplace<T>(std::forward<Args>(args)...);
  }
  template <typename T>
  T& State() const {
    return state_.Get<T>();
  }
  bool has_state() const { return state_.has_value(); }

 private:
  StateSlot state_;
};

class Model : public WithState {
 public:
  Model(TRITONBACKEND_Model* model, Backend& backend) : handle_(model), backend_(&backend) {
    const char* name = nullptr;
    Check(TRITONBACKEND_ModelName(model, &name));
    name_ = name;
    Check(TRITONBACKEND_ModelVersion(model, &version_));
    ReadConfig();
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  TRITONBACKEND_Model* handle() const { return handle_; }
  Backend& backend() const { return *backend_; }
  const std::string& name() const { return name_; }
  uint64_t version() const { return version_; }
  // The model configuration (config.pbtxt, completed by the core) as JSON,
  // parsed and as the core's text (64-bit numbers as strings).
  const Json& config() const { return config_; }
  const std::string& config_text() const { return config_text_; }
  // > 0: requests are batched along their first dimension.
  int64_t max_batch_size() const { return max_batch_size_; }
  bool batching() const { return max_batch_size_ > 0; }
  // A decoupled model may send any number of responses per request.
  bool decoupled() const { return decoupled_; }
  bool sequence_batching() const { return config_.Contains("sequence_batching"); }

  // Whether the server lets backends complete the configuration (the
  // Python API's Options.strict_model_config=False).
  bool AutoCompleteAllowed() const {
    bool allowed = false;
    Check(TRITONBACKEND_ModelAutoCompleteConfig(handle_, &allowed));
    return allowed;
  }
  // Replaces the configuration with `json` (a completed config.pbtxt as
  // JSON), during ModelInitialize only. The core keeps from it
  // max_batch_size, the inputs and outputs, the scheduler (when none was
  // set) and the transaction policy; config() then reads the result.
  void SetConfig(const std::string& json) {
    TRITONSERVER_Message* message = nullptr;
    Check(TRITONSERVER_MessageNewFromSerializedJson(&message, json.data(), json.size()));
    detail::MessagePtr owned(message);
    Check(TRITONBACKEND_ModelSetConfig(handle_, 1, message));
    ReadConfig();
  }
  // The rank a batching model's input has in a request, batch dimension
  // included; 0 for a shape tensor or an unknown name.
  size_t batched_rank(std::string_view input) const {
    for (const auto& [name, rank] : batched_ranks_) {
      if (name == input) return rank;
    }
    return 0;
  }

  // The model's folder in its repository.
  std::string repository_path() const {
    TRITONBACKEND_ArtifactType type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
    const char* location = nullptr;
    Check(TRITONBACKEND_ModelRepository(handle_, &type, &location));
    return location != nullptr ? location : "";
  }

  // A `parameters { key: ... value { string_value: ... } }` entry of the
  // model configuration.
  std::optional<std::string> Parameter(std::string_view key) const {
    const Json& value = config_["parameters"][key]["string_value"];
    if (!value.is_string()) return std::nullopt;
    return value.AsString();
  }

 private:
  void ReadConfig() {
    TRITONSERVER_Message* message = nullptr;
    Check(TRITONBACKEND_ModelConfig(handle_, 1, &message));
    detail::MessagePtr owned(message);
    config_text_ = detail::MessageJson(message);
    config_ = Json::Parse(config_text_);
    const Json& max_batch = config_["max_batch_size"];
    max_batch_size_ = max_batch.is_null() ? 0 : max_batch.AsInt();
    const Json& decoupled = config_["model_transaction_policy"]["decoupled"];
    decoupled_ = decoupled.is_bool() && decoupled.AsBool();
    batched_ranks_.clear();
    if (batching() && config_["input"].is_array()) {
      for (const Json& input : config_["input"].AsArray()) {
        const Json& shape_tensor = input["is_shape_tensor"];
        if (shape_tensor.is_bool() && shape_tensor.AsBool()) continue;
        const Json& reshape = input["reshape"]["shape"];
        const size_t rank = reshape.is_array() ? reshape.size() : input["dims"].size();
        batched_ranks_.emplace_back(input["name"].AsString(), rank + 1);
      }
    }
  }

  TRITONBACKEND_Model* handle_;
  Backend* backend_;
  std::string name_;
  uint64_t version_ = 0;
  std::string config_text_;
  Json config_;
  int64_t max_batch_size_ = 0;
  bool decoupled_ = false;
  std::vector<std::pair<std::string, size_t>> batched_ranks_;
};

// One instance of a model (instance_group count N gives N). Never two
// Executes at once on one instance. Behind one core instance the SDK may run
// several (workers.h): instance `index` of them is named as the core names
// its index-th instance ("<group>_<index>") and shares the core's handle.
class Instance : public WithState {
 public:
  Instance(TRITONBACKEND_ModelInstance* instance, Model& model, uint32_t index = 0)
      : handle_(instance), model_(&model), index_(index) {
    const char* name = nullptr;
    Check(TRITONBACKEND_ModelInstanceName(instance, &name));
    name_ = name;
    if (index > 0) {
      const size_t cut = name_.rfind('_');
      name_ =
          (cut == std::string::npos ? name_ : name_.substr(0, cut)) + "_" + std::to_string(index);
    }
    Check(TRITONBACKEND_ModelInstanceKind(instance, &kind_));
    Check(TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id_));
    // The host policy is {"<policy name>": {settings}}: inputs are read
    // through the buffers given for that policy.
    TRITONSERVER_Message* policy = nullptr;  // owned by the core
    Check(TRITONBACKEND_ModelInstanceHostPolicy(instance, &policy));
    const Json parsed = Json::Parse(detail::MessageJson(policy));
    if (parsed.is_object() && parsed.size() > 0) {
      host_policy_ = parsed.AsObject().front().first;
    }
  }
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  TRITONBACKEND_ModelInstance* handle() const { return handle_; }
  Model& model() const { return *model_; }
  // Which of the instances behind one core instance this is (0 when the
  // core runs each instance itself).
  uint32_t index() const { return index_; }
  const std::string& name() const { return name_; }
  TRITONSERVER_InstanceGroupKind kind() const { return kind_; }
  int32_t device_id() const { return device_id_; }
  const std::string& host_policy() const { return host_policy_; }

 private:
  TRITONBACKEND_ModelInstance* handle_;
  Model* model_;
  uint32_t index_ = 0;
  std::string name_;
  TRITONSERVER_InstanceGroupKind kind_ = TRITONSERVER_INSTANCEGROUPKIND_CPU;
  int32_t device_id_ = 0;
  std::string host_policy_;
};

}  // namespace tritonserver::backend
