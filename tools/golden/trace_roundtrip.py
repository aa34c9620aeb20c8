#!/usr/bin/env python3
"""Reads a trace file with h5py and prints, as JSON, what it holds: per
dataset the finished rows (the n_* root attributes), the CRC-32 of their
little-endian bytes, their sum and the first values; the root attributes;
each dataset's filter ids.  tests/test_trace.c compares it with what the C
reader reads.  zstd chunks need our plugin:

    HDF5_PLUGIN_PATH=build/plugins python3 tools/golden/trace_roundtrip.py trace.h5

A file whose writer was killed is opened with SWMR read access (--swmr).
"""
import argparse
import json
import sys
import zlib

import h5py
import numpy as np


def value(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.bytes_):
        return bytes(v).decode("utf-8")
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return [value(x) for x in v.tolist()]
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("--swmr", action="store_true", help="open with SWMR read access")
    a = ap.parse_args()
    out = {"h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version,
           "attrs": {}, "datasets": {}, "filters": {}}
    with h5py.File(a.path, "r", swmr=a.swmr) as f:
        for k, v in f.attrs.items():
            out["attrs"][k] = value(v)
        for group in ("nodes", "trees", "questions"):
            n = int(f.attrs["n_" + group])
            for name, ds in f[group].items():
                rows = ds[:n]
                le = rows.astype(rows.dtype.newbyteorder("<"), copy=False)
                entry = {"rows": int(rows.shape[0]), "dtype": str(ds.dtype),
                         "crc32": zlib.crc32(le.tobytes()) & 0xffffffff,
                         "first": [value(x) for x in rows[:3]]}
                if rows.dtype.kind in "iuf":
                    entry["sum"] = float(np.sum(rows, dtype=np.float64)) if n else 0.0
                key = group + "/" + name
                out["datasets"][key] = entry
                plist = ds.id.get_create_plist()
                out["filters"][key] = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
