"""Each spec layer's time inside the running network, from PyTorch's profiler.

The network runs its own step unchanged (the cell's step: batch, loss, backward,
optimizer), once per profiled step. Forward hooks open and close a profiler range per
spec layer (the top-level layers, a residual or transformer block as one); the backward
of a layer is the autograd nodes its forward ops created, matched to them by autograd's
sequence number (each op records the counter at its start, and a node it creates takes
that number). A number recorded in two layers' ranges (an op that created no node records
the next node's number) belongs to the later one, where that node was made.

On the CPU a layer's time is its range's own CPU time (nested layer ranges taken out) and
its backward nodes' CPU time; on a GPU it is the device time of the kernels they launched
(the profiler's CUDA activity), so no synchronisation is added between layers. What is not
in any layer (the loss, the optimizer, gradient accumulation, the framework's own work) is
the row "(outside layers)", so that the rows add up to the profiled step.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn
from torch.autograd import DeviceType
from torch.autograd.profiler import record_function

PREFIX = "xfbench.layer:"
OUTSIDE = "(outside layers)"


def layer_modules(spec, net: nn.Module) -> list[tuple[str, nn.Module]]:
    """(spec layer name, the module that computes it) for every top-level spec layer."""
    from xfbench.adapters.torch.networks import SpecNet

    if isinstance(net, SpecNet):  # one child per spec layer, in order
        return [(layer.name, child) for (layer, _), child in zip(spec.shapes, net.children())]
    return [(layer.name, net.get_submodule(layer.name)) for layer, _ in spec.shapes]


def _hooks(modules: list[tuple[str, nn.Module]]):
    """A profiler range per layer, named by its position (names repeat: AlexNet's relu)."""
    open_ranges: dict[int, list] = {}
    handles = []
    for i, (_, module) in enumerate(modules):

        def enter(_module, _inputs, i=i):
            r = record_function(f"{PREFIX}{i}")
            r.__enter__()
            open_ranges.setdefault(i, []).append(r)

        def leave(_module, _inputs, _output, i=i):
            open_ranges[i].pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    return handles


def _layer_of(event) -> int | None:
    """The innermost layer range an event runs in (None: outside every layer)."""
    e = event
    while e is not None:
        if e.name.startswith(PREFIX):
            return int(e.name[len(PREFIX) :])
        e = e.cpu_parent
    return None


def _one_step(step, layers: int, on_gpu: bool) -> list[tuple[float, float]]:
    """(forward s, backward s) of each layer in one profiled step, then the rest."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if on_gpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        t0 = time.perf_counter()
        step()
        wall = time.perf_counter() - t0
    # The host's events: each GPU kernel (and each range's copy on the GPU timeline) is
    # also an event of its own, whose time its launching host event already carries.
    events = [e for e in prof.events() if e.device_type == DeviceType.CPU and not e.is_async]

    def own(e) -> float:  # microseconds
        return e.self_device_time_total if on_gpu else e.self_cpu_time_total

    forward = [0.0] * layers
    backward = [0.0] * layers
    owner: dict[int, int] = {}  # sequence number -> the last layer it was recorded in
    for e in events:
        layer = _layer_of(e)
        if layer is None:
            continue
        # Every event's own time, the range's included on the CPU (the hooks' Python)
        forward[layer] += own(e)
        if e.sequence_nr >= 0:
            owner[e.sequence_nr] = max(layer, owner.get(e.sequence_nr, layer))
    device_total = 0.0
    for e in events:
        if e.cpu_parent is None:
            device_total += e.device_time_total
        is_node = e.name.startswith("autograd::engine::evaluate_function")
        if is_node and e.sequence_nr in owner:
            backward[owner[e.sequence_nr]] += e.device_time_total if on_gpu else e.cpu_time_total
    out = [(f / 1e6, b / 1e6) for f, b in zip(forward, backward)]
    in_layers = sum(f + b for f, b in out)
    # The rest of the step: on the CPU its wall time, on a GPU every kernel's time.
    rest = (device_total / 1e6 if on_gpu else wall) - in_layers
    return [*out, (max(rest, 0.0), 0.0)]


def measure(work, steps: int) -> list[dict]:
    """Per layer, the median over `steps` profiled steps of its forward and backward
    seconds (see the module's docstring); the workload's own step, after its warm-up."""
    modules = layer_modules(work.spec, work.net)
    handles = _hooks(modules)
    on_gpu = work.device.type == "cuda"
    try:
        runs = [_one_step(work.step, len(modules), on_gpu) for _ in range(steps)]
    finally:
        for h in handles:
            h.remove()
    training = work.cell.task == "train"
    names = [name for name, _ in modules] + [OUTSIDE]
    return [
        {
            "layer": name,
            "forward_s": statistics.median(r[i][0] for r in runs),
            "backward_s": statistics.median(r[i][1] for r in runs) if training else None,
        }
        for i, name in enumerate(names)
    ]
