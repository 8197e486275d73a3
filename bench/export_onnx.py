#!/usr/bin/python3
"""Exports nn.MultiheadAttention per workload of bench/workloads.json.

For each workload id writes bench/models/<id>.onnx (what onnxruntime runs) and
bench/models/<id>.safetensors (the same parameters, for mha and tfjs).

Model inputs: query [, key, value] (batch_first, B/L/S dynamic) and
key_padding_mask (bool, B x S) when the workload pads keys. A causal mask is
built inside the graph from L (Trilu), as a torch 1.13 user would pass
attn_mask; its `is_causal` argument does not exist yet.
Outputs: output [, weights (averaged over heads)].

Run with Debian's python3-torch: /usr/bin/python3 bench/export_onnx.py
"""
import json
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from safetensors_writer import write_safetensors  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
MODELS_DIR = os.path.join(BENCH_DIR, "models")


class BenchAttention(nn.Module):
    """nn.MultiheadAttention called the way one workload calls it."""

    def __init__(self, workload):
        super().__init__()
        self.cross = workload["cross"]
        self.causal = workload["causal"]
        self.padded = workload["kpmLengths"] is not None
        self.need_weights = workload["needWeights"]
        self.mha = nn.MultiheadAttention(workload["E"], workload["H"], bias=True, batch_first=True)

    def forward(self, query, *rest):
        rest = list(rest)
        key, value = (rest.pop(0), rest.pop(0)) if self.cross else (query, query)
        key_padding_mask = rest.pop(0) if self.padded else None
        attn_mask = None
        if self.causal:
            length = query.size(1)
            attn_mask = torch.ones(length, length, dtype=torch.bool).triu(1)
        output, weights = self.mha(query, key, value, key_padding_mask=key_padding_mask,
                                   attn_mask=attn_mask, need_weights=self.need_weights,
                                   average_attn_weights=True)
        return (output, weights) if self.need_weights else output


def example_inputs(workload):
    b, l, s, e = workload["B"], workload["L"], workload["S"], workload["E"]
    inputs = [torch.randn(b, l, e)]
    names = ["query"]
    if workload["cross"]:
        inputs += [torch.randn(b, s, e), torch.randn(b, s, e)]
        names += ["key", "value"]
    if workload["kpmLengths"] is not None:
        lengths = torch.tensor(workload["kpmLengths"])
        inputs.append(torch.arange(s)[None, :] >= lengths[:, None])
        names.append("key_padding_mask")
    return inputs, names


def export(workload):
    torch.manual_seed(0)
    model = BenchAttention(workload).eval()
    # Non-zero biases, so that a peer that drops them would show in the output check.
    with torch.no_grad():
        model.mha.in_proj_bias.uniform_(-0.1, 0.1)
        model.mha.out_proj.bias.uniform_(-0.1, 0.1)
    inputs, input_names = example_inputs(workload)
    output_names = ["output", "weights"] if workload["needWeights"] else ["output"]
    dynamic_axes = {"query": {0: "B", 1: "L"}, "output": {0: "B", 1: "L"}}
    for name in input_names[1:]:
        dynamic_axes[name] = {0: "B", 1: "S"}
    if workload["needWeights"]:
        dynamic_axes["weights"] = {0: "B", 1: "L", 2: "S"}
    base = os.path.join(MODELS_DIR, workload["id"])
    # Grad stays enabled: under no_grad 1.13 takes the fused fast path, which does not export.
    torch.onnx.export(model, tuple(inputs), base + ".onnx", input_names=input_names,
                      output_names=output_names, dynamic_axes=dynamic_axes, opset_version=14)
    write_safetensors(base + ".safetensors",
                      {name: ("F32", t) for name, t in model.mha.state_dict().items()})


def main():
    with open(os.path.join(BENCH_DIR, "workloads.json")) as f:
        config = json.load(f)
    os.makedirs(MODELS_DIR, exist_ok=True)
    wanted = set(sys.argv[1:])
    for workload in config["workloads"] + [config["gemm"]]:
        if not wanted or workload["id"] in wanted:
            export(workload)
            print(f"exported {workload['id']}", file=sys.stderr)


if __name__ == "__main__":
    main()
