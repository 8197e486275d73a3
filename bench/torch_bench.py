#!/usr/bin/python3
"""Times PyTorch 1.13 nn.MultiheadAttention on one workload, with the timing
rule of bench/lib/timing.mjs, and prints one JSON line
{"medianMs", "reps", "maxRssBytes", "blas", "torch"}.

Arguments are key=value, as for bench/native/mha_bench.cc:
  params=<.safetensors> data=<input prefix> out=<output .f32>
  B= L= S= E= H= cross=0|1 causal=0|1 need_weights=0|1 kpm=0|1 threads=
  warmup_reps= warmup_ms= budget_ms= min_reps= max_reps=
Runs in inference mode, so 1.13 takes its fused fast path where it can
(self-attention without attn_mask). bench/run.mjs runs it on Debian's
OpenMP OpenBLAS, with OPENBLAS_CORETYPE=SkylakeX on AVX-512 machines.
"""
import json
import math
import resource
import statistics
import struct
import sys
import time

import numpy as np
import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_length])
    body = data[8 + header_length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        array = np.frombuffer(body[begin:end], dtype=np.float32).reshape(entry["shape"])
        tensors[name] = torch.from_numpy(array.copy())
    return tensors


def main():
    args = dict(arg.split("=", 1) for arg in sys.argv[1:])
    num = {key: int(value) for key, value in args.items() if value.lstrip("-").isdigit()}
    b, l, s, e = num["B"], num["L"], num["S"], num["E"]
    torch.set_num_threads(num["threads"])

    module = torch.nn.MultiheadAttention(e, num["H"], bias=True, batch_first=True).eval()
    module.load_state_dict(read_safetensors(args["params"]))

    def read(name, shape, dtype=np.float32):
        return torch.from_numpy(np.fromfile(f"{args['data']}.{name}", dtype=dtype).reshape(shape))

    query = read("query.f32", (b, l, e))
    key = read("key.f32", (b, s, e)) if num["cross"] else query
    value = read("value.f32", (b, s, e)) if num["cross"] else query
    key_padding_mask = read("kpm.u8", (b, s), np.uint8).bool() if num["kpm"] else None
    attn_mask = torch.ones(l, s, dtype=torch.bool).triu(1) if num["causal"] else None

    def forward():
        return module(query, key, value, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                      need_weights=bool(num["need_weights"]), average_attn_weights=True)[0]

    def time_once():
        start = time.perf_counter()
        forward()
        return (time.perf_counter() - start) * 1e3

    with torch.inference_mode():
        forward().contiguous().numpy().tofile(args["out"])
        warmup = last = time_once()
        for _ in range(1, num["warmup_reps"]):
            if warmup + last >= num["warmup_ms"]:
                break
            last = time_once()
            warmup += last
        reps = min(num["max_reps"], max(num["min_reps"], math.ceil(num["budget_ms"] / last)))
        times = [time_once() for _ in range(reps)]

    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"medianMs": statistics.median(times), "reps": reps, "maxRssBytes": max_rss,
                      "blas": loaded_blas(), "torch": torch.__version__}))


def loaded_blas():
    """The BLAS library this process loaded (Debian's torch takes libblas.so.3)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "blas" in line.split()[-1]}
    return sorted(paths)[0] if paths else "none"


if __name__ == "__main__":
    main()
