// TRITONSERVER_Message to a JSON string, deleting the message.
#pragma once

#include <string>

#include "bindings/errors.h"
#include "core_api.h"

namespace tritonpy {

inline std::string TakeMessageJson(TRITONSERVER_Message* message) {
  struct Deleter {
    TRITONSERVER_Message* m;
    ~Deleter() { ErrorPtr ignored(Core().TRITONSERVER_MessageDelete(m)); }
  } owner{message};
  const char* base = nullptr;
  size_t size = 0;
  Check(TRITON_FN(TRITONSERVER_MessageSerializeToJson)(message, &base, &size));
  return std::string(base, size);
}

}  // namespace tritonpy
