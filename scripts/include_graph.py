#!/usr/bin/env python3
"""The include graph between the folders of compiler/: its edges, the folders that depend on each
other in a cycle, and, given the build's layer table, the includes that go up or sideways.

usage: scripts/include_graph.py [--layers BUILD/layers.txt] [--edges]   (from the repository root)

The build refuses an upward include (cmake/check_layers.cmake); this script measures a tree, for
instance an older commit checked out elsewhere, against the same table.
"""
import argparse
import collections
import os
import re

INCLUDE = re.compile(r'#include "compiler/([a-z_]+)/')


def folder_edges(root):
    edges = collections.defaultdict(collections.Counter)
    for d, _, files in os.walk(os.path.join(root, 'compiler')):
        for f in files:
            if not f.endswith(('.h', '.cc')):
                continue
            path = os.path.join(d, f)
            src = os.path.relpath(path, os.path.join(root, 'compiler')).split(os.sep)[0]
            if src == 'tools':
                continue
            with open(path, errors='ignore') as text:
                for line in text:
                    m = INCLUDE.match(line)
                    if m and m.group(1) != src:
                        edges[src][m.group(1)] += 1
    return edges


def cycles(edges):
    """Tarjan's strongly connected components of more than one folder."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    nodes = set(edges) | {w for targets in edges.values() for w in targets}
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', default='.')
    ap.add_argument('--layers', help="the build's layers.txt: report includes it does not allow")
    ap.add_argument('--edges', action='store_true', help='print every edge with its include count')
    args = ap.parse_args()
    edges = folder_edges(args.root)
    nodes = set(edges) | {w for targets in edges.values() for w in targets}
    print(f'{len(nodes)} folders, {sum(len(t) for t in edges.values())} edges')
    if args.edges:
        for src in sorted(edges):
            for dst, n in sorted(edges[src].items()):
                print(f'  {src} -> {dst} ({n})')
    groups = cycles(edges)
    print('cycles: ' + ('; '.join(' <-> '.join(g) for g in groups) if groups else 'none'))
    if args.layers:
        allowed = {}
        with open(args.layers) as f:
            for line in f:
                name, _, uses = line.partition(':')
                allowed[name.strip()] = set(uses.split())
        upward = [(s, d, n) for s in sorted(edges) for d, n in sorted(edges[s].items())
                  if s in allowed and d not in allowed[s]]
        print(f'includes the layers do not allow: {sum(n for _, _, n in upward)} in {len(upward)} edges')
        for s, d, n in upward:
            print(f'  {s} -> {d} ({n})')


if __name__ == '__main__':
    main()
