#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Median table of several nfs_bench runs, as docs/performance.md shows it.

One run of nfs_bench on a 2-core VM moves by 2x between runs (its own
FSAL_VFS figures do), so the figures kept in docs/performance.md are
medians of several back-to-back runs, with the spread of each ratio
across the runs.  This reads the saved output of those runs (the table
nfs_bench prints last: "workload conns unit" and one column per target
and ratio), and prints one Markdown table: the median of every column,
then the lowest-highest range of every ratio column.  A ratio's median
is the median of the per-run ratios, not the ratio of the medians, so it
is a figure some run measured.

    for run in 1 2 3; do <build>/bench/nfs_bench ... > run-$run.log; done
    bench/median_table.py --ratios NGNFS/VFS,NGNFS-wb/MEM run-?.log > table.md
    bench/plot_ratios.py --columns NGNFS/VFS,NGNFS-wb/MEM table.md > plot.svg

Standard library only, like plot_ratios.py.
"""
import argparse
import statistics
import sys


def read_run(path):
    """(header, {(workload, conns): row}) of the last table in one log."""
    header = None
    rows = {}
    in_table = False
    with open(path) as log:
        for line in log:
            fields = line.split()
            if fields[:3] == ["workload", "conns", "unit"]:
                header, rows, in_table = fields, {}, True
            elif in_table and len(fields) == len(header):
                rows[(fields[0], fields[1])] = dict(zip(header, fields))
            else:
                in_table = False  # the table ends at the first other line
    if not header or not rows:
        sys.exit(f"median_table: {path}: no nfs_bench result table")
    return header, rows


def number(text):
    try:
        return float(text)
    except ValueError:
        return None  # "-": the target did not run this workload


def figure(value, ratio):
    if ratio:
        return f"{value:.2f}"
    return f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", help="saved output of nfs_bench runs")
    parser.add_argument("--ratios", help="ratio columns to keep, e.g. NGNFS/VFS,NGNFS-wb/MEM "
                        "(default all)")
    args = parser.parse_args()

    runs = [read_run(path) for path in args.logs]
    header = runs[0][0]
    for path, (other, _) in zip(args.logs, runs):
        if other != header:
            sys.exit(f"median_table: {path}: other targets than {args.logs[0]}")
    columns = header[3:]
    if args.ratios:
        wanted = args.ratios.split(",")
        for name in wanted:
            if name not in columns or "/" not in name:
                sys.exit(f"median_table: no ratio column {name!r} (the runs have "
                         f"{', '.join(c for c in columns if '/' in c)})")
        columns = [c for c in columns if "/" not in c or c in wanted]
    ratios = [c for c in columns if "/" in c]

    print(f"| workload | conns | unit | {' | '.join(columns)} | "
          f"{' | '.join(c + ' range' for c in ratios)} |")
    print("| --- | --- | --- |" + " ---: |" * len(columns) + " --- |" * len(ratios))
    for key, first in runs[0][1].items():
        cells = []
        spreads = []
        for column in columns:
            values = [number(rows[key][column]) for _, rows in runs if key in rows]
            values = [v for v in values if v is not None]
            if not values:
                cells.append("-")
                if column in ratios:
                    spreads.append("-")
                continue
            cells.append(figure(statistics.median(values), column in ratios))
            if column in ratios:
                spreads.append(f"{min(values):.2f}-{max(values):.2f}")
        print(f"| {key[0]} | {key[1]} | {first['unit']} | {' | '.join(cells)} | "
              f"{' | '.join(spreads)} |")


if __name__ == "__main__":
    main()
