#!/usr/bin/python3
"""The decoding workloads of bench/workloads.json ("decode"): parameters,
ONNX models for onnxruntime, one step's inputs and its reference output.

For each id writes
  bench/models/<id>.safetensors   the module's parameters (PyTorch names)
  bench/models/<id>.onnx          the same step as onnxruntime runs it: input
      projection (MatMul, + bias), the com.microsoft MultiHeadAttention op
      (self-attention: past_key/past_value in, present_key/present_value out;
      cross-attention: the projected encoder keys/values as BNSH inputs) or
      GroupQueryAttention (do_rotary, cos/sin caches), output projection
  build/bench/data/<id>.query.f32     self-attention: the past + L tokens (past+L, E);
                                      cross-attention: the step's query (1, E)
  build/bench/data/<id>.key.f32       cross-attention: the encoder states (past, E)
  build/bench/data/<id>.past_key.f32, .past_value.f32
      the cache before the step as onnxruntime takes it, (1, kvHeads, past, D),
      projected (and rotated) here in float64
  build/bench/data/<id>.reference.out.f32
      the step's output (L, E), computed here in float64 with explicit torch
      code (torch 1.13 has neither grouped-query heads nor rotary positions)

Run with Debian's python3-torch and python3-onnx:
  /usr/bin/python3 bench/export_decode.py D1 D2 ...
"""
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from safetensors_writer import write_safetensors  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
MODELS_DIR = os.path.join(BENCH_DIR, "models")
DATA_DIR = os.path.join(BENCH_DIR, "..", "build", "bench", "data")
ORT_OPSET = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]


def head_dim(w):
    return w["E"] // w["H"]


def make_parameters(w):
    """PyTorch state_dict names; q/k/v apart when keys have fewer heads."""
    torch.manual_seed(0)
    e, d = w["E"], head_dim(w)
    kv = w["kvHeads"] * d

    def linear(rows, cols):
        weight = torch.empty(rows, cols, dtype=torch.float64)
        torch.nn.init.xavier_uniform_(weight)
        return weight

    # Non-zero biases, so that a peer that drops them would show in the output check.
    bias = (lambda n: torch.empty(n, dtype=torch.float64).uniform_(-0.1, 0.1)) if w["bias"] else None
    p = {}
    if w["kvHeads"] == w["H"]:
        p["in_proj_weight"] = linear(3 * e, e)
    else:
        p["q_proj_weight"], p["k_proj_weight"], p["v_proj_weight"] = linear(e, e), linear(kv, e), linear(kv, e)
    if bias:
        p["in_proj_bias"] = bias(e + 2 * kv)
    p["out_proj.weight"] = linear(e, e)
    if bias:
        p["out_proj.bias"] = bias(e)
    return p


def projections(w, p):
    """(Wq, Wk, Wv, bq, bk, bv, Wo, bo), biases zero when the module has none."""
    e, kv = w["E"], w["kvHeads"] * head_dim(w)
    if "in_proj_weight" in p:
        wq, wk, wv = p["in_proj_weight"].split([e, kv, kv])
    else:
        wq, wk, wv = p["q_proj_weight"], p["k_proj_weight"], p["v_proj_weight"]
    b = p.get("in_proj_bias", torch.zeros(e + 2 * kv, dtype=torch.float64))
    bq, bk, bv = b.split([e, kv, kv])
    return wq, wk, wv, bq, bk, bv, p["out_proj.weight"], p.get("out_proj.bias", torch.zeros(e, dtype=torch.float64))


