#!/usr/bin/env python3
"""Golden files for tests/test_ptbin.c: `pytorch_model.bin` files as
torch.save writes them (the zip archive of a pickled state dict), each good
one with a safetensors twin written by safetensors.torch from the same
tensors, so the C reader's values can be compared bit for bit; and hostile
files whose pickles are written here by hand (never unpickled, never run).

    pip install torch safetensors   # torch 2.x; CPU is enough
    python3 tools/golden/ptbin_golden.py   # writes tests/golden/ptbin/ and the
                                    # seeds in tests/fuzz/corpus/ptbin/

Good files:
  eagle1_head.bin     an EAGLE-1 head in the published layout (unprefixed
                      fc.*, layers.0.*, an fp32 embed_tokens.weight), saved
                      from a module's state_dict() (OrderedDict + _metadata)
  eagle_tiny/         tests/ckpt/eagle_tiny as pytorch_model.bin (+ its
                      config.json): the decode test runs it against the
                      safetensors head
  sharded/            pytorch_model.bin.index.json + two shards
  views.bin           shared storages, storage offsets, an nn.Parameter,
                      F16 and BF16
  f64.bin             a float64 tensor: loads, refused when used as a weight
Refused files:
  transposed.bin      a non-contiguous view
  os_system.bin       GLOBAL posix.system + REDUCE
  eval.bin            GLOBAL builtins.eval
  truncated.bin       the first half of views.bin
  bad_crc.bin         views.bin with one storage byte flipped
  past_storage.bin    a tensor of 8 floats on a storage of 4
  past_offset.bin     a tensor at storage offset 3 of 4 floats, 2 long
  legacy.bin          torch.save(..., _use_new_zipfile_serialization=False)
  big_endian.bin      a byteorder entry saying "big"
"""
import collections
import json
import os
import shutil
import struct
import zipfile

import torch
from safetensors.torch import load_file, save_file

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
out = os.path.join(root, "tests", "golden", "ptbin")
os.makedirs(out, exist_ok=True)
torch.manual_seed(2026)


def path(*p):
    return os.path.join(out, *p)


def twin(name, sd):
    """The safetensors twin: contiguous clones of the same values."""
    save_file({k: v.detach().contiguous().clone() for k, v in sd.items()}, path(name))


# ---- an EAGLE-1 head in the published layout (tiny dims) ----
H, HEADS, KV, FF, V = 8, 2, 1, 16, 32
D = H // HEADS


class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(H) + 0.5)


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = torch.nn.Module()
        for n, o in (("q_proj", HEADS * D), ("k_proj", KV * D), ("v_proj", KV * D)):
            setattr(self.self_attn, n, torch.nn.Linear(H, o, bias=False))
        self.self_attn.o_proj = torch.nn.Linear(HEADS * D, H, bias=False)
        self.mlp = torch.nn.Module()
        self.mlp.gate_proj = torch.nn.Linear(H, FF, bias=False)
        self.mlp.up_proj = torch.nn.Linear(H, FF, bias=False)
        self.mlp.down_proj = torch.nn.Linear(FF, H, bias=False)
        self.post_attention_layernorm = Norm()


class Eagle1(torch.nn.Module):
    """SafeAILab/EAGLE's Model: embed_tokens, fc (with bias), layers."""

    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(V, H)
        self.fc = torch.nn.Linear(2 * H, H, bias=True)
        self.layers = torch.nn.ModuleList([Layer()])


sd = Eagle1().state_dict()
torch.save(sd, path("eagle1_head.bin"))
twin("eagle1_head.safetensors", sd)

# ---- tests/ckpt/eagle_tiny as a head directory holding only pytorch_model.bin ----
os.makedirs(path("eagle_tiny"), exist_ok=True)
src = os.path.join(root, "tests", "ckpt", "eagle_tiny")
torch.save(collections.OrderedDict(sorted(load_file(os.path.join(src, "model.safetensors")).items())),
           path("eagle_tiny", "pytorch_model.bin"))
shutil.copy(os.path.join(src, "config.json"), path("eagle_tiny", "config.json"))

# ---- sharded ----
os.makedirs(path("sharded"), exist_ok=True)
shards = [collections.OrderedDict(a=torch.randn(3, 4), b=torch.randn(5)),
          collections.OrderedDict(c=torch.randn(2, 2).half())]
weight_map = {}
for i, s in enumerate(shards):
    name = "pytorch_model-%05d-of-%05d.bin" % (i + 1, len(shards))
    torch.save(s, path("sharded", name))
    weight_map.update({k: name for k in s})
