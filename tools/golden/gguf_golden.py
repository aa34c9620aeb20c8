#!/usr/bin/env python3
"""Golden files for tests/test_gguf.c, written by the `gguf` package (the
GGUF writer and quantisers that ship with llama.cpp), not by us:
tests/golden/gguf/small.gguf holds one metadata key of every scalar type,
a string array, a float array and four tensors (F32, F16, Q8_0, Q4_1) of
seeded random values; small.expected.f32 holds each tensor's values as
gguf.quants.dequantize gives them (llama.cpp's reference), concatenated in
tensor order, little-endian float32.

    pip install gguf==0.19.0 numpy   # the version that wrote the committed files
    python3 tools/golden/gguf_golden.py"""
import os
import numpy as np
import gguf
from gguf import quants

out = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "gguf")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(2026)
w = gguf.GGUFWriter(os.path.join(out, "small.gguf"), "llama")
w.add_uint8("t.u8", 200)
w.add_int8("t.i8", -100)
w.add_uint16("t.u16", 60000)
w.add_int16("t.i16", -30000)
w.add_uint32("t.u32", 4000000000)
w.add_int32("t.i32", -2000000000)
w.add_float32("t.f32", 0.15625)
w.add_bool("t.bool", True)
w.add_string("t.str", "h\u00e9llo \u2581world")
w.add_uint64("t.u64", 2**40 + 3)
w.add_int64("t.i64", -(2**50) - 7)
w.add_float64("t.f64", -1.0e100)
w.add_array("t.strs", ["a", "", "\u0120the", "<|im_start|>"])
w.add_array("t.f32s", [1.5, -2.25, 3.0])
w.add_uint32("llama.block_count", 2)
tensors = []
a = rng.standard_normal((3, 64)).astype(np.float32)
tensors.append(("f32", a, gguf.GGMLQuantizationType.F32))
b = rng.standard_normal((2, 32)).astype(np.float16)
tensors.append(("f16", b, gguf.GGMLQuantizationType.F16))
c = (rng.standard_normal((4, 64)) * 3).astype(np.float32)
tensors.append(("q8_0", c, gguf.GGMLQuantizationType.Q8_0))
d = (rng.standard_normal((2, 96)) + 0.5).astype(np.float32)
tensors.append(("q4_1", d, gguf.GGMLQuantizationType.Q4_1))
expected = []
for name, x, qt in tensors:
    if qt in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        data = x
        deq = x.astype(np.float32)
    else:
        data = quants.quantize(x, qt)
        deq = quants.dequantize(data, qt).astype(np.float32)
    w.add_tensor(name, data, raw_dtype=qt)
    expected.append(deq.reshape(-1))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
np.concatenate(expected).astype("<f4").tofile(os.path.join(out, "small.expected.f32"))
print("wrote", out)
