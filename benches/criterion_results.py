"""Reads criterion's results: shared by summary.py (one run) and rounds.py (several)."""
import json
import pathlib


def load(root):
    """Criterion's median of each benchmark's latest run under `root`, in ns per element
    (per iteration when the benchmark declares no throughput), keyed by its full id."""
    results = {}
    for bench in pathlib.Path(root).glob("**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        ns = estimates["median"]["point_estimate"]
        elements = (meta.get("throughput") or {}).get("Elements") or 1
        results[meta["full_id"]] = ns / elements
    return results
