"""The hot path of Model.infer(inputs=...) and the responses the binding
builds: the same objects, fields and behaviour as the general path gives."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import sys
import weakref
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

import tritonserver
from tritonserver import InferenceResponse, MemoryBuffer, Tensor
from tritonserver._c import triton_bindings
from conftest import stats_when


def inference_count(model, expected: Optional[int] = None) -> int:
    """The core's success count; with `expected`, read once it got there or
    waited long enough (a backend reports statistics just after the final
    response: conftest.stats_when)."""
    if expected is not None:
        stats_when(model, lambda st: st["inference_stats"]["success"]["count"] >= expected)
    stats = model.statistics()["model_stats"]
    return sum(int(s["inference_stats"]["success"]["count"]) for s in stats)


def field_names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def fields_are_set(obj) -> bool:
    """Every field of `obj` (a slotted dataclass) holds a value, and nothing
    else was set on it."""
    for name in field_names(type(obj)):
        getattr(obj, name)  # AttributeError if the binding left it empty
    return vars(obj) == {}


def test_a_response_is_made_of_the_public_classes_with_their_fields_in_order(server):
    x = np.arange(16, dtype=np.float32)
    response = next(server.model("identity_fp32").infer(inputs={"INPUT0": x}))
    assert type(response) is InferenceResponse and response.final and response.error is None
    assert fields_are_set(response)
    tensor = response.outputs["OUTPUT0"]
    assert type(tensor) is Tensor and fields_are_set(tensor)
    assert type(tensor.memory_buffer) is MemoryBuffer and fields_are_set(tensor.memory_buffer)
    assert tensor.data_type is tritonserver.DataType.FP32
    assert tensor.memory_type is tritonserver.MemoryType.CPU
    assert tensor.shape == (16,) and tensor.size == 64 and tensor.memory_type_id == 0
    assert response.parameters == {} and response.classification_label is None
    assert response.request_id is None and response.model.name == "identity_fp32"
    np.testing.assert_array_equal(np.from_dlpack(tensor), x)
    # Dataclass behaviour holds: equality, replace, repr.
    assert dataclasses.replace(response) == response
    assert "InferenceResponse(" in repr(response)


def test_the_fast_path_and_the_general_path_give_equal_responses(server):
    model = server.model("identity_fp32")
    x = np.arange(16, dtype=np.float32)
    fast = next(model.infer(inputs={"INPUT0": x}))
    general = next(model.infer(model.create_request(inputs={"INPUT0": x})))
    assert fields_are_set(fast) and fields_are_set(general)
    assert fast.outputs.keys() == general.outputs.keys()
    a, b = fast.outputs["OUTPUT0"], general.outputs["OUTPUT0"]
    assert (a.data_type, tuple(a.shape), a.size) == (b.data_type, tuple(b.shape), b.size)
    np.testing.assert_array_equal(np.from_dlpack(a), np.from_dlpack(b))


def test_send_arrays_sends_nothing_when_an_input_is_not_an_array(server):
    model = server.model("identity_fp32")
    before = inference_count(model)
    handle = server._handle()
    assert triton_bindings.InferenceRequest.send_arrays(
        handle, "identity_fp32", -1, {"INPUT0": [1.0, 2.0]}) is None
    assert triton_bindings.InferenceRequest.send_arrays(
        handle, "identity_fp32", -1, {"INPUT0": np.zeros(4, np.float32)[::2]}) is None
    assert inference_count(model) == before
    # Model.infer takes the general path for them, and they still work.
    out = next(model.infer(inputs={"INPUT0": [1.0, 2.0]}))
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), [1.0, 2.0])
    strided = np.arange(8, dtype=np.float32)[::2]
    out = next(model.infer(inputs={"INPUT0": strided}))
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), strided)
    assert inference_count(model, before + 2) == before + 2


def test_errors_on_the_fast_path_are_the_general_paths(server):
    model = server.model("identity_fp32")
    with pytest.raises(tritonserver.InvalidArgumentError, match="unexpected shape"):
        model.infer(inputs={"INPUT0": np.zeros((2, 2), np.float32)})
    with pytest.raises(tritonserver.InvalidArgumentError):
        model.infer(inputs={"WRONG": np.zeros(4, np.float32)})
    with pytest.raises(tritonserver.NotFoundError):
        server.model("no_such_model").infer(inputs={"INPUT0": np.zeros(4, np.float32)})
    # The server still serves.
    assert next(model.infer(inputs={"INPUT0": np.ones(4, np.float32)})).final


def test_an_output_outlives_its_response_and_frees_with_its_last_view(server):
    x = np.arange(1 << 20, dtype=np.float32)  # a pooled (large) output
    response = next(server.model("identity_fp32").infer(inputs={"INPUT0": x}))
    array = np.from_dlpack(response.outputs["OUTPUT0"])
    owner = weakref.ref(response)
    del response
    gc.collect()
    assert owner() is None
    np.testing.assert_array_equal(array, x)  # the view keeps the buffer


def test_model_infer_is_the_bindings_method_with_the_documented_signature():
    import inspect

    assert type(tritonserver.Model.infer).__name__ == "method_descriptor"
    params = inspect.signature(tritonserver.Model.infer).parameters
    assert list(params) == ["self", "inference_request", "raise_on_error", "kwargs"]
    assert params["inference_request"].default is None
    assert params["raise_on_error"].default is True
    assert params["kwargs"].kind is inspect.Parameter.VAR_KEYWORD


def test_model_infer_hands_every_other_call_to_the_python_method(server):
    model = server.model("identity_fp32")
    x = np.arange(4, dtype=np.float32)
    before = inference_count(model)
    # A request object, positionally and by name; raise_on_error beside inputs.
    assert next(model.infer(model.create_request(inputs={"INPUT0": x}))).final
    assert next(model.infer(inference_request=model.create_request(inputs={"INPUT0": x}))).final
    assert next(model.infer(inputs={"INPUT0": x}, raise_on_error=False)).final
    # Inputs that are not all such arrays: sent once, by the general path.
    out = next(model.infer(inputs={"INPUT0": [1.0, 2.0]}))
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), [1.0, 2.0])
    assert inference_count(model, before + 4) == before + 4
    with pytest.raises(TypeError, match="bogus"):
        model.infer(inputs={"INPUT0": x}, bogus=1)
    # A server that is not started: the Python method's error.
    idle = tritonserver.Server(model_repository=tritonserver.example_model_repository())
    with pytest.raises(tritonserver.InvalidArgumentError, match="not started"):
        tritonserver.Model(idle, "identity_fp32").infer(inputs={"INPUT0": x})
    # A subclass's own infer wins; the base's is still the binding's.

    class Counting(tritonserver.Model):
        calls = 0

        def infer(self, *args, **kwargs):
            Counting.calls += 1
            return super().infer(*args, **kwargs)

    counted = Counting(server, "identity_fp32")
    assert next(counted.infer(inputs={"INPUT0": x})).final and Counting.calls == 1


def test_async_infer_takes_the_fast_path_and_needs_a_running_loop(server):
    model = server.model("identity_fp32")
    x = np.arange(16, dtype=np.float32)
    before = inference_count(model)
    with pytest.raises(RuntimeError):
        model.async_infer(inputs={"INPUT0": x})  # no running loop: nothing sent
    assert inference_count(model) == before

    async def run():
        outs = []
        async for response in model.async_infer(inputs={"INPUT0": x}):
            outs.append(response)
        return outs

    outs = asyncio.run(run())
    assert len(outs) == 1 and outs[0].final
    assert fields_are_set(outs[0])
    np.testing.assert_array_equal(np.from_dlpack(outs[0].outputs["OUTPUT0"]), x)
    assert inference_count(model, before + 1) == before + 1


def test_a_changed_default_allocator_leaves_the_fast_path(server):
    model = server.model("identity_fp32")
    x = np.arange(16, dtype=np.float32)
    calls = []

    class Counting(tritonserver.MemoryAllocator):
        def allocate(self, size, memory_type, memory_type_id):
            calls.append(size)
            return tritonserver.MemoryBuffer.from_dlpack(np.empty(size, np.uint8))

    saved = dict(tritonserver.default_memory_allocators)
    tritonserver.default_memory_allocators[tritonserver.MemoryType.CPU] = Counting()
    try:
        out = next(model.infer(inputs={"INPUT0": x}))
    finally:
        tritonserver.default_memory_allocators.clear()
        tritonserver.default_memory_allocators.update(saved)
    assert calls == [x.nbytes]
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), x)


BAD_INPUTS = {
    "object array": {"INPUT0": np.array(["a"], dtype=object)},
    "int name": {1: np.zeros(4, np.float32)},
    "wrong dtype": {"INPUT0": np.zeros(4, np.float64)},
    "0-d array": {"INPUT0": np.array(1.0, np.float32)},
    "text for FP32": {"INPUT0": "text"},
    "an extra input": {"INPUT0": np.zeros(4, np.float32), "X": np.zeros(4, np.float32)},
    "no inputs": {},
    "a list of arrays": [np.zeros(4, np.float32)],
    "2-d for [-1]": {"INPUT0": np.zeros((2, 2), np.float32)},
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_inputs_raise_triton_errors_and_the_server_serves_on(server, name):
    model = server.model("identity_fp32")
    with pytest.raises(tritonserver.InvalidArgumentError):
        for _ in model.infer(inputs=BAD_INPUTS[name]):
            pass
    x = np.arange(4, dtype=np.float32)
    out = next(model.infer(inputs={"INPUT0": x}))
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), x)


# ---- The binding's InferenceRequest: a plain CPython type ------------------------------


def test_the_binding_request_checks_its_arguments_with_type_errors(server):
    handle, request_type = server._handle(), triton_bindings.InferenceRequest
    x = {"INPUT0": np.zeros(4, np.float32)}
    bad_calls = {
        "a str for the server": lambda: request_type("not a server", "identity_fp32"),
        "an int for the model": lambda: request_type(handle, 5),
        "no model": lambda: request_type(handle),
        "send_arrays, 3 arguments": lambda: request_type.send_arrays(handle, "identity_fp32", -1),
        "send_arrays, a list for the inputs": lambda: request_type.send_arrays(
            handle, "identity_fp32", -1, list(x.values())),
        "send_arrays, a str for the version": lambda: request_type.send_arrays(
            handle, "identity_fp32", "1", x),
        "send_arrays, bytes for the model": lambda: request_type.send_arrays(
            handle, b"identity_fp32", -1, x),
        "a pybind11 method on another object": lambda: request_type.set_id(object(), "id"),
    }
    for name, call in bad_calls.items():
        with pytest.raises(TypeError):
            call()
            pytest.fail(name)
    request = request_type(handle, "identity_fp32")
    with pytest.raises(TypeError):
        request.pop_response()
    with pytest.raises(TypeError):
        request.try_pop_response(None, None, None)
    with pytest.raises(TypeError):
        request.pop_response(None, None, "not a number")
    with pytest.raises(TypeError):
        class Sub(request_type):  # final, as its stub says
            pass


def test_the_binding_request_raises_the_cores_errors_as_triton_errors(server):
    request_type = triton_bindings.InferenceRequest
    with pytest.raises(tritonserver.NotFoundError, match="unknown model"):
        request_type.send_arrays(server._handle(), "no_such_model", -1,
                                 {"INPUT0": np.zeros(4, np.float32)})
    with pytest.raises(tritonserver.InvalidArgumentError, match="missing required input"):
        request_type(server._handle(), "identity_fp32").send()  # the core refuses it
    request = request_type.send_arrays(server._handle(), "identity_fp32", -1,
                                       {"INPUT0": np.zeros(4, np.float32)})
    with pytest.raises(tritonserver.InvalidArgumentError, match="after it was sent"):
        request.send()  # sent once only
    with pytest.raises(tritonserver.InvalidArgumentError, match="after it was sent"):
        request.set_id("late")
    assert request.pop_response(server.model("identity_fp32"), None).final


def test_the_binding_request_is_released_when_dropped_and_cancels_when_unfinished(server):
    request_type = triton_bindings.InferenceRequest
    model = server.model("identity_fp32")
    request = request_type.send_arrays(server._handle(), "identity_fp32", -1,
                                       {"INPUT0": np.arange(4, dtype=np.float32)})
    dead = weakref.ref(request)
    response = request.pop_response(model, "my-id")
    assert response.final and response.request_id == "my-id"
    assert request.try_pop_response(model, None) is None
    assert request.pop_response(model, None, 0.01) is None  # a timeout gives None
    del request
    assert dead() is None  # reference counting alone: no cycle
    np.testing.assert_array_equal(np.from_dlpack(response.outputs["OUTPUT0"]), np.arange(4))
    # Dropped unread: the request goes, its response with it, and the server serves on.
    for _ in range(100):
        request_type.send_arrays(server._handle(), "identity_fp32", -1,
                                 {"INPUT0": np.zeros(4, np.float32)})
    assert next(model.infer(inputs={"INPUT0": np.ones(4, np.float32)})).final


def test_response_objects_keep_fields_in_slots_and_still_take_other_attributes(server):
    response = next(server.model("identity_fp32").infer(inputs={"INPUT0": np.zeros(4, np.float32)}))
    tensor = response.outputs["OUTPUT0"]
    for obj in (response, tensor, tensor.memory_buffer):
        assert {f.name for f in dataclasses.fields(obj)} <= set(type(obj).__slots__)
        obj.note = "mine"  # as on any dataclass's instances
        assert vars(obj) == {"note": "mine"}
        assert weakref.ref(obj)() is obj
    # Made by the user, the classes behave as the same dataclasses.
    made = Tensor(tritonserver.DataType.FP32, (4,), tensor.memory_buffer)
    assert made == dataclasses.replace(tensor, shape=(4,))


def test_the_binding_refuses_response_classes_without_slots(server):
    @dataclasses.dataclass
    class Plain:
        model: object
        request_id: object = None
        parameters: object = None
        outputs: object = None
        error: object = None
        classification_label: object = None
        final: bool = False

    with pytest.raises(TypeError, match="must be a writable slot"):
        triton_bindings.set_response_classes(Plain, Tensor, MemoryBuffer, {}, {},
                                             InferenceResponse._from_record)
    # The registered classes stay as they were.
    response = next(server.model("identity_fp32").infer(inputs={"INPUT0": np.zeros(4, np.float32)}))
    assert type(response) is InferenceResponse


def test_the_iterators_c_state_checks_its_use(server):
    model = server.model("identity_fp32")
    empty = tritonserver.ResponseIterator.__new__(tritonserver.ResponseIterator)
    with pytest.raises(RuntimeError, match="not set up"):
        next(empty)
    empty.cancel()  # nothing to cancel: no error
    with pytest.raises(AttributeError):
        empty._request
    with pytest.raises(TypeError):
        tritonserver.ResponseIterator._sent(model, None)
    with pytest.raises(TypeError):
        empty._setup(model, None, None, True)
    with pytest.raises(AttributeError):
        empty._complete = True  # read-only from Python
    wrong = tritonserver.ResponseIterator._sent(model, object(), True)
    with pytest.raises(TypeError, match="expected an InferenceRequest"):
        next(wrong)
    assert not hasattr(tritonserver.AsyncResponseIterator, "__next__")


def test_an_iterator_in_a_reference_cycle_is_collected(server):
    import queue

    model = server.model("identity_fp32")
    user_queue: queue.SimpleQueue = queue.SimpleQueue()
    iterator = model.infer(inputs={"INPUT0": np.zeros(4, np.float32)}, response_queue=user_queue)
    assert next(iterator).final and user_queue.get(timeout=10).final
    user_queue.put(iterator)  # iterator -> its forwarder -> the queue -> iterator
    dead = weakref.ref(iterator)
    del iterator, user_queue
    gc.collect()
    assert dead() is None


def test_raise_on_error_raises_the_responses_error_and_takes_it_from_the_response(server):
    # The iterator's delivery (in C), given a response carrying an error.
    model = server.model("identity_fp32")
    response = next(model.infer(inputs={"INPUT0": np.zeros(4, np.float32)}))
    response.error = tritonserver.InternalError("from the model")
    iterator = tritonserver.ResponseIterator._sent(model, object(), True)
    with pytest.raises(tritonserver.InternalError, match="from the model"):
        iterator._deliver(response)
    assert response.error is None and iterator._complete  # final: the end is noted
    lenient = tritonserver.ResponseIterator._sent(model, object(), False)
    response.error = tritonserver.InternalError("again")
    assert lenient._deliver(response) is response and response.error is not None


# ---- The fast path is taken --------------------------------------------------------
# Model.infer(inputs=...), Model.async_infer(inputs=...) and send_inputs are the
# binding's: when their checks pass, no Python frame runs between the call and
# the returned iterator. A renamed attribute of tritonserver._submit.FAST_PATH_READS
# would make the checks fail quietly and send every call down the Python path:
# these tests see that as Python frames of the package being entered.


def package_frames(call) -> list[str]:
    """The package's Python functions entered while ``call()`` ran."""
    entered: list[str] = []
    root = str(Path(tritonserver.__file__).parent)

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(root):
            entered.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def test_model_infer_with_inputs_takes_the_fast_path(server):
    model = server.model("identity_fp32")
    x = np.arange(16, dtype=np.float32)
    next(model.infer(inputs={"INPUT0": x}))  # warm: nothing made on first use is counted
    held = []
    assert package_frames(lambda: held.append(model.infer(inputs={"INPUT0": x}))) == []
    np.testing.assert_array_equal(np.from_dlpack(next(held[0]).outputs["OUTPUT0"]), x)
    # A call it must not take runs the Python method: what the checks above would see.
    frames = package_frames(lambda: held.append(model.infer(inputs={"INPUT0": [1.0, 2.0]})))
    assert "_model.py:infer" in frames
    assert next(held[1]).final


