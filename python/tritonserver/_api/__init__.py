"""NVIDIA's module paths, for programs written against NVIDIA's package.

NVIDIA's in-process package (triton-inference-server/core, python/tritonserver)
keeps its classes in ``tritonserver._api._<module>``, and programs written for
it name those paths: its OpenAI-compatible frontend annotates with
``tritonserver._api._response.InferenceResponse``. Each module here holds the
names NVIDIA's module of the same path defines, as aliases of this package's
own classes (the same objects as ``tritonserver.<Name>``). As in NVIDIA's
package, ``import tritonserver`` imports them all, since programs reach them
as attributes without importing them; nothing else in the package uses them.
Names NVIDIA's modules define that this package has no counterpart for are
left out.
"""

from tritonserver._api import (  # noqa: F401
    _dlpack,
    _logging,
    _memorybuffer,
    _model,
    _request,
    _response,
    _server,
    _tensor,
)
