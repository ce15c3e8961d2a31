"""Canonical ONNX files: written once per (network, size, seed), read back checked.

The weights live beside the .onnx file as ONNX external data (one .onnx.data
file), because FCN-5 alone holds about 470 MB of float32 weights. Files are
cached outside the repository, in $XFBENCH_CACHE or ~/.cache/xfbench/onnx, under
a name that carries a digest of the network's geometry and of the graph format,
so a changed spec never reads a stale file.

Reading checks everything a stranger's file could get wrong before any value is
used: that it parses, that every external-data path stays inside the file's own
folder, that the data file really holds the bytes it promises, and that every
parameter of the spec is present with its shape. Each problem is one line in an
ExchangeError.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from xfbench.exchange.graph import build_graph
from xfbench.exchange.names import FORMAT, cache_dir, canonical_path, digest  # noqa: F401
from xfbench.models import Spec
from xfbench.models.spec import init_param

ALIGN = 4096  # external tensors start on page boundaries, so runtimes can map them


class ExchangeError(ValueError):
    """A model file that cannot be used; the message is one line for the user."""


def write_canonical(spec: Spec, seed: int, path: Path) -> Path:
    """Write spec's inference graph with the canonical initial weights of seed to path
    (weights in path + '.data'). Written in a temporary folder and moved into place,
    the .onnx last, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model, graph_params = build_graph(spec, None, "infer")
    expected = [(p.name, p.shape) for p in spec.params]
    if sorted(graph_params) != sorted(expected):
        raise RuntimeError(f"{spec.id}: the ONNX graph's parameters differ from the spec's")
    location = path.name + ".data"
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=path.parent))
    try:
        offset = 0
        with open(tmp / location, "wb") as data:
            for index, p in enumerate(spec.params):
                value = init_param(p, seed, index)
                offset = -(-offset // ALIGN) * ALIGN
                data.seek(offset)
                data.write(value.tobytes())
                tensor = TensorProto(name=p.name, data_type=TensorProto.FLOAT, dims=p.shape)
                tensor.data_location = TensorProto.EXTERNAL
                for key, v in (
                    ("location", location),
                    ("offset", offset),
                    ("length", value.nbytes),
                ):
                    tensor.external_data.add(key=key, value=str(v))
                model.graph.initializer.append(tensor)
                offset += value.nbytes
        onnx.save_model(model, tmp / path.name)
        os.replace(tmp / location, path.parent / location)
        os.replace(tmp / path.name, path)
    finally:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    return path


def canonical_file(spec: Spec, seed: int = 0) -> Path:
    """The cached canonical file of spec and seed, written first when missing."""
    path = canonical_path(spec, seed)
    if not path.exists():
        write_canonical(spec, seed, path)
    return path


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def load_structure(path: str | Path) -> onnx.ModelProto:
    """The model without its external data, or ExchangeError."""
    path = Path(path)
    if not path.is_file():
        raise ExchangeError(f"{path}: no such file")
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and friends: the file is not a model
        raise ExchangeError(
            f"{path}: not a readable ONNX model (truncated or corrupt): {_first_line(e)}"
        ) from None


def _external(tensor: TensorProto, path: Path) -> tuple[Path, int, int | None]:
    """Where an external tensor's bytes are, checked to stay in the model's folder."""
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    base = path.parent.resolve()
    target = (base / location).resolve()
    if not location or os.path.isabs(location) or not target.is_relative_to(base) or target == base:
        raise ExchangeError(
            f"{path}: tensor {tensor.name!r} points its external data at "
            f"{location!r}, outside the model's own folder; refusing to read it"
        )
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else None
    except ValueError:
        raise ExchangeError(
            f"{path}: tensor {tensor.name!r} has a malformed external-data offset or length"
        ) from None
    return target, offset, length


def _read_tensor(tensor: TensorProto, path: Path, shape: tuple[int, ...]) -> np.ndarray:
    if tensor.data_type != TensorProto.FLOAT:
        raise ExchangeError(
            f"{path}: {tensor.name} is not float32 ({TensorProto.DataType.Name(tensor.data_type)})"
        )
    if tuple(tensor.dims) != shape:
        raise ExchangeError(
            f"{path}: {tensor.name} has shape {tuple(tensor.dims)}, the spec says {shape}"
        )
    if tensor.data_location != TensorProto.EXTERNAL:
        try:
            return numpy_helper.to_array(tensor).astype(np.float32, copy=False)
        except Exception as e:
            raise ExchangeError(f"{path}: {tensor.name}: {_first_line(e)}") from None
    target, offset, length = _external(tensor, path)
    nbytes = int(np.prod(shape)) * 4
    if length is not None and length != nbytes:
        raise ExchangeError(
            f"{path}: {tensor.name} promises {length} bytes, its shape needs {nbytes}"
        )
    if not target.is_file() or target.stat().st_size < offset + nbytes:
        raise ExchangeError(
            f"{path}: the data file {target.name} is missing or too short for "
            f"{tensor.name} (truncated?)"
        )
    value = np.fromfile(target, dtype="<f4", count=int(np.prod(shape)), offset=offset)
    return value.reshape(shape).astype(np.float32, copy=False)


def read_weights(path: str | Path, spec: Spec) -> dict[str, np.ndarray]:
    """The canonical weights (name -> float32 array in canonical layout) held by an
    ONNX file, checked against spec: every parameter present, with its shape."""
    path = Path(path)
    model = load_structure(path)
    found = {t.name: t for t in model.graph.initializer}
    missing = [p.name for p in spec.params if p.name not in found]
    if missing:
        raise ExchangeError(
            f"{path}: not a {spec.id} ({spec.scale}) model: {len(missing)} of "
            f"its {len(spec.params)} parameters are missing, e.g. {missing[0]}"
        )
    return {p.name: _read_tensor(found[p.name], path, p.shape) for p in spec.params}


def canonical_weights(spec: Spec, seed: int = 0) -> dict[str, np.ndarray]:
    """The initial weights as read back from the canonical ONNX file."""
    return read_weights(canonical_file(spec, seed), spec)
