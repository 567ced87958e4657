// Parameters (of requests, responses and model loads): one value type, and
// its conversions from Python, to Python and from what the core hands over.
// Each core object has its own setters; their callers std::visit a value.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/typing.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pyinterop/errors.h"

namespace pyinterop {

// Raw bytes: only model-load parameters take them (file contents).
struct ParameterBytes {
  std::string data;
};

using ParameterValue = std::variant<bool, int64_t, double, std::string, ParameterBytes>;
using Parameters = std::vector<std::pair<std::string, ParameterValue>>;

// Their Python type, for the signatures of bound functions.
using PyParameters = pybind11::typing::Dict<
    pybind11::str,
    pybind11::typing::Union<pybind11::str, pybind11::int_, pybind11::bool_, pybind11::float_>>;

// What a kind of parameter may hold: request and response parameters are
// bool, int, float or str; model-load parameters bool, int, str or bytes.
enum class ParameterUse { kRequest, kLoad };

// A Python value as a parameter; anything `use` does not allow raises
// InvalidArgumentError naming the parameter.
inline ParameterValue ParameterFromPython(pybind11::handle value, const std::string& name,
                                          ParameterUse use) {
  const bool load = use == ParameterUse::kLoad;
  PyObject* v = value.ptr();
  if (PyBool_Check(v)) return v == Py_True;
  if (PyLong_Check(v)) {
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0) {
      throw Error::InvalidArgument("parameter '" + name + "' does not fit in 64 bits");
    }
    return static_cast<int64_t>(n);
  }
  if (!load && PyFloat_Check(v)) return PyFloat_AS_DOUBLE(v);
  if (PyUnicode_Check(v)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(v, &size);
    if (text == nullptr) {
      PyErr_Clear();
      throw Error::InvalidArgument("parameter '" + name + "' is not valid text");
    }
    return std::string(text, static_cast<size_t>(size));
  }
  if (load && PyBytes_Check(v)) {
    return ParameterBytes{
        std::string(PyBytes_AS_STRING(v), static_cast<size_t>(PyBytes_GET_SIZE(v)))};
  }
  throw Error::InvalidArgument("parameter '" + name + "' must be str, int, bool or " +
                               (load ? "bytes" : "float") + ", not " + Py_TYPE(v)->tp_name);
}

// A dict of parameters (None: none). Names must be str.
inline Parameters ParametersFromPython(pybind11::handle mapping, ParameterUse use) {
  Parameters out;
  if (mapping.is_none()) return out;
  if (!PyDict_Check(mapping.ptr())) {
    throw Error::InvalidArgument(std::string("parameters must be a dict, not ") +
                                 Py_TYPE(mapping.ptr())->tp_name);
  }
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(mapping.ptr(), &pos, &key, &value)) {
    if (!PyUnicode_Check(key)) {
      throw Error::InvalidArgument(std::string("parameter names must be str, not ") +
                                   Py_TYPE(key)->tp_name);
    }
    Py_ssize_t size = 0;
    const char* name = PyUnicode_AsUTF8AndSize(key, &size);
    if (name == nullptr) {
      PyErr_Clear();
      throw Error::InvalidArgument("a parameter name is not valid text");
    }
    std::string text(name, static_cast<size_t>(size));
    ParameterValue parsed = ParameterFromPython(value, text, use);
    out.emplace_back(std::move(text), std::move(parsed));
  }
  return out;
}

inline pybind11::object ParameterToPython(const ParameterValue& value) {
  return std::visit(
      [](const auto& v) -> pybind11::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ParameterBytes>) {
          return pybind11::bytes(v.data);
        } else {
          return pybind11::cast(v);
        }
      },
      value);
}

inline PyParameters ParametersToPython(const Parameters& parameters) {
  pybind11::dict out;
  for (const auto& [name, value] : parameters) {
    out[pybind11::str(name)] = ParameterToPython(value);
  }
  return out;
}

// A parameter as the core hands it over (its type and a pointer to its
// value); BYTES parameters, which carry no size here, are left out.
inline std::optional<ParameterValue> ReadParameter(TRITONSERVER_ParameterType type,
                                                   const void* value) {
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING:
      return std::string(static_cast<const char*>(value));
    case TRITONSERVER_PARAMETER_INT:
      return *static_cast<const int64_t*>(value);
    case TRITONSERVER_PARAMETER_BOOL:
      return *static_cast<const bool*>(value);
    case TRITONSERVER_PARAMETER_DOUBLE:
      return *static_cast<const double*>(value);
    default:
      return std::nullopt;
  }
}

}  // namespace pyinterop