with open(path("sharded", "pytorch_model.bin.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=1)
twin("sharded.safetensors", collections.OrderedDict(kv for s in shards for kv in s.items()))

# ---- views: shared storages, offsets, a Parameter, F16, BF16 ----
base = torch.randn(32)
hb = torch.randn(12).to(torch.bfloat16)
views = collections.OrderedDict()
views["whole"] = base
views["slice"] = base[5:13]                 # storage offset 5, shares base's storage
views["rows"] = base.view(4, 8)[1:3]        # offset 8, contiguous [2, 8]
views["param"] = torch.nn.Parameter(torch.randn(2, 3).half(), requires_grad=False)
views["bf_tail"] = hb[4:]
views["bf_head"] = hb[:4]
views["scalar"] = base[31]                  # 0-dim, offset 31
torch.save(views, path("views.bin"))
twin("views.safetensors", views)

torch.save(collections.OrderedDict(w=torch.randn(4, dtype=torch.float64)), path("f64.bin"))
torch.save(collections.OrderedDict(t=torch.randn(3, 4).t()), path("transposed.bin"))
torch.save(collections.OrderedDict(a=torch.randn(4)), path("legacy.bin"), _use_new_zipfile_serialization=False)


# ---- hand-written pickles in a torch-style zip (nothing here is unpickled) ----
def u(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def i32(n):
    return b"J" + struct.pack("<i", n)


def tensor_pickle(name, key, numel, offset, size):
    """One-entry state dict as torch writes it: {name: _rebuild_tensor_v2(
    persistent('storage', FloatStorage, key, 'cpu', numel), offset, size, stride, False, OrderedDict())}."""
    stride, acc = [], 1
    for d in reversed(size):
        stride.insert(0, acc)
        acc *= d
    tup = lambda xs: b"(" + b"".join(i32(x) for x in xs) + b"t"
    return (b"\x80\x02" + b"ccollections\nOrderedDict\n)R(" + u(name) +
            b"ctorch._utils\n_rebuild_tensor_v2\n(" +
            b"(" + u("storage") + b"ctorch\nFloatStorage\n" + u(key) + u("cpu") + i32(numel) + b"tQ" +
            i32(offset) + tup(size) + tup(stride) + b"\x89" + b"ccollections\nOrderedDict\n)R" +
            b"tRu.")


def torch_zip(file, pkl, storages, byteorder=b"little"):
    with zipfile.ZipFile(path(file), "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", byteorder)
        for k, b in storages.items():
            z.writestr("archive/data/" + k, b)
        z.writestr("archive/version", b"3\n")


four = struct.pack("<4f", 1, 2, 3, 4)
torch_zip("past_storage.bin", tensor_pickle("too_long", "0", 4, 0, [8]), {"0": four})
torch_zip("past_offset.bin", tensor_pickle("off_end", "0", 4, 3, [2]), {"0": four})
torch_zip("big_endian.bin", tensor_pickle("w", "0", 4, 0, [4]), {"0": four}, byteorder=b"big")
# what `class X: __reduce__ = lambda s: (os.system, ("echo pwned",))` pickles to
torch_zip("os_system.bin", b"\x80\x02cposix\nsystem\nq\x00" + u("echo pwned") + b"\x85q\x01Rq\x02.", {})
torch_zip("eval.bin", b"\x80\x02cbuiltins\neval\n" + u("1") + b"\x85R.", {})

with open(path("views.bin"), "rb") as f:
    good = f.read()
with open(path("truncated.bin"), "wb") as f:
    f.write(good[:len(good) // 2])
# flip one byte of the first storage's data (its local header's name locates it)
z = zipfile.ZipFile(path("views.bin"))
info = z.getinfo("views/data/0")
# the local extra field (torch's alignment padding) is read from the local header
name_len, extra_len = struct.unpack("<HH", good[info.header_offset + 26:info.header_offset + 30])
start = info.header_offset + 30 + name_len + extra_len
bad = bytearray(good)
bad[start + 1] ^= 0x40
with open(path("bad_crc.bin"), "wb") as f:
    f.write(bytes(bad))

# ---- fuzz seeds (tests/fuzz/fuzz_ptbin.c): two whole files, and a bare pickle that the
# harness zips beside its storages data/0 (16 floats) and data/1 (4 halves) ----
seeds = os.path.join(root, "tests", "fuzz", "corpus", "ptbin")
os.makedirs(seeds, exist_ok=True)
shutil.copy(path("views.bin"), os.path.join(seeds, "views.bin"))
shutil.copy(path("os_system.bin"), os.path.join(seeds, "os_system.bin"))
f16, h4 = torch.zeros(16), torch.zeros(4).half()
torch.save(collections.OrderedDict(w=f16[2:6], all=f16.view(4, 4), h=torch.nn.Parameter(h4, requires_grad=False)),
           os.path.join(seeds, "tmp.bin"))
with zipfile.ZipFile(os.path.join(seeds, "tmp.bin")) as z, open(os.path.join(seeds, "state.pkl"), "wb") as f:
    f.write(z.read("tmp/data.pkl"))
os.remove(os.path.join(seeds, "tmp.bin"))

total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
print("wrote", out, "(%d bytes)" % total)
