"""TorchScript models for the tests, scripted or traced from the modules
below into temporary repositories (no model files in the repository)."""

from __future__ import annotations

import os
import warnings
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn


# Triton config type -> torch dtype, for every type the backend serves.
TYPES = {
    "TYPE_BOOL": torch.bool, "TYPE_UINT8": torch.uint8, "TYPE_INT8": torch.int8,
    "TYPE_INT16": torch.int16, "TYPE_INT32": torch.int32, "TYPE_INT64": torch.int64,
    "TYPE_FP16": torch.float16, "TYPE_FP32": torch.float32, "TYPE_FP64": torch.float64,
}


class ConvNet(nn.Module):
    """[batch, 3, 32, 32] -> two 3x3 convs with ReLU, a residual add, global
    average pooling, a dense layer to 10 classes."""

    def __init__(self, seed: int = 3):
        super().__init__()
        torch.manual_seed(seed)
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.dense = nn.Linear(8, 10)

    def forward(self, image: Tensor) -> Tensor:
        r1 = torch.relu(self.conv1(image))
        r2 = torch.relu(self.conv2(r1) + r1)
        return self.dense(r2.mean(dim=(2, 3)))


class AddSub(nn.Module):
    """(a + b, a - b)."""

    def forward(self, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        return a + b, a - b


class DictInput(nn.Module):
    """x * 2 + y, both taken from one Dict[str, Tensor]."""

    def forward(self, inputs: Dict[str, Tensor]) -> Tensor:
        return inputs["x"] * 2 + inputs["y"]


class Words(nn.Module):
    """Each word upper-cased with '!' added, and the words' lengths."""

    def forward(self, words: List[str]) -> Tuple[List[str], Tensor]:
        shouted = [w.upper() + "!" for w in words]
        return shouted, torch.tensor([len(w) for w in words], dtype=torch.int64)


class Identities(nn.Module):
    """Each input back, one per data type (and a list of strings)."""

    def forward(self, IN_BOOL: Tensor, IN_UINT8: Tensor, IN_INT8: Tensor, IN_INT16: Tensor,
                IN_INT32: Tensor, IN_INT64: Tensor, IN_FP16: Tensor, IN_FP32: Tensor,
                IN_FP64: Tensor, IN_STRING: List[str]
                ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                           Tensor, List[str]]:
        return (IN_BOOL, IN_UINT8, IN_INT8, IN_INT16, IN_INT32, IN_INT64, IN_FP16, IN_FP32,
                IN_FP64, IN_STRING)


class Identity(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x


class Slow(nn.Module):
    """y = x @ w @ w ... (`rounds` products of [size, size]): a long run."""

    def __init__(self, size: int = 384, rounds: int = 150):
        super().__init__()
        self.rounds = rounds
        self.w = nn.Parameter(torch.full((size, size), 1.0 / size), requires_grad=False)

    def forward(self, x: Tensor) -> Tensor:
        for _ in range(self.rounds):
            x = x @ self.w
        return x


class Scale(nn.Module):
    """x * scale (a model whose versions differ by their scale)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: Tensor) -> Tensor:
        return x * self.scale


class DictOutput(nn.Module):
    def forward(self, x: Tensor) -> Dict[str, Tensor]:
        return {"y": x}


class TensorList(nn.Module):
    def forward(self, x: Tensor) -> List[Tensor]:
        return [x, x]


class Scalar(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sum()


class Failing(nn.Module):
    """Raises inside the TorchScript interpreter when x holds a negative value."""

    def forward(self, x: Tensor) -> Tensor:
        if bool((x < 0).any()):
            raise RuntimeError("negative input")
        return x


class TakesAnInt(nn.Module):
    def forward(self, x: Tensor, n: int) -> Tensor:
        return x * n


class TwoDicts(nn.Module):
    def forward(self, a: Dict[str, Tensor], b: Dict[str, Tensor]) -> Tensor:
        return a["x"] + b["x"]


class Gated(nn.Module):
    """A sequence model: y = x * start + x * 10 * ready (START__1, READY__2)."""

    def forward(self, x: Tensor, start: Tensor, ready: Tensor) -> Tensor:
        return x * start + x * 10 * ready


def script(module: nn.Module) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*torch\.jit")
        return torch.jit.script(module.eval())


def trace(module: nn.Module, *example: Tensor) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*torch\.jit")
        return torch.jit.trace(module.eval(), example)


def load(path: str) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*torch\.jit")
        return torch.jit.load(path, map_location="cpu")


def write(repo: str, name: str, module: Optional[torch.jit.ScriptModule],
          config: Optional[str] = None, version: int = 1, filename: str = "model.pt") -> str:
    """<repo>/<name>/<version>/<filename> (saved TorchScript), and
    config.pbtxt when given."""
    folder = os.path.join(repo, name, str(version))
    os.makedirs(folder, exist_ok=True)
    if module is not None:
        module.save(os.path.join(folder, filename))
    if config is not None:
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config)
    return os.path.join(repo, name)


class RunningSum(nn.Module):
    """(x + state, x + state): with implicit state, each sequence's sum."""

    def forward(self, x: Tensor, state: Tensor) -> Tuple[Tensor, Tensor]:
        total = x + state
        return total, total


def move_to_cuda_on_save(path: str) -> None:
    """Rewrites a saved TorchScript archive as if its tensors had been on
    cuda:0 when it was saved (their storage location in data.pkl): what a
    model exported on a GPU machine holds. This torch has no CUDA, so
    torch.jit.load without map_location refuses it."""
    import shutil
    import zipfile

    moved = path + ".cuda"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(moved, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename.endswith("/data.pkl"):  # pickle protocol 2: no frames to fix
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
            target.writestr(item, data)
    shutil.move(moved, path)
