#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Draw ratio columns of an nfs_bench table as an SVG bar chart.

nfs_bench prints (and docs/performance.md keeps) its results as a
Markdown table; this reads such a table from a file or stdin and draws
the ratio columns named with --columns, one group of bars per
(workload, connections) row, with dashed lines at the targets given with
--target.  Standard library only, so it runs wherever the benchmark does.

    bench/plot_ratios.py --columns wb/MEM,stable/VFS --target 0.9 --target 0.8 \
        --title "NGNFS vs MEM/VFS, run 5" table.md > docs/nfs-ratios.svg
"""
import argparse
import sys
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]


def read_table(lines):
    header = None
    rows = []
    for line in lines:
        line = line.strip()
        if not line.startswith("|"):
            if header and rows:
                break  # the first table only
            continue
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        if header is None:
            header = cells
        elif set("".join(cells)) <= set("-: "):
            continue
        else:
            rows.append(dict(zip(header, cells)))
    if not header:
        sys.exit("plot_ratios: no Markdown table in the input")
    return header, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", nargs="?", help="file holding the table (default stdin)")
    parser.add_argument("--columns", required=True, help="comma-separated ratio columns")
    parser.add_argument("--target", type=float, action="append", default=[])
    parser.add_argument("--title", default="")
    args = parser.parse_args()

    with (open(args.table) if args.table else sys.stdin) as stream:
        header, rows = read_table(stream)
    columns = args.columns.split(",")
    for column in columns:
        if column not in header:
            sys.exit(f"plot_ratios: no column '{column}' (columns: {', '.join(header)})")

    values = []
    for row in rows:
        label = f"{row.get('workload', '?')} x{row.get('conns', '?')}"
        try:
            values.append((label, [float(row[c]) for c in columns]))
        except ValueError:
            continue  # a row without figures (skipped target)
    if not values:
        sys.exit("plot_ratios: no numeric rows")

    top = max([v for _, vs in values for v in vs] + args.target + [1.0]) * 1.1
    bar, gap, left, height, bottom = 12, 14, 50, 260, 90
    group = bar * len(columns) + gap
    width = left + group * len(values) + 20
    scale = height / top
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height + bottom + 40}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">{escape(args.title)}</text>']
    base = height + 30
    step = 0.5 if top <= 3 else 1.0
    tick = 0.0
    while tick <= top:
        y = base - tick * scale
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}</text>')
        tick += step
    for index, (label, vs) in enumerate(values):
        x = left + gap / 2 + index * group
        for ci, v in enumerate(vs):
            h = v * scale
            out.append(f'<rect x="{x + ci * bar:.1f}" y="{base - h:.1f}" width="{bar - 1}" '
                       f'height="{h:.1f}" fill="{COLOURS[ci % len(COLOURS)]}">'
                       f'<title>{escape(label)} {escape(columns[ci])}: {v}</title></rect>')
        cx = x + bar * len(columns) / 2
        out.append(f'<text transform="translate({cx:.1f},{base + 8}) rotate(60)">'
                   f'{escape(label)}</text>')
    for target in args.target:
        y = base - target * scale
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#000" stroke-dasharray="4,3"/>')
        out.append(f'<text x="{width - 12}" y="{y - 3:.1f}" text-anchor="end">target {target:g}</text>')
    for ci, column in enumerate(columns):
        x = left + ci * 110
        y = height + bottom + 30
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{COLOURS[ci % len(COLOURS)]}"/>')
        out.append(f'<text x="{x + 14}" y="{y}">{escape(column)}</text>')
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
