#!/usr/bin/env python3
"""Instructions of one probe phase by layer, per unit of work (issue 12's "by layer").

usage: callgrind-layers.py PROFILE UNITS

PROFILE is a callgrind output of `objectgraph-probe` (collection toggled on the phase). Layers
are told apart by the module in each Swift symbol. Reported per unit:

- engine: calls into StrataEngine, inclusive, less the work the engine calls back into
  (a scan's per-row closure belongs to the store);
- store: calls into Strata (StrataStore) from ObjectGraph or the benchmark, inclusive, less
  the engine's share;
- ObjectGraph: the rest of the phase (contexts, objects, the coordinator), with the
  reference counting, allocation and hashing each layer does on its own behalf.
"""
import re
import sys
from collections import defaultdict

if len(sys.argv) != 3:
    sys.exit(__doc__)
path, units = sys.argv[1], int(sys.argv[2])

def module(name):
    if "12StrataEngine" in name:
        return "engine"
    if "6Strata" in name and "11ObjectGraph" not in name.split("6Strata")[0][-3:]:
        # `$s6Strata…` symbols (the module named Strata) and their specialisations.
        if re.search(r"\$s6Strata|\$s6StrataE|s6Strata0A", name):
            return "store"
    if "11ObjectGraph" in name:
        return "objectgraph"
    if "18CompareObjectGraph" in name:
        return "benchmark"
    return "other"

names = {}
def resolve(token):
    match = re.match(r"\((\d+)\)(?:\s+(.*))?", token)
    if not match:
        return token
    key, name = match.group(1), match.group(2)
    if name:
        names[key] = name
    return names.get(key, key)

total = 0
engine_in = 0       # calls entering StrataEngine from any other code, inclusive
engine_out = 0      # calls from StrataEngine back into Strata or ObjectGraph (scan callbacks)
store_in = 0        # calls entering Strata from ObjectGraph or the benchmark
caller = None
callee = None
pending_call = False
with open(path) as file:
    for raw in file:
        line = raw.rstrip("\n")
        if line.startswith("fn="):
            caller = resolve(line[3:])
        elif line.startswith("cfn="):
            callee = resolve(line[4:])
        elif line.startswith("calls="):
            pending_call = True
        elif line.startswith("summary:") or line.startswith("totals:"):
            total = max(total, int(line.split()[1]))
        elif pending_call and line and line[0] in "0123456789+-*":
            pending_call = False
            parts = line.split()
            cost = int(parts[1]) if len(parts) > 1 else 0
            a, b = module(caller or ""), module(callee or "")
            if a == b:
                continue
            if b == "engine":
                engine_in += cost
            elif a == "engine" and b in ("store", "objectgraph"):
                engine_out += cost
            elif b == "store" and a in ("objectgraph", "benchmark"):
                store_in += cost

engine = engine_in - engine_out
store = store_in - engine
objectgraph = total - store_in
# Attribution across generic code is approximate; a share that comes out below zero is zero.
objectgraph = max(0, objectgraph)
for label, cost in [("ObjectGraph", objectgraph), ("store (StrataStore)", store), ("engine (StrataEngine)", engine)]:
    print(f"{label:24} {cost / units:>10,.0f}")
print(f"{'total':24} {total / units:>10,.0f}")