def test_model_async_infer_with_inputs_takes_the_fast_path(server):
    model = server.model("identity_fp32")
    x = np.arange(16, dtype=np.float32)

    async def run():
        async for _ in model.async_infer(inputs={"INPUT0": x}):  # warm: the loop's notifier
            pass
        held = []
        frames = package_frames(lambda: held.append(model.async_infer(inputs={"INPUT0": x})))
        responses = [r async for r in held[0]]
        return frames, responses

    frames, responses = asyncio.run(run())
    assert frames == []
    assert len(responses) == 1 and responses[0].final
    np.testing.assert_array_equal(np.from_dlpack(responses[0].outputs["OUTPUT0"]), x)


def test_send_inputs_sends_when_the_checks_pass_and_declines_while_a_trace_may_sample(
        server, tmp_path):
    from tritonserver._submit import send_inputs

    model = server.model("identity_fp32")
    x = np.arange(4, dtype=np.float32)
    before = inference_count(model)
    held = [send_inputs(model, {"INPUT0": x})]  # held: a dropped request is cancelled
    assert isinstance(held[0], triton_bindings.InferenceRequest)
    assert package_frames(lambda: held.append(send_inputs(model, {"INPUT0": x}))) == []
    assert isinstance(held[1], triton_bindings.InferenceRequest)
    assert inference_count(model, before + 2) == before + 2
    # Tracing that may sample: declined (None, nothing sent), and Model.infer
    # goes to the Python path, which attaches the trace.
    server.configure_tracing(str(tmp_path / "trace.json"), ["TIMESTAMPS"], 1)
    try:
        assert send_inputs(model, {"INPUT0": x}) is None
        frames = package_frames(lambda: next(model.infer(inputs={"INPUT0": x})))
        assert "_model.py:infer" in frames and "_submit.py:submission" in frames
    finally:
        server.configure_tracing()
    assert package_frames(lambda: held.append(send_inputs(model, {"INPUT0": x}))) == []
    assert isinstance(held[-1], triton_bindings.InferenceRequest)
