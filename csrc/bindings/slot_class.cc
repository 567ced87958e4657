#include "bindings/slot_class.h"

#include <structmember.h>

#include <string>
#include <utility>

namespace py = pybind11;

namespace tritonpy {

SlotClass Slotted(py::object cls, std::initializer_list<const char*> fields) {
  if (!PyType_Check(cls.ptr())) throw py::type_error("expected a class");
  SlotClass c;
  c.type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  c.cls = std::move(cls);
  for (const char* name : fields) {
    py::object slot = py::getattr(c.cls, name, py::none());
    PyMemberDef* member = nullptr;
    if (Py_TYPE(slot.ptr()) == &PyMemberDescr_Type && PyDescr_TYPE(slot.ptr()) == c.type) {
      member = reinterpret_cast<PyMemberDescrObject*>(slot.ptr())->d_member;
    }
    if (member == nullptr || member->type != T_OBJECT_EX || (member->flags & READONLY) != 0 ||
        c.type->tp_itemsize != 0) {
      throw py::type_error(std::string(c.type->tp_name) + "." + name +
                           " must be a writable slot of the class (tritonserver._slots)");
    }
    c.offsets.push_back(member->offset);
  }
  return c;
}

}  // namespace tritonpy
