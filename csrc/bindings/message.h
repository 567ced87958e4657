// A core query that answers with a TRITONSERVER_Message, as its JSON text.
#pragma once

#include <string>

#include "bindings/errors.h"
#include "core_api.h"

namespace tritonpy {

// Runs `query(&message)` (a core call filling a new message) and returns the
// message's JSON, deleting the message.
template <typename Query>
std::string MessageJson(Query&& query) {
  TRITONSERVER_Message* message = nullptr;
  Check(query(&message));
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
