// CPython's fast calling convention (METH_FASTCALL) for functions the binding
// defines outside pybind11, where a per-call cost of dispatch matters.
#pragma once

#include <Python.h>

namespace pyinterop {

using FastFunction = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t);

// A METH_FASTCALL function as the PyCFunction a PyMethodDef stores (CPython
// calls it through the right type by the flag); the cast goes through a plain
// function pointer so that compilers do not warn of a mismatched signature.
inline PyCFunction AsMethod(FastFunction f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

// Whether a fast call got `min` to `max` positional arguments; if not, a
// TypeError is set (the function's `name` in it).
inline bool ArgumentCount(const char* name, Py_ssize_t nargs, Py_ssize_t min, Py_ssize_t max) {
  if (nargs >= min && nargs <= max) return true;
  if (min == max) {
    PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, min, nargs);
  } else {
    PyErr_Format(PyExc_TypeError, "%s() takes %zd to %zd arguments (%zd given)", name, min, max,
                 nargs);
  }
  return false;
}

}  // namespace pyinterop
