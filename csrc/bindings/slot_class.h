// A slotted dataclass (tritonserver._slots.slotted) seen from C++: where each
// of its fields lives in an instance, so that the binding can read and write
// them without attribute lookups (response_objects.cc makes the objects of
// every response this way; dlpack.cc reads tensors it exports).
#pragma once

#include <pybind11/pybind11.h>

#include <initializer_list>
#include <vector>

namespace tritonpy {

struct SlotClass {
  PyTypeObject* type = nullptr;  // kept alive by `cls`
  pybind11::object cls;
  std::vector<Py_ssize_t> offsets;  // of the fields, in the order given
};

// `cls` with `fields`, each of which must be a writable object slot of the
// class itself; TypeError if not.
SlotClass Slotted(pybind11::object cls, std::initializer_list<const char*> fields);

// The value in field `index` of `o` (an instance of the class), borrowed;
// null when the slot is empty.
inline PyObject* SlotValue(const SlotClass& c, PyObject* o, size_t index) {
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + c.offsets[index]);
}

}  // namespace tritonpy
