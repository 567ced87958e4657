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
  m.def("from_dlpack", &FromDlpack, py::arg("capsule"),
        "Consume a 'dltensor' capsule: its description and a keeper that frees it.");
}

}  // namespace tritonpy