def rotary_tables(w, length):
    """cos, sin (length, dim/2): angle position * base^(-2i/dim)."""
    r = w["rotary"]
    inv_freq = r["base"] ** (-torch.arange(0, r["dim"], 2, dtype=torch.float64) / r["dim"])
    angles = torch.arange(length, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def rotate(x, positions, w):
    """Rotary positions, pairs (i, i + dim/2) (rotate_half), on (heads, n, D)."""
    if not w["rotary"]:
        return x
    half = w["rotary"]["dim"] // 2
    cos, sin = rotary_tables(w, int(positions[-1]) + 1)
    cos, sin = cos[positions], sin[positions]
    a, b, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


def heads(x, count):
    """(n, count * D) -> (count, n, D)."""
    return x.reshape(x.shape[0], count, -1).transpose(0, 1)


def reference(w, p, query_rows, source_rows):
    """The step in float64: (past K, past V as (kvHeads, past, D), output (L, E)).

    Self-attention: source_rows are the past + L tokens, query_rows the last L.
    Cross-attention: source_rows are the encoder states, the cache's keys.
    """
    wq, wk, wv, bq, bk, bv, wo, bo = projections(w, p)
    h, hkv, d = w["H"], w["kvHeads"], head_dim(w)
    n_keys = source_rows.shape[0]
    first = n_keys - query_rows.shape[0] if not w["cross"] else 0
    key_positions = torch.arange(n_keys)
    query_positions = torch.arange(first, first + query_rows.shape[0])
    q = rotate(heads(query_rows @ wq.T + bq, h), query_positions, w)
    k = rotate(heads(source_rows @ wk.T + bk, hkv), key_positions, w)
    v = heads(source_rows @ wv.T + bv, hkv)
    group = h // hkv
    k_all, v_all = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
    # Query blocks, each against the keys its window and the causal mask
    # leave: a forward over 8192 tokens (V1f) never holds all its scores.
    window = w.get("window")
    blocks = []
    for i0 in range(0, query_rows.shape[0], 512):
        qp = query_positions[i0:i0 + 512]
        j0 = max(0, int(qp[0]) - window + 1) if window else 0
        j1 = int(qp[-1]) + 1 if w["causal"] else n_keys
        kp = key_positions[j0:j1]
        scores = q[:, i0:i0 + 512] @ k_all[:, j0:j1].transpose(1, 2) / d ** 0.5
        if w.get("softcap"):
            scores = w["softcap"] * torch.tanh(scores / w["softcap"])
        hidden = kp[None, :] > qp[:, None] if w["causal"] else torch.zeros(len(qp), len(kp), dtype=torch.bool)
        if window:
            hidden |= kp[None, :] <= qp[:, None] - window
        blocks.append(scores.masked_fill(hidden, float("-inf")).softmax(-1) @ v_all[:, j0:j1])
    attended = torch.cat(blocks, dim=1)
    output = attended.transpose(0, 1).reshape(query_rows.shape[0], -1) @ wo.T + bo
    past = n_keys if w["cross"] else w["past"]
    return k[:, :past], v[:, :past], output


def initializer(name, array):
    return numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name)


def onnx_model(w, p):
    """One step as onnxruntime runs it (batch 1, batch_first)."""
    e, h, hkv, d = w["E"], w["H"], w["kvHeads"], head_dim(w)
    wq, wk, wv, bq, bk, bv, wo, bo = [t.numpy() for t in projections(w, p)]
    floats = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    ints = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.INT32, shape)
    inits = [initializer("out_weight", wo.T), initializer("out_bias", bo)]
    inputs = [floats("query", [1, "L", e])]
    outputs = [floats("output", [1, "L", e])]
    nodes = []
    if w["cross"]:
        # Whisper's decoder as onnxruntime exports it: the encoder's keys and
        # values are projected once and fed as BNSH tensors to every step.
        inits += [initializer("q_weight", wq.T), initializer("q_bias", bq)]
        inputs += [floats("past_key", [1, h, "S", d]), floats("past_value", [1, h, "S", d])]
        nodes += [helper.make_node("MatMul", ["query", "q_weight"], ["q_raw"]),
                  helper.make_node("Add", ["q_raw", "q_bias"], ["q"]),
                  helper.make_node("MultiHeadAttention", ["q", "past_key", "past_value"], ["attended"],
                                   domain="com.microsoft", num_heads=h)]
    else:
        inits += [initializer("qkv_weight", np.concatenate([wq, wk, wv]).T),
                  initializer("qkv_bias", np.concatenate([bq, bk, bv])),
                  numpy_helper.from_array(np.array([e, hkv * d, hkv * d], dtype=np.int64), "qkv_split")]
        nodes += [helper.make_node("MatMul", ["query", "qkv_weight"], ["qkv_raw"]),
                  helper.make_node("Add", ["qkv_raw", "qkv_bias"], ["qkv"]),
                  helper.make_node("Split", ["qkv", "qkv_split"], ["q", "k", "v"], axis=2)]
        past = ["past_key", "past_value"] if w["past"] else ["", ""]
        if w["past"]:
            inputs += [floats("past_key", [1, hkv, "P", d]), floats("past_value", [1, hkv, "P", d])]
        outputs += [floats("present_key", [1, hkv, "T", d]), floats("present_value", [1, hkv, "T", d])]
        if hkv == h and not w["rotary"]:
            nodes.append(helper.make_node(
                "MultiHeadAttention", ["q", "k", "v", "", "", ""] + past,
                ["attended", "present_key", "present_value"], domain="com.microsoft",
                num_heads=h, unidirectional=int(w["causal"])))
        else:
            # GroupQueryAttention is always causal; seqlens_k is the total length - 1.
            cos, sin = rotary_tables(w, w["past"] + w["L"])
            inits += [initializer("cos_cache", cos.numpy()), initializer("sin_cache", sin.numpy())]
            inputs += [ints("seqlens_k", [1]), ints("total_sequence_length", [])]
            nodes.append(helper.make_node(
                "GroupQueryAttention",
                ["q", "k", "v"] + past + ["seqlens_k", "total_sequence_length", "cos_cache", "sin_cache"],
                ["attended", "present_key", "present_value"], domain="com.microsoft",
                num_heads=h, kv_num_heads=hkv, do_rotary=1, rotary_interleaved=0, **window_and_softcap(w)))
    nodes += [helper.make_node("MatMul", ["attended", "out_weight"], ["out_raw"]),
              helper.make_node("Add", ["out_raw", "out_bias"], ["output"])]
    graph = helper.make_graph(nodes, w["id"], inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=ORT_OPSET, producer_name="bench/export_decode.py")
    model.ir_version = 8
    return model


