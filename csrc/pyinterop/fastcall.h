// CPython's fast calling convention (METH_FASTCALL) for functions the binding
// defines outside pybind11, where a per-call cost of dispatch matters.
#pragma once

#include <Python.h>

#include <algorithm>
#include <vector>

namespace pyinterop {

using FastFunction = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t);
// METH_FASTCALL | METH_KEYWORDS: the keywords' names, a tuple, follow (or null).
using FastKeywordsFunction = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);

// A METH_FASTCALL function as the PyCFunction a PyMethodDef stores (CPython
// calls it through the right type by the flag); the cast goes through a plain
// function pointer so that compilers do not warn of a mismatched signature.
inline PyCFunction AsMethod(FastFunction f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}
inline PyCFunction AsMethod(FastKeywordsFunction f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

// Calls `f` (a Python function) with `self` first and then the arguments a
// METH_FASTCALL | METH_KEYWORDS method got: how a method of the binding
// hands a call it does not take to the Python method it stands in for.
inline PyObject* CallWithSelf(PyObject* f, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                              PyObject* kwnames) {
  const Py_ssize_t total = nargs + (kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames));
  std::vector<PyObject*> call(static_cast<size_t>(total) + 1);
  call[0] = self;
  std::copy(args, args + total, call.begin() + 1);
  return PyObject_Vectorcall(f, call.data(), static_cast<size_t>(nargs) + 1, kwnames);
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

// `def` as a method of `type` (a class): the method descriptor the caller sets
// on it in place of a Python method; null with the error set.
inline PyObject* MethodOf(PyObject* type, PyMethodDef* def) {
  if (!PyType_Check(type)) {
    PyErr_SetString(PyExc_TypeError, "expected a class");
    return nullptr;
  }
  return PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(type), def);
}

}  // namespace pyinterop
