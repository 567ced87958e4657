// A string every backend library built with this SDK carries, so that the
// tritonserver package can tell, by reading the library file, that the
// backend runs several instances behind one core instance when the model
// parameter "tritonserver.workers" asks (workers.h). The package then asks
// the core for one instance of such a backend's models.
#pragma once

#define TRITONSERVER_BACKEND_SDK_MARKER_TEXT "tritonserver-backend-sdk:workers-parameter-1"

// Defines the marker in this library (once per library, at namespace scope).
#define TRITONSERVER_BACKEND_SDK_MARKER()                \
  extern "C" __attribute__((used, visibility("hidden"))) \
  const char tritonserver_backend_sdk_marker[] = TRITONSERVER_BACKEND_SDK_MARKER_TEXT
