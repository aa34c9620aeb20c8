#!/usr/bin/env python3
"""tools/gpu/ncu_summary.py on Nsight Compute CSVs written here: launches and
times are summed per kernel in microseconds whatever ncu's unit, the program's
own output before the header is skipped, kernels come largest first, and a
file that is not such a CSV ends in one line naming it with a non-zero exit.
PASS/FAIL lines for tests/run.sh."""
import os
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(__file__), "..", "tools", "gpu", "ncu_summary.py")
HEAD = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'


def run(text):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(text)
    try:
        p = subprocess.run([sys.executable, TOOL, f.name], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr, f.name
    finally:
        os.unlink(f.name)


def check(name, ok, why):
    print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
    return ok


def main():
    good = True
    rows = ['"%d","%s","gpu__time_duration.sum","%s","%s"\n' % r for r in
            [(0, "gemv_kernel<1, bf16>", "nsecond", "3,000"), (1, "rmsnorm_kernel", "usecond", "4.5"),
             (2, "gemv_kernel<1, bf16>", "nsecond", "2000"), (3, "gemv_kernel<1, bf16>", "msecond", "0.001")]]
    other = '"4","rmsnorm_kernel","dram__bytes.sum","byte","99"\n'
    rc, out, err, _ = run("policy ar\n==PROF== Connected to process 1\n" + HEAD + "".join(rows) + other)
    lines = out.splitlines()
    good &= check("sums", rc == 0 and lines[:1] == ["4 launches, 10.5 us of kernel time, 2.62 us a launch"],
                  "rc %d, %r %s" % (rc, lines[:1], err))
    first = lines[2].split() if len(lines) > 2 else []
    good &= check("per kernel, largest first",
                  first[:4] == ["3", "6.0", "2.00", "57.1%"] and lines[2].endswith("gemv_kernel<1, bf16>") and
                  lines[3].split()[:3] == ["1", "4.5", "4.50"], "%r" % lines)
    rc, out, err, name = run(HEAD + '"0","k","gpu__time_duration.sum","furlong","1"\n')
    good &= check("unknown unit refused", rc != 0 and name in err and "furlong" in err and err.count("\n") == 1,
                  "rc %d, %r" % (rc, err))
    rc, out, err, name = run("spec-eval: no such file\n")
    good &= check("not a CSV refused", rc != 0 and name in err and err.count("\n") == 1, "rc %d, %r" % (rc, err))
    rc, out, err, name = run(HEAD + '"0","k","gpu__time_duration.sum","nsecond","n/a"\n')
    good &= check("a value that is no number refused", rc != 0 and name in err and err.count("\n") == 1,
                  "rc %d, %r" % (rc, err))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