def window_and_softcap(w):
    """GroupQueryAttention's attributes for issue 22's rows: local_window_size
    W sees the query's key and the W - 1 before it in onnxruntime 1.30 (as
    Hugging Face's sliding_window W; W - 1 matched the reference of a window
    of W - 1 keys, to 6e-8); softcap as Gemma 2's attn_logit_softcapping."""
    attributes = {}
    if w.get("window"):
        attributes["local_window_size"] = w["window"]
    if w.get("softcap"):
        attributes["softcap"] = float(w["softcap"])
    return attributes


def write_floats(name, tensor):
    tensor.to(torch.float32).contiguous().numpy().tofile(os.path.join(DATA_DIR, name))


def export(w):
    base = w.get("model", w["id"])
    p = make_parameters(w)
    torch.manual_seed(1)
    uniform = lambda *shape: torch.empty(*shape, dtype=torch.float64).uniform_(-1, 1)
    if w["cross"]:
        query_rows, source_rows = uniform(w["L"], w["E"]), uniform(w["past"], w["E"])
        write_floats(f"{w['id']}.key.f32", source_rows)
    else:
        source_rows = uniform(w["past"] + w["L"], w["E"])
        query_rows = source_rows[w["past"]:]
    write_floats(f"{w['id']}.query.f32", query_rows if w["cross"] else source_rows)
    past_key, past_value, output = reference(w, p, query_rows, source_rows)
    write_floats(f"{w['id']}.past_key.f32", past_key)
    write_floats(f"{w['id']}.past_value.f32", past_value)
    write_floats(f"{w['id']}.reference.out.f32", output)
    # A variant ("model": "D2") writes the same files as the workload it shares them with.
    onnx.save(onnx_model(w, p), os.path.join(MODELS_DIR, base + ".onnx"))
    write_safetensors(os.path.join(MODELS_DIR, base + ".safetensors"),
                      {name: ("F32", t.to(torch.float32)) for name, t in p.items()})


def main():
    with open(os.path.join(BENCH_DIR, "workloads.json")) as f:
        config = json.load(f)
    os.makedirs(MODELS_DIR, exist_ok=True)
    os.makedirs(DATA_DIR, exist_ok=True)
    wanted = set(sys.argv[1:])
    # Issue 22's decoding rows ("models" with a past): the row they are "like", with their own fields.
    rows = config["workloads"] + config["decode"]
    like = lambda row: {**next(w for w in rows if w["id"] == row["like"]), **row}
    models = [like(row) for row in config["models"] if "past" in like(row)]
    for w in config["decode"] + models:
        if not wanted or w["id"] in wanted:
            export(w)
            print(f"exported {w['id']}", file=sys.stderr)

if __name__ == "__main__":
    main()
