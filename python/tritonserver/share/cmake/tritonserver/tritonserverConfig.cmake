# CMake package of the tritonserver Python package: build Triton backends
# with its header-only backend SDK, against any Triton core at run time.
#
#   find_package(tritonserver CONFIG REQUIRED)
#   tritonserver_add_backend(mybackend mybackend.cc)
#
# Point CMake at this folder with
#   cmake -S . -B build -Dtritonserver_DIR="$(python -m tritonserver --cmakedir)"
#
# Provides
#   tritonserver::backend_sdk    INTERFACE target: the SDK and Triton C API
#                                headers, C++17.
#   tritonserver_add_backend(<name> <source>...
#                            [OUTPUT_DIRECTORY <dir>] [INSTALL_DIRECTORY <dir>])
#       Builds libtriton_<name>.so (target triton_<name>) into
#       <dir>/<name>/, default ${CMAKE_BINARY_DIR}/backends/<name>/, so that
#       folder's parent is a backend directory for
#       tritonserver.Server(backend_directory=...). `cmake --install` puts
#       it in <prefix>/<INSTALL_DIRECTORY>/<name>/ (default: backends).
#   TRITONSERVER_INCLUDE_DIRS    the include folders, for other build tools.
#
# No Triton library is needed to build. A backend gets DT_NEEDED
# libtritonserver.so and RUNPATH $ORIGIN (from an empty link-time stand-in):
# tritonserver puts a libtritonserver.so link to the running core beside
# each backend it loads, so the backend binds to the core already in the
# process. Only the TRITONBACKEND_* entry points are exported.

get_filename_component(_tritonserver_package "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(_tritonserver_sdk "${_tritonserver_package}/include")
if(NOT EXISTS "${_tritonserver_sdk}/tritonserver/backend.h")
  set(tritonserver_FOUND FALSE)
  set(tritonserver_NOT_FOUND_MESSAGE
      "the backend SDK headers are missing from ${_tritonserver_sdk}")
  return()
endif()
if(EXISTS "${_tritonserver_sdk}/triton/tritonbackend.h")
  # An installed package: the C API headers sit beside the SDK.
  set(TRITONSERVER_INCLUDE_DIRS "${_tritonserver_sdk}")
elseif(EXISTS "${_tritonserver_package}/../../third_party/triton/tritonbackend.h")
  # A source checkout (python/tritonserver/ on PYTHONPATH, or editable).
  get_filename_component(_tritonserver_third_party "${_tritonserver_package}/../../third_party" ABSOLUTE)
  set(TRITONSERVER_INCLUDE_DIRS "${_tritonserver_sdk}" "${_tritonserver_third_party}")
else()
  set(tritonserver_FOUND FALSE)
  set(tritonserver_NOT_FOUND_MESSAGE
      "the Triton C API headers (triton/tritonbackend.h) are missing beside ${_tritonserver_sdk}")
  return()
endif()

if(NOT TARGET tritonserver::backend_sdk)
  add_library(tritonserver::backend_sdk INTERFACE IMPORTED GLOBAL)
  set_target_properties(tritonserver::backend_sdk PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${TRITONSERVER_INCLUDE_DIRS}"
    INTERFACE_COMPILE_FEATURES cxx_std_17
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
endif()

set_property(GLOBAL PROPERTY TRITONSERVER_BACKEND_VERSION_SCRIPT
             "${CMAKE_CURRENT_LIST_DIR}/backend.map")

# The link-time stand-in for the core: SONAME libtritonserver.so, no symbols,
# never installed or loaded. One per build tree.
function(_tritonserver_core_stub out_target)
  set(${out_target} tritonserver_core_stub PARENT_SCOPE)
  if(TARGET tritonserver_core_stub)
    return()
  endif()
  set(dir "${CMAKE_BINARY_DIR}/_tritonserver_core_stub")
  file(CONFIGURE OUTPUT "${dir}/tritonserver_stub.cc"
       CONTENT "// Link-time stand-in for libtritonserver.so; never loaded.\n")
  add_library(tritonserver_core_stub SHARED "${dir}/tritonserver_stub.cc")
  set_target_properties(tritonserver_core_stub PROPERTIES
    OUTPUT_NAME tritonserver
    LIBRARY_OUTPUT_DIRECTORY "${dir}$<0:>"
    EXCLUDE_FROM_ALL ON)
endfunction()

function(tritonserver_add_backend name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "OUTPUT_DIRECTORY;INSTALL_DIRECTORY" "SOURCES")
  set(sources ${ARG_SOURCES} ${ARG_UNPARSED_ARGUMENTS})
  if(NOT name MATCHES "^[A-Za-z0-9_.-]+$")
    message(FATAL_ERROR "tritonserver_add_backend: '${name}' is not a valid backend name")
  endif()
  if(NOT sources)
    message(FATAL_ERROR "tritonserver_add_backend(${name}): no source files given")
  endif()
  if(NOT ARG_OUTPUT_DIRECTORY)
    set(ARG_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/backends")
  endif()
  if(NOT ARG_INSTALL_DIRECTORY)
    set(ARG_INSTALL_DIRECTORY backends)
  endif()
  get_property(version_script GLOBAL PROPERTY TRITONSERVER_BACKEND_VERSION_SCRIPT)
  _tritonserver_core_stub(stub)

  set(target triton_${name})
  add_library(${target} SHARED ${sources})
  target_link_libraries(${target} PRIVATE tritonserver::backend_sdk ${stub})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME triton_${name}
    LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}/${name}$<0:>"
    CXX_EXTENSIONS OFF
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON
    BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "$ORIGIN"
    INSTALL_RPATH_USE_LINK_PATH OFF
    LINK_DEPENDS "${version_script}")
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${version_script}"
    "LINKER:--no-as-needed"
    "LINKER:--enable-new-dtags")
  install(TARGETS ${target} LIBRARY DESTINATION "${ARG_INSTALL_DIRECTORY}/${name}")
endfunction()
