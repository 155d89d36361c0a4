#!/usr/bin/env python3
"""Where a decode step goes: per-kernel time of the last step in an ncu CSV.

Reads the CSV that `ncu --metrics gpu__time_duration.sum --csv ft generate ...` writes (one row per
kernel launch; bench/session12/h200_h.sh makes one), cuts the launches into steps at each kernel
whose name matches --step-end (default: the argmax that ends a greedy step), takes the last step, and
prints a markdown table: kernel (namespaces and argument list dropped, template arguments kept),
launches, total us, and us per layer for kernels launched at least --layers times (others: once).
Session 12's per-kernel table was summed by hand from such a CSV; this makes it a command.

  bench/ncu_step.py resh/ncu_llama8b-nvfp4.csv --layers 32
  bench/ncu_step.py --self-test
"""
import argparse
import csv
import io
import re
import sys
from collections import OrderedDict


def short_name(name):
    """'void ft::cuda::x::(anonymous namespace)::k<1, 2>(Params, int)' -> 'k<1, 2>'."""
    # Anonymous namespaces as ncu writes them (its names can start "void unnamed>::k<...>").
    n = name.strip().replace("(anonymous namespace)", "anon").replace("<unnamed>", "anon").replace("unnamed>", "anon")
    if n.startswith("void "):
        n = n[5:]
    # Drop the argument list: the last top-level '(...)'.
    depth, cut = 0, len(n)
    for i, ch in enumerate(n):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    n = n[:cut]
    # Drop namespaces outside the template arguments.
    depth, last = 0, 0
    i = 0
    while i < len(n):
        ch = n[i]
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0 and n.startswith("::", i):
            last = i + 2
            i += 1
        i += 1
    return n[last:]


def launches(rows):
    """(kernel name, us) per launch, in launch order, from ncu CSV rows."""
    out = []
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        us = v / 1000.0 if unit.startswith("n") else v * 1000.0 if unit.startswith("m") else v
        out.append((r["Kernel Name"], us))
    return out


def last_step(seq, step_end):
    """The launches after the second-to-last step end, up to and including the last one."""
    ends = [i for i, (name, _) in enumerate(seq) if re.search(step_end, name)]
    if not ends:
        raise SystemExit("ncu_step: no kernel matches --step-end %r" % step_end)
    start = ends[-2] + 1 if len(ends) >= 2 else 0
    return seq[start:ends[-1] + 1]


def table(step, layers):
    agg = OrderedDict()
    for name, us in step:
        k = short_name(name)
        n, t = agg.get(k, (0, 0.0))
        agg[k] = (n + 1, t + us)
    total = sum(t for _, t in agg.values())
    lines = ["| kernel | launches | total us | us a layer |", "|---|---|---|---|"]
    for k, (n, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        per = "%.2f" % (t / layers) if layers > 0 and n >= layers else "once"
        lines.append("| %s | %d | %.1f | %s |" % (k, n, t, per))
    lines.append("| (step) | %d | %.1f | |" % (len(step), total))
    return "\n".join(lines)


def read_csv(text):
    # ncu prints its own log lines before the CSV header: start at the header.
    at = text.find('"ID"')
    return list(csv.DictReader(io.StringIO(text[at if at >= 0 else 0:])))


def self_test():
    assert short_name("void ft::cuda::gemv_detail::(anonymous namespace)::slab_kernel<1, 2, true>"
                      "(ft::cuda::gemv_detail::Params, Nv4)") == "slab_kernel<1, 2, true>"
    assert short_name("void ft::cuda::rmsnorm_reg_kernel<true, 4>(float *, long)") == "rmsnorm_reg_kernel<true, 4>"
    assert short_name("argmax_kernel(const float *)") == "argmax_kernel"
    assert short_name("void ft::cuda::<unnamed>::swiglu_kernel<1>(const float *, long)") == "swiglu_kernel<1>"
    assert short_name("void unnamed>::argmax_kernel<1>(const float *, long)") == "argmax_kernel<1>"
    hdr = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
    body = ""
    seq = ["norm", "gemv<1>", "norm", "gemv<1>", "argmax"] * 2 + ["norm", "gemv<1>", "norm", "gemv<1>", "head", "argmax"]
    for i, k in enumerate(seq):
        body += '"%d","void ns::%s(int)","gpu__time_duration.sum","nsecond","%d"\n' % (i, k, 1000 * (1 + i % 3))
    rows = read_csv("==PROF== noise\n" + hdr + body)
    step = last_step(launches(rows), "argmax")
    assert [short_name(n) for n, _ in step] == ["norm", "gemv<1>", "norm", "gemv<1>", "head", "argmax"], step
    t = table(step, 2)
    assert "| norm | 2 |" in t and "| head | 1 |" in t and "once" in t, t
    print("ncu_step: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--layers", type=int, default=0, help="layers of the model (per-layer column)")
    ap.add_argument("--step-end", default="argmax", help="regex of the kernel that ends a step")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.csv:
        ap.error("a CSV path (or --self-test)")
    with open(a.csv, encoding="utf-8", errors="replace") as f:
        rows = read_csv(f.read())
    print(table(last_step(launches(rows), a.step_end), a.layers))


if __name__ == "__main__":
    sys.exit(main())
