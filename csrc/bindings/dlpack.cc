// DLPack capsules in both directions.
//
// Export: a "dltensor" capsule over memory that a Python object owns (a
// response, a numpy array...); the capsule keeps that owner alive until the
// consumer calls the deleter. Import: a capsule from any producer becomes a
// plain description plus a keeper object that calls the producer's deleter
// when it dies; the capsule is renamed "used_dltensor" as the protocol asks.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <utility>
#include <vector>

#include "bindings/slot_class.h"
#include "dlpack/dlpack.h"
#include "pyinterop/errors.h"
#include "pyinterop/fastcall.h"
#include "pyinterop/ref.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

struct ExportContext {
  DLManagedTensor managed{};
  std::vector<int64_t> shape;
  // Consumers may call the deleter from any thread, with or without the GIL.
  pyinterop::OwnedRef owner;
};

void DeleteExport(DLManagedTensor* self) { delete static_cast<ExportContext*>(self->manager_ctx); }

// Called when an unconsumed capsule is garbage collected.
void CapsuleDestructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsuleName)) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  }
}

py::capsule ToDlpack(uintptr_t data, std::vector<int64_t> shape, int code, int bits,
                     int device_type, int device_id, py::object owner) {
  auto* ctx = new ExportContext();
  ctx->shape = std::move(shape);
  ctx->owner = pyinterop::OwnedRef(std::move(owner));
  DLTensor& t = ctx->managed.dl_tensor;
  t.data = reinterpret_cast<void*>(data);
  t.device = DLDevice{static_cast<DLDeviceType>(device_type), device_id};
  t.ndim = static_cast<int32_t>(ctx->shape.size());
  t.dtype = DLDataType{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  t.shape = ctx->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = &DeleteExport;
  PyObject* capsule = PyCapsule_New(&ctx->managed, kCapsuleName, &CapsuleDestructor);
  if (capsule == nullptr) {
    DeleteExport(&ctx->managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

// to_dlpack(data_ptr, shape, code, bits, device_type, device_id, owner) with
// CPython's fast calling convention: called for every output a program
// reads through DLPack, where pybind11's argument casting costs as much as
// the export itself.
PyObject* ToDlpackFast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!pyinterop::ArgumentCount("to_dlpack", nargs, 7, 7)) return nullptr;
  const uintptr_t data = PyLong_AsSize_t(args[0]);
  if (data == static_cast<uintptr_t>(-1) && PyErr_Occurred()) return nullptr;
  const long code = PyLong_AsLong(args[2]);
  const long bits = PyLong_AsLong(args[3]);
  const long device_type = PyLong_AsLong(args[4]);
  const long device_id = PyLong_AsLong(args[5]);
  if (PyErr_Occurred()) return nullptr;
  try {
    auto shape = py::reinterpret_steal<py::object>(
        PySequence_Fast(args[1], "shape must be a sequence of ints"));
    if (!shape) throw py::error_already_set();
    std::vector<int64_t> dims(static_cast<size_t>(PySequence_Fast_GET_SIZE(shape.ptr())));
    for (size_t i = 0; i < dims.size(); ++i) {
      dims[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(shape.ptr(), i));
    }
    if (PyErr_Occurred()) throw py::error_already_set();
    return ToDlpack(data, std::move(dims), static_cast<int>(code), static_cast<int>(bits),
                    static_cast<int>(device_type), static_cast<int>(device_id),
                    py::reinterpret_borrow<py::object>(args[6]))
        .release()
        .ptr();
  } catch (...) {
    pyinterop::SetPythonErrorFromCurrent();
    return nullptr;
  }
}

PyMethodDef to_dlpack_def = {
    "to_dlpack", pyinterop::AsMethod(&ToDlpackFast), METH_FASTCALL,
    "to_dlpack(data_ptr, shape, code, bits, device_type, device_id, owner, /)\n--\n\n"
    "A 'dltensor' capsule over memory kept alive by `owner`."};

// ---- Tensor.__dlpack__ ------------------------------------------------------------
//
// tritonserver._tensor sets Tensor.__dlpack__ to a method of this binding
// (tensor_dlpack_method): every program reading an output through DLPack
// calls it, and its Python form costs as much as the export it asks for. It
// reads the tensor's slots and exports the memory in place; whatever it does
// not take as is (an argument it does not know, dl_device or copy asked for,
// a type DLPack lacks, a field that is not what the package puts there) goes
// to the Python method it replaced, which answers as the API documents.

struct TensorExport {
  SlotClass tensor;                // data_type, shape, memory_buffer
  SlotClass buffer;                // data_ptr, memory_type, memory_type_id, owner
  std::vector<DLDataType> dtypes;  // by DataType value; bits 0: no DLPack form
  std::vector<int> devices;        // by MemoryType value; -1: none
  py::object fallback;             // the Python method
  py::object dl_device, copy;      // interned keyword names
};

TensorExport* tensor_export = nullptr;  // kept for the process

// A table value (0..n) of an int field, or -1.
long SmallValue(PyObject* o, size_t n) {
  if (o == nullptr || !PyLong_Check(o)) return -1;
  const long v = PyLong_AsLong(o);
  if (v < 0 || static_cast<size_t>(v) >= n) {
    PyErr_Clear();
    return -1;
  }
  return v;
}

// The capsule of the tensor's memory, or null (no error set) to leave it
// to the Python method.
PyObject* ExportInPlace(const TensorExport& e, PyObject* tensor) {
  PyObject* buffer = SlotValue(e.tensor, tensor, 2);
  PyObject* shape = SlotValue(e.tensor, tensor, 1);
  const long data_type = SmallValue(SlotValue(e.tensor, tensor, 0), e.dtypes.size());
  if (buffer == nullptr || shape == nullptr || data_type < 0 || e.dtypes[data_type].bits == 0 ||
      !PyObject_TypeCheck(buffer, e.buffer.type)) {
    return nullptr;
  }
  const long memory_type = SmallValue(SlotValue(e.buffer, buffer, 1), e.devices.size());
  PyObject* data = SlotValue(e.buffer, buffer, 0);
  PyObject* id = SlotValue(e.buffer, buffer, 2);
  PyObject* owner = SlotValue(e.buffer, buffer, 3);
  if (memory_type < 0 || e.devices[memory_type] < 0 || data == nullptr || !PyLong_Check(data) ||
      id == nullptr || !PyLong_Check(id) || owner == nullptr ||
      !(PyTuple_CheckExact(shape) || PyList_CheckExact(shape))) {
    return nullptr;
  }
  const int device = e.devices[memory_type];
  const uintptr_t address = PyLong_AsSize_t(data);
  const long device_id = device == kDLCUDA ? PyLong_AsLong(id) : 0;
  std::vector<int64_t> dims(static_cast<size_t>(PySequence_Fast_GET_SIZE(shape)));
  for (size_t i = 0; i < dims.size() && !PyErr_Occurred(); ++i) {
    PyObject* dim = PySequence_Fast_GET_ITEM(shape, static_cast<Py_ssize_t>(i));
    if (!PyLong_Check(dim)) return nullptr;
    dims[i] = PyLong_AsLongLong(dim);
    if (dims[i] < 0) {
      PyErr_Clear();
      return nullptr;
    }
  }
  if (PyErr_Occurred()) {  // a value out of range: the Python method says what
    PyErr_Clear();
    return nullptr;
  }
  const DLDataType dtype = e.dtypes[data_type];
  return ToDlpack(address, std::move(dims), dtype.code, dtype.bits, device,
                  static_cast<int>(device_id), py::reinterpret_borrow<py::object>(owner))
      .release()
      .ptr();
}

// Whether the keywords ask for nothing but the export in place: stream and
// max_version (both read as the Python method reads them: not at all),
// dl_device None, copy None or False; no positional argument.
bool PlainExport(const TensorExport& e, PyObject* const* args, Py_ssize_t nargs,
                 PyObject* kwnames) {
  if (nargs != 0) return false;
  const Py_ssize_t n = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    PyObject* value = args[i];
    if (name == e.dl_device.ptr() || PyUnicode_Compare(name, e.dl_device.ptr()) == 0) {
      if (value != Py_None) return false;
    } else if (name == e.copy.ptr() || PyUnicode_Compare(name, e.copy.ptr()) == 0) {
      if (value != Py_None && value != Py_False) return false;
    } else if (PyUnicode_CompareWithASCIIString(name, "stream") != 0 &&
               PyUnicode_CompareWithASCIIString(name, "max_version") != 0) {
      return false;
    }
  }
  return true;
}

// Tensor.__dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None)
PyObject* TensorDlpack(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const TensorExport& e = *tensor_export;
  if (PlainExport(e, args, nargs, kwnames)) {
    try {
      PyObject* capsule = ExportInPlace(e, self);
      if (capsule != nullptr || PyErr_Occurred()) return capsule;
    } catch (...) {
      pyinterop::SetPythonErrorFromCurrent();
      return nullptr;
    }
  }
  return pyinterop::CallWithSelf(e.fallback.ptr(), self, args, nargs, kwnames);
}

PyMethodDef tensor_dlpack_def = {
    "__dlpack__", pyinterop::AsMethod(&TensorDlpack), METH_FASTCALL | METH_KEYWORDS,
    "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
    "A 'dltensor' capsule over the tensor's memory, in place (DLPack)."};

// tensor_dlpack_method(tensor, buffer, fallback, dtypes, devices): the method
// for Tensor (tensor) over MemoryBuffer (buffer).
py::object TensorDlpackMethod(py::object tensor, py::object buffer, py::object fallback,
                              const py::dict& dtypes, const py::dict& devices) {
  auto* e = new TensorExport{
      Slotted(std::move(tensor), {"data_type", "shape", "memory_buffer"}),
      Slotted(std::move(buffer), {"data_ptr", "memory_type", "memory_type_id", "owner"}),
      {},
      {},
      std::move(fallback),
      py::reinterpret_steal<py::object>(PyUnicode_InternFromString("dl_device")),
      py::reinterpret_steal<py::object>(PyUnicode_InternFromString("copy"))};
  for (auto [key, value] : dtypes) {
    const auto v = key.cast<size_t>();
    if (v >= 256) throw py::value_error("data type values must be in [0, 256)");
    if (v >= e->dtypes.size()) e->dtypes.resize(v + 1, DLDataType{0, 0, 1});
    auto pair = value.cast<std::pair<int, int>>();
    e->dtypes[v] =
        DLDataType{static_cast<uint8_t>(pair.first), static_cast<uint8_t>(pair.second), 1};
  }
  for (auto [key, value] : devices) {
    const auto v = key.cast<size_t>();
    if (v >= 256) throw py::value_error("memory type values must be in [0, 256)");
    if (v >= e->devices.size()) e->devices.resize(v + 1, -1);
    e->devices[v] = value.cast<int>();
  }
  auto method = py::reinterpret_steal<py::object>(
      pyinterop::MethodOf(e->tensor.cls.ptr(), &tensor_dlpack_def));
  if (!method) throw py::error_already_set();
  tensor_export = e;  // a later call (a reloaded module) replaces it; the old one stays
  return method;
}

// Owns an imported DLManagedTensor; its deleter runs when this object dies.
class DlpackKeeper {
 public:
  explicit DlpackKeeper(DLManagedTensor* managed) : managed_(managed) {}
  ~DlpackKeeper() {
    if (managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
  }
  DlpackKeeper(const DlpackKeeper&) = delete;
  DlpackKeeper& operator=(const DlpackKeeper&) = delete;

 private:
  DLManagedTensor* managed_;
};

py::dict FromDlpack(py::capsule capsule) {
  PyObject* raw = capsule.ptr();
  if (!PyCapsule_IsValid(raw, kCapsuleName)) {
    throw py::value_error(
        "expected an unused 'dltensor' DLPack capsule (a capsule can be consumed once)");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(raw, kCapsuleName));
  const DLTensor& t = managed->dl_tensor;
  py::list shape, strides;
  for (int32_t i = 0; i < t.ndim; ++i) shape.append(t.shape[i]);
  py::object py_strides = py::none();
  if (t.strides != nullptr) {
    for (int32_t i = 0; i < t.ndim; ++i) strides.append(t.strides[i]);
    py_strides = strides;
  }
  py::dict out;
  out["data_ptr"] = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  out["shape"] = py::tuple(shape);
  out["strides"] = py_strides;
  out["code"] = static_cast<int>(t.dtype.code);
  out["bits"] = static_cast<int>(t.dtype.bits);
  out["lanes"] = static_cast<int>(t.dtype.lanes);
  out["device_type"] = static_cast<int>(t.device.device_type);
  out["device_id"] = static_cast<int>(t.device.device_id);
  // Take ownership: rename first so the capsule destructor leaves it alone.
  if (PyCapsule_SetName(raw, kUsedCapsuleName) != 0) throw py::error_already_set();
  out["keeper"] = py::cast(std::make_shared<DlpackKeeper>(managed));
  return out;
}

}  // namespace

// The address of a buffer's data (the buffer protocol; no copy).
uintptr_t BufferAddress(py::handle object) {
  Py_buffer view;
  if (PyObject_GetBuffer(object.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  const auto address = reinterpret_cast<uintptr_t>(view.buf);
  PyBuffer_Release(&view);
  return address;
}

void RegisterDlpack(py::module_& m) {
  m.def("buffer_address", &BufferAddress, py::arg("buffer"),
        "The address of a contiguous buffer's data (the buffer protocol).");
  py::class_<DlpackKeeper, std::shared_ptr<DlpackKeeper>>(m, "DlpackKeeper");
  PyObject* to_dlpack = PyCFunction_NewEx(&to_dlpack_def, nullptr, m.attr("__name__").ptr());
  if (to_dlpack == nullptr) throw py::error_already_set();
  m.add_object("to_dlpack", py::reinterpret_steal<py::object>(to_dlpack));
  m.def("tensor_dlpack_method", &TensorDlpackMethod, py::arg("tensor"), py::arg("buffer"),
        py::arg("fallback"), py::arg("dtypes"), py::arg("devices"),
        "Tensor.__dlpack__ in C for `tensor` over `buffer` (slotted dataclasses): dtypes "
        "{DataType value: (DLPack code, bits)}, devices {MemoryType value: DLPack device}; "
        "`fallback` (the Python method) takes every call it does not export as is.");
  m.def("from_dlpack", &FromDlpack, py::arg("capsule"),
        "Consume a 'dltensor' capsule: its description and a keeper that frees it.");
}

}  // namespace tritonpy
