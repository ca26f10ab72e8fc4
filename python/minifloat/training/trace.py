"""A torch model as the precision-assignment paper's model network (f_1, ..., f_n), by torch.fx.

`trace(model, example_input)` runs torch.fx's symbolic tracer and shape propagation once and
returns the operations that produce tensors, in execution order, each with its output's element
count at the example's batch size, the operations its inputs come from, and its parameters. That
list is what the C++ training graph (include/minifloat/training/graph.hpp) is built from; the
grouping, the assignments and every other policy stay in C++.

Rules (docs/torch-training.md states them with the ResNet-18 worked example):
- The network input is an operation of its own (the first group starts there).
- GEMMs are convolutions and linear layers (nn.Conv1d/2d/3d, nn.Linear, and the functional
  conv/linear calls).
- Operations that only re-view a tensor (nn.Identity, flatten, view, reshape, squeeze,
  unsqueeze, nn.Flatten, dropout in eval mode) produce no tensor of their own: they are aliases of
  their input, so the tensor is counted and rounded once.
- Branch merges (residual additions, concatenations) are operations with several inputs; the
  first input is the one grouping follows for the parameters of the merge (merges have none).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

GEMM_MODULES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
GEMM_FUNCTIONS = {torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d,
                  torch.nn.functional.linear, torch.matmul, torch.mm, torch.bmm, operator.matmul}
ALIAS_MODULES = (nn.Identity, nn.Flatten, nn.Dropout)
ALIAS_FUNCTIONS = {torch.flatten, torch.reshape, torch.squeeze, torch.unsqueeze, torch.nn.functional.dropout}
ALIAS_METHODS = {"view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous", "view_as", "reshape_as"}


@dataclass
class Operation:
    """One f_i: the fx node that produces its output Y, and where its inputs come from."""

    name: str                      # the fx node's name (module path with '.' kept for modules)
    node: fx.Node
    is_gemm: bool
    numel: int                     # elements of Y at the example's batch size
    inputs: list[int] = field(default_factory=list)  # indices of the operations feeding it
    parameters: list[tuple[str, nn.Parameter]] = field(default_factory=list)  # (qualified name, tensor)
    module: nn.Module | None = None


@dataclass
class TracedNetwork:
    graph_module: fx.GraphModule
    operations: list[Operation]
    # fx node -> index of the operation whose Y it is (aliases map to the operation they view)
    producer: dict[fx.Node, int]


class TraceError(ValueError):
    """The model cannot be described as the paper's network (the message says why)."""


def _tensor_inputs(node: fx.Node) -> list[fx.Node]:
    found: list[fx.Node] = []

    def visit(a):
        if isinstance(a, fx.Node):
            if a not in found:
                found.append(a)
        elif isinstance(a, (list, tuple)):
            for b in a:
                visit(b)
        elif isinstance(a, dict):
            for b in a.values():
                visit(b)

    visit(node.args)
    visit(node.kwargs)
    return found


def _is_alias(node: fx.Node, gm: fx.GraphModule) -> bool:
    if node.op == "call_module":
        m = gm.get_submodule(node.target)
        return isinstance(m, ALIAS_MODULES) and not (isinstance(m, nn.Dropout) and m.training and m.p > 0)
    if node.op == "call_function":
        return node.target in ALIAS_FUNCTIONS
    if node.op == "call_method":
        return node.target in ALIAS_METHODS
    return False


def _is_gemm(node: fx.Node, gm: fx.GraphModule) -> bool:
    if node.op == "call_module":
        return isinstance(gm.get_submodule(node.target), GEMM_MODULES)
    return node.op == "call_function" and node.target in GEMM_FUNCTIONS


def _numel(node: fx.Node) -> int:
    meta = node.meta.get("tensor_meta")
    if meta is None or not hasattr(meta, "shape"):
        raise TraceError(f"operation {node.name!r} does not produce a single tensor; "
                         "only single-tensor operations can carry a rounding site")
    n = 1
    for d in meta.shape:
        n *= int(d)
    return n


def trace(model: nn.Module, example_input: torch.Tensor) -> TracedNetwork:
    """The operations of `model` in execution order (see the module comment for the rules)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"trace() needs an nn.Module, not {type(model).__name__}")
    if not isinstance(example_input, torch.Tensor):
        raise TypeError(f"the example input must be a tensor, not {type(example_input).__name__}")
    try:
        gm = model if isinstance(model, fx.GraphModule) else fx.symbolic_trace(model)
    except Exception as e:  # fx raises many kinds of errors for untraceable code
        raise TraceError(f"torch.fx cannot trace {type(model).__name__}: {e}") from e
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != 1:  # before shape propagation, which would fail on its own terms
        raise TraceError(f"the model takes {len(placeholders)} inputs; the network needs exactly one")
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(example_input)
    except Exception as e:  # the model's own error on this input, from inside fx's interpreter
        raise TraceError(f"running {type(model).__name__} on the example input failed: {e}") from e

    ops: list[Operation] = []
    producer: dict[fx.Node, int] = {}
    owners: set[int] = set()  # modules whose parameters are already listed (a module called twice)
    for node in gm.graph.nodes:
        if node.op in ("output", "get_attr"):
            continue
        if node.op == "placeholder":
            producer[node] = len(ops)
            ops.append(Operation("input", node, False, _numel(node)))
            continue
        sources = [producer[a] for a in _tensor_inputs(node) if a in producer]
        if not sources:
            raise TraceError(f"operation {node.name!r} does not depend on the network input")
        if _is_alias(node, gm):
            producer[node] = sources[0]
            continue
        op = Operation(node.target if node.op == "call_module" else node.name, node, _is_gemm(node, gm),
                       _numel(node), sources)
        if node.op == "call_module":
            op.module = gm.get_submodule(node.target)
            if id(op.module) not in owners:
                owners.add(id(op.module))
                op.parameters = [(f"{node.target}.{pname}", p)
                                 for pname, p in op.module.named_parameters(recurse=False)]
        producer[node] = len(ops)
        ops.append(op)
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        # A module called twice yields two operations: tell them apart by their fx node names.
        for op in ops:
            if names.count(op.name) > 1:
                op.name = op.node.name
    return TracedNetwork(gm, ops, producer)
