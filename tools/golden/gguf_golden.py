#!/usr/bin/env python3
"""Golden files for tests/test_gguf.c, written by the `gguf` package (the
GGUF writer and quantisers that ship with llama.cpp), not by us:
tests/golden/gguf/small.gguf holds one metadata key of every scalar type,
a string array, a float array, four tensors (F32, F16, Q8_0, Q4_1) of
seeded random values quantised by gguf.quants, a BF16 tensor of random
finite bit patterns (zero, -0, subnormals and the largest first), and one tensor of each of
Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, Q2_K, Q3_K made of random block bytes (random
half-precision scales, the first blocks' scales the edge values: zero, -0,
subnormals, 65504; random quant, scale and high-bit bytes);
small.expected.f32 holds each tensor's values as gguf.quants.dequantize
gives them (llama.cpp's reference), concatenated in tensor order,
little-endian float32.  It also writes the fuzz seeds
tests/fuzz/corpus/gguf/quant_*.gguf: one block of each of those ten types
(the Q4_K seed with a Q2_K block of random bytes beside, its scales anything).

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
# BF16 as raw bytes (a generator of its own, so that the tensors after keep theirs)
bits = np.random.default_rng(2030).integers(0, 1 << 16, size=(2, 64), dtype=np.uint16)
bits[(bits & 0x7F80) == 0x7F80] &= 0xBFFF   # finite: never every exponent bit
bits.reshape(-1)[:6] = [0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F, 0xFF7F]
tensors.append(("bf16", bits.view(np.uint8), gguf.GGMLQuantizationType.BF16))


Q = gguf.GGMLQuantizationType
# where the half-precision scales lie in each type's block of bytes: the
# scale d, and for Q4_1 / Q5_1 the minimum m, for Q4_K / Q5_K / Q2_K dmin
SCALES = {Q.IQ4_NL: [0], Q.IQ4_XS: [0], Q.Q2_K: [80, 82], Q.Q4_0: [0], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}
EDGES = [0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF]   # zero, -0, subnormals, the largest half


def random_blocks(rng, qt, rows, cols, edges=True):
    """Raw bytes of a rows x cols tensor of type qt: random bytes, the scales
    random halves of magnitude 2^-14 .. 2^-2 and either sign; with edges,
    the k-th scale of blocks k .. k+4 the EDGES."""
    block, size = gguf.GGML_QUANT_SIZES[qt]
    n = rows * cols // block
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for k, at in enumerate(SCALES[qt]):
        mag = np.exp2(rng.uniform(-14, -2, size=n))
        half = (mag * rng.choice([-1.0, 1.0], size=n)).astype(np.float16)
        e = min(len(EDGES), n - k) if edges else 0
        half[k:k + e] = np.array(EDGES[:e], dtype=np.uint16).view(np.float16)
        raw[:, at:at + 2] = half.reshape(n, 1).view(np.uint8)
    return raw.reshape(rows, cols // block * size)


# a generator of its own, so that the tensors above keep their values
brng = np.random.default_rng(2027)
for name, qt, rows, cols in [("q4_0", Q.Q4_0, 3, 128), ("q5_0", Q.Q5_0, 3, 128), ("q5_1", Q.Q5_1, 3, 128),
                             ("q4_k", Q.Q4_K, 2, 1536), ("q5_k", Q.Q5_K, 2, 1536), ("q6_k", Q.Q6_K, 2, 1536),
                             ("q3_k", Q.Q3_K, 2, 1536)]:
    tensors.append((name, random_blocks(brng, qt, rows, cols), qt))
# IQ4_NL before q3_k, which stays last; a generator of its own
tensors.insert(len(tensors) - 1, ("iq4_nl", random_blocks(np.random.default_rng(2031), Q.IQ4_NL, 3, 128), Q.IQ4_NL))
tensors.insert(len(tensors) - 1, ("iq4_xs", random_blocks(np.random.default_rng(2032), Q.IQ4_XS, 2, 1536), Q.IQ4_XS))
tensors.insert(len(tensors) - 1, ("q2_k", random_blocks(np.random.default_rng(2033), Q.Q2_K, 2, 1536), Q.Q2_K))
expected = []
for name, x, qt in tensors:
    if qt in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        data = x
        deq = x.astype(np.float32)
    elif x.dtype == np.uint8:   # already block bytes
        data = x
        deq = quants.dequantize(data, qt).astype(np.float32)
        assert np.isfinite(deq).all(), name
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

# fuzz seeds: small files that reach each block dequantiser
seeds = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fuzz", "corpus", "gguf")
srng = np.random.default_rng(2028)
for fname, items in [("quant_32.gguf", [("a", Q.Q4_0, 32), ("b", Q.Q5_0, 32), ("c", Q.Q5_1, 64)]),
                     ("quant_q4_k.gguf", [("w", Q.Q4_K, 256), ("u", Q.Q2_K, 256)]),
                     ("quant_q5_k.gguf", [("w", Q.Q5_K, 256)]),
                     ("quant_q6_k.gguf", [("w", Q.Q6_K, 256)]),
                     ("quant_q3_k.gguf", [("w", Q.Q3_K, 512)]),
                     ("quant_iq4_nl.gguf", [("w", Q.IQ4_NL, 64)]),
                     ("quant_iq4_xs.gguf", [("w", Q.IQ4_XS, 512)]),
                     ("quant_q2_k.gguf", [("w", Q.Q2_K, 512)])]:
    w = gguf.GGUFWriter(os.path.join(seeds, fname), "llama")
    for name, qt, cols in items:
        if name == "u":   # random bytes of a Q2_K block's size, its scales anything
            data = srng.integers(0, 256, size=(1, gguf.GGML_QUANT_SIZES[qt][1]), dtype=np.uint8)
        else:
            data = random_blocks(srng, qt, 1, cols, edges=False)
        w.add_tensor(name, data, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
print("wrote", seeds)

# Q4_0 quantisation (spec-convert --dtype q4_0) against gguf.quants.quantize:
# q4_0_from.f32 holds rows of values, q4_0_from.bin their Q4_0 blocks.
# Edge blocks first: zeros; the largest magnitude negative; +m before -m
# (the first wins); exact half steps and a value that rounds past 15 (the
# clamp); a scale below half precision's subnormals; then random rows.
qrng = np.random.default_rng(2029)
edge = np.zeros((6, 32), dtype=np.float32)
edge[1] = qrng.uniform(-2, 2, 32); edge[1][5] = -3.0
edge[2] = qrng.uniform(-1, 1, 32); edge[2][3] = 2.5; edge[2][9] = -2.5
edge[3] = (np.arange(32) % 17 - 8.5).astype(np.float32); edge[3][0] = -8.0; edge[3][31] = 8.0
edge[4] = qrng.uniform(-1, 1, 32).astype(np.float32) * np.float32(1e-9)
edge[5] = qrng.standard_normal(32).astype(np.float32) * np.float32(60000)
vals = np.concatenate([edge.reshape(2, 96), (qrng.standard_normal((4, 96)) * 0.05).astype(np.float32)])
vals.astype("<f4").tofile(os.path.join(out, "q4_0_from.f32"))
quants.quantize(vals, Q.Q4_0).tofile(os.path.join(out, "q4_0_from.bin"))
print("wrote", os.path.join(out, "q4_0_from.*"))
