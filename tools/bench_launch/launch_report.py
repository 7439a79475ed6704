"""Tables of tools/bench_launch/bench_launch.py: summaries, targets, the report."""

import os
import statistics
import subprocess
import sys

WORKERS_PER_NODE = 2
LAUNCH_TARGET_X = 5.0
RESTART_TARGET_X = 10.0


def summary(values):
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}  # fmt: skip


def fmt(s):
    if s is None:
        return "failed"
    return f"{s['median']:.3f} [{s['min']:.3f}-{s['max']:.3f}]"


def summarize(results, nodes_list, variants, systems=("torchrun", "ddp-client")):
    rows = []
    for variant in variants:
        for nodes in nodes_list:
            for metric, target in (("launch", LAUNCH_TARGET_X), ("restart", RESTART_TARGET_X)):
                row = {"variant": variant, "nodes": nodes, "metric": metric, "target_x": target}
                for system in systems:
                    ok = [r for r in results if r["system"] == system and r["nodes"] == nodes
                          and r["variant"] == variant and "error" not in r]  # fmt: skip
                    row[system] = summary([r[f"{metric}_s"] for r in ok])
                    row[f"{system}_failed"] = sum(
                        1 for r in results if r["system"] == system and r["nodes"] == nodes
                        and r["variant"] == variant and "error" in r)  # fmt: skip
                row["systems"] = list(systems)
                for system in systems:
                    if system != "torchrun" and row.get("torchrun") and row[system]:
                        row[f"{system}_x"] = row["torchrun"]["median"] / row[system]["median"]
                best = [row[f"{s}_x"] for s in systems if f"{s}_x" in row]
                if best:
                    row["speedup_x"] = max(best)
                    row["met"] = row["speedup_x"] >= target
                rows.append(row)
    return rows


def print_report(results, rows, machine, settings):
    print(f"machine: {machine['nproc']} cores, {machine['cpu']}; {machine['python']}")
    print(f"settings: {settings}")
    print()
    systems = rows[0]["systems"] if rows else []
    header = f"{'variant':7} {'nodes':>5} {'metric':8}" + "".join(
        f" {s + ' s, median [min-max]':>30}" for s in systems) + "".join(
        f" {s + ' x':>15}" for s in systems if s != "torchrun") + f" {'target':>7}  verdict"
    print(header)
    print("-" * len(header))
    for r in rows:
        verdict = ("met" if r.get("met") else "MISSED") if "met" in r else "n/a"
        fails = sum(r[f"{s}_failed"] for s in systems)
        note = f" ({fails} failed trials)" if fails else ""
        cells = "".join(f" {fmt(r[s]):>30}" for s in systems)
        speeds = "".join(f" {format(r[s + '_x'], '.1f') + 'x' if s + '_x' in r else 'n/a':>15}"
                         for s in systems if s != "torchrun")
        print(f"{r['variant']:7} {str(r['nodes']) + 'x2':>5} {r['metric']:8}{cells}{speeds} "
              f"{'>=' + format(r['target_x'], '.0f') + 'x':>7}  {verdict}{note}")  # fmt: skip
    for nodes in sorted({r["nodes"] for r in results}):
        floor = summary([r["floor_s"] for r in results if r.get("floor_s") is not None
                         and r["nodes"] == nodes])  # fmt: skip
        if floor:
            print(f"floor, {nodes * WORKERS_PER_NODE} plain workers started directly by Popen "
                  f"(no launcher): {fmt(floor)} s")  # fmt: skip
    coord = summary([r["coordinator_start_s"] for r in results if "coordinator_start_s" in r])
    print()
    print(f"coordinator start (not counted above; exec until its port file exists): {fmt(coord)} s")
    print()
    print("ddp-client, where the time goes (median seconds, cumulative, latest agent):")
    for variant, nodes, system in sorted({(r["variant"], r["nodes"], r["system"]) for r in results
                                          if "phases" in r}):  # fmt: skip
            ok = [r for r in results if r["system"] == system and "phases" in r
                  and r["variant"] == variant and r["nodes"] == nodes]  # fmt: skip
            for phase in [p for p in ("launch", "restart", "recovery") if p in ok[0]["phases"]]:
                keys = ok[0]["phases"][phase].keys()
                parts = []
                for k in keys:
                    vals = [r["phases"][phase][k] for r in ok if r["phases"][phase][k] is not None]
                    parts.append(f"{k[:-2]} {statistics.median(vals):.3f}" if vals else f"{k} ?")
                print(f"  {system:11} {variant:5} {nodes}x2 {phase:8}: " + ", ".join(parts))
    print()
    print("TORCHELASTIC_RESTART_COUNT seen by the workers of the second generation:")
    for system in sorted({r["system"] for r in results if r["system"] != "floor"}):
        seen = {}
        for r in results:
            if r["system"] == system:
                for c, k in r.get("gen1_restart_counts", {}).items():
                    seen[c] = seen.get(c, 0) + k
        print(f"  {system}: " + ", ".join(f"{k} workers saw {c}" for c, k in seen.items()))
    for r in results:
        if "error" in r:
            print(f"FAILED {r['system']} {r['nodes']}x2 {r['variant']} #{r['trial']}: "
                  f"{r['error']} (logs: {r['logs']})")  # fmt: skip


def machine_info():
    model = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "python": sys.version.split()[0]}
