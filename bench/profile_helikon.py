"""Profile one of helikon's workloads with cProfile and print its hot spots.

Usage: ``python bench/profile_helikon.py W1|W2|W2i|W3 [--backend trio|asyncio] [--top N] [--out FILE]``.

It runs the workload from ``helikon_bench.py`` in this process: once with tiny
parameters, unprofiled, so one-time costs (lazy imports, schema compilation)
stay out, then with the real parameters under the profiler (the workload's
own warm-ups and self-checks included). It prints the top functions by
cumulative time and by own time, each with its share of the profiled total.
cProfile slows the code several-fold and charges its overhead to call-heavy
functions: read the shares, not the absolute times.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import helikon_bench as B


def short(func: tuple[str, int, str]) -> str:
    path, line, name = func
    for marker in ("/helikon/", "/site-packages/", "/lib/python3."):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker == "/helikon/":
                path = "helikon/" + path
            break
    return f"{path}:{line}({name})" if line else name


def table(stats: pstats.Stats, key: str, top: int) -> list[str]:
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    total = max(ct for (_cc, _nc, _tt, ct, _callers) in raw.values())
    index = 3 if key == "cumulative" else 2
    rows = sorted(raw.items(), key=lambda kv: kv[1][index], reverse=True)[:top]
    lines = ["| cumulative share | own share | calls | function |", "|---:|---:|---:|---|"]
    for func, (_cc, nc, tt, ct, _callers) in rows:
        lines.append(f"| {100 * ct / total:.1f}% | {100 * tt / total:.1f}% | {nc:,} | `{short(func)}` |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("workload", choices=["W1", "W2", "W2i", "W3"])
    parser.add_argument("--backend", choices=list(B.C.BACKENDS), default="trio")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", help="also save the raw profile (for snakeviz, pstats)")
    args = parser.parse_args()
    fn = {"W1": B.w1, "W2": B.w2, "W2i": B.w2i, "W3": B.w3}[args.workload]
    saved = (B.C.R_W1, B.C.WARMUP_W1, B.C.C_W2, B.C.N_W3)
    B.C.R_W1, B.C.WARMUP_W1, B.C.C_W2, B.C.N_W3 = 2, 1, 2, 10
    fn(args.backend)  # unprofiled: imports and one-time caches
    B.C.R_W1, B.C.WARMUP_W1, B.C.C_W2, B.C.N_W3 = saved
    profiler = cProfile.Profile()
    profiler.runcall(fn, args.backend)
    if args.out:
        profiler.dump_stats(args.out)
    stats = pstats.Stats(profiler, stream=io.StringIO())
    print(f"\n## {args.workload} ({args.backend}) by cumulative time\n")
    print("\n".join(table(stats, "cumulative", args.top)))
    print(f"\n## {args.workload} ({args.backend}) by own time\n")
    print("\n".join(table(stats, "own", args.top)))


if __name__ == "__main__":
    main()
