"""flowra-otel's cost by instruction counts, against its exact floor and flowra's own tracer.

``./dev bench-093`` (flowra 0.0.93) and ``./dev bench`` (flowra 0.0.8) run this script; it is a
plain script with flags (a nox session or CI can call it the same way):

    python benchmarks/bench.py                         the installed flowra's line, every shape
    python benchmarks/bench.py --shapes support        one shape (modern: support, tool_loop, wide, per_call)
    python benchmarks/bench.py --variants bare,plugin  some variants
    python benchmarks/bench.py --code DIR              count DIR's flowra_otel instead of this tree's (A/B)
    python benchmarks/bench.py --knockouts             the cost of each mechanism of the modern adapter
    python benchmarks/bench.py --profile               a cProfile of bare, floor and plugin instead (ms per run)
    python benchmarks/bench.py --memory 10000          memory over N runs (tracemalloc), plugin beside bare
    python benchmarks/bench.py --save FILE / --merge FILE   write the counts / take the variants not counted from FILE

Each workload (``workloads.py``: data; ``modern_line.py`` / ``old_line.py`` build it) is counted
under valgrind's callgrind, every variant in two processes of its own started together (LOW and
HIGH runs after the same set-up and warm-up): the difference of the two totals over HIGH - LOW
runs is one run's instructions, start-up, imports and warm-up cancelled out; the same code gives
the same count however loaded the machine is. Before counting, one plugin run is recorded and
self-checked (``worker.py capture``): the exact floor's replay and the plugin with
``metrics=False`` must make the very same telemetry, else the benchmark stops with the
differences. Every worker imports one copy of ``flowra_otel`` taken when the command starts.

Variants: ``bare`` (flowra alone), ``floor`` / ``floor_spans`` (the exact floor: the plugin's own
telemetry replayed with the raw SDK, with and without its measurements), ``ext_otel``
(``flowra.ext.otel``, 0.0.9+ only), ``plugin`` (spans, metrics, content as the workload's),
``spans_only`` (``metrics=False``), ``content_off`` (``capture_content=False``), ``untraced`` (the
plugin installed in the process, this runtime not traced). The last line sums every shape up.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import workloads

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKER = HERE / "worker.py"
WARMUP = 5
VARIANTS = {
    "modern": ("bare", "floor", "floor_spans", "ext_otel", "plugin", "spans_only", "content_off", "untraced"),
    "old": ("bare", "floor", "floor_spans", "plugin", "spans_only", "untraced"),
}
SHAPES = {"modern": (*workloads.SHAPES, "per_call"), "old": ("old_tool_loop",)}
LABELS = {
    "bare": "flowra alone",
    "floor": "exact floor: the plugin's spans + measurements replayed, raw SDK",
    "floor_spans": "exact floor, spans only",
    "ext_otel": "flowra.ext.otel, its defaults (steps traced), content as the workload's",
    "plugin": "flowra-otel: spans, metrics, content as the workload's",
    "spans_only": "flowra-otel, metrics=False",
    "content_off": "flowra-otel, capture_content=False",
    "untraced": "flowra-otel installed, this runtime untraced",
}
GOALS = {"plugin/floor": 1.30, "plugin/ext_otel": 1.0, "spans_only/ext_otel": 0.8, "untraced": 0.01, "per_call": 1.2}
OLD_GOAL = 1.10


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def out(message: str = "") -> None:
    print(message, flush=True)


SNAPSHOT: list[Path] = []  # the folder holding this command's copy of flowra_otel


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if SNAPSHOT:
        env["PYTHONPATH"] = str(SNAPSHOT[0])  # before site-packages and the editable install's path
    env["PYTHONHASHSEED"] = "0"  # same dict/set layouts in every worker process
    return env


def snapshot(folder: Path, source: Path = ROOT) -> str:
    """Copy ``source``'s ``flowra_otel`` into ``folder``; every worker imports that copy. Returns
    what identifies the code: the commit, and a digest of the copied sources."""
    shutil.copytree(source / "flowra_otel", folder / "flowra_otel", ignore=shutil.ignore_patterns("__pycache__"))
    SNAPSHOT.append(folder)
    digest = hashlib.sha256()
    for path in sorted((folder / "flowra_otel").rglob("*.py")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    git = ["git", "-C", str(source)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run([*git, "status", "--porcelain", "flowra_otel"], capture_output=True, text=True, check=False)
    state = " + uncommitted changes" if dirty.stdout.strip() else ""
    where = "" if source == ROOT else f"{source}, "
    return f"{where}commit {commit.stdout.strip() or '?'}{state}; flowra_otel sources sha256 {digest.hexdigest()[:12]}"


def run_worker(args: Sequence[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(WORKER), *args], capture_output=True, text=True, env=_env(), check=False, timeout=7200
    )
    if proc.returncode != 0:
        raise SystemExit(f"worker.py {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-6000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def callgrind(args: Sequence[str]) -> subprocess.Popen[str]:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, str(WORKER), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


def collected(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    stdout, stderr = proc.communicate()
    total = None
    for line in stderr.splitlines():
        if "Collected :" in line:
            total = int(line.rsplit(":", 1)[1].strip())
    if proc.returncode != 0 or total is None:
        raise SystemExit(f"callgrind run failed (exit {proc.returncode}): {stderr[-3000:]}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    info: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    return total, info


def count(
    workload: str, variants: Sequence[str], runs: tuple[int, int], warmup: int, plan: Path | None
) -> dict[str, Any]:
    """Instructions per run of each variant: its two processes (LOW and HIGH runs) started
    together, one variant after the other. A variant ``plugin-no-X`` is the plugin with the
    mechanism X switched off (``knockouts.py``)."""
    per_run: dict[str, float] = {}
    spans: dict[str, float | None] = {}
    low, high = runs
    for variant in variants:
        started = time.perf_counter()
        base, _, knockout = variant.partition("-no-")
        args = ["runs", "--workload", workload, "--variant", base, "--warmup", str(warmup)]
        if knockout:
            args += [f"--knockout={k}" for k in knockout.split("+")]
        if plan is not None:
            args += ["--plan", str(plan)]
        procs = [callgrind([*args, "--runs", str(n)]) for n in runs]
        (a, info), (b, _) = (collected(p) for p in procs)
        where = info.get("flowra_otel")
        if where is not None and SNAPSHOT and not where.startswith(str(SNAPSHOT[0])):
            raise SystemExit(f"{variant} imported flowra_otel from {where}, not the snapshot")
        per_run[variant] = (b - a) / (high - low)
        spans[variant] = info.get("spans_per_run")
        log(f"  {workload} {variant}: {per_run[variant] / 1e6:.2f} M per run ({time.perf_counter() - started:.0f}s)")
    return {"per_run": per_run, "spans": spans}


def capture(workload: str, folder: Path) -> tuple[Path, dict[str, Any]]:
    path = folder / f"plan-{workload}.pickle"
    info = run_worker(["capture", "--workload", workload, "--out", str(path)])
    return path, info


# ------------------------------------------------------------------------------------------ report


def over(per_run: dict[str, float], name: str) -> float:
    return per_run[name] - per_run["bare"] if name in per_run and "bare" in per_run else float("nan")


def ratio(per_run: dict[str, float], a: str, b: str) -> float:
    below = over(per_run, b)
    return over(per_run, a) / below if below > 0 else float("nan")


def verdict(value: float, goal: float) -> str:
    return "met" if value <= goal else "MISSED"


def report_shape(workload: workloads.Workload, info: dict[str, Any], result: dict[str, Any], line: str) -> str:
    """The shape's table and its ratios; returns its part of the summary line."""
    per_run: dict[str, float] = result["per_run"]
    spans: dict[str, float | None] = result["spans"]
    out(f"== {workload.name}: {workload.title}")
    if info:
        out(
            f"   per run: {info['spans']} spans, {info['attributes']} attributes ({info['string_chars']} characters of "
            f"strings), {info['measurements']} measurements into {info['data_points']} data points; self-check: the "
            "floor's replay (with and without measurements) and the plugin with metrics=False make exactly the "
            "plugin's telemetry"
        )
    out(f"   {'variant':<22}{'per run':>11}{'over bare':>12}{'spans':>7}  what")
    for variant, value in per_run.items():
        extra = over(per_run, variant)
        n = spans.get(variant)
        base = variant.partition("-no-")[0]
        label = LABELS.get(base, base) + (f", {variant.partition('-no-')[2]} switched off" if "-no-" in variant else "")
        out(
            f"   {variant:<22}{value / 1e6:9.2f} M"
            f"{(f'{extra / 1e6:+9.2f} M' if variant != 'bare' else ''):>12}{(f'{n:.0f}' if n else '-'):>7}  {label}"
        )
    parts = []
    lines = []
    if line == "old" and "plugin" in per_run and "floor" in per_run:
        r = ratio(per_run, "plugin", "floor")
        lines.append(f"plugin / floor {r:.3f}x (goal <= {OLD_GOAL}: {verdict(r, OLD_GOAL)})")
        parts.append(f"plugin/floor={r:.2f}x")
    else:
        pairs = (
            ("plugin", "floor", "plugin/floor"),
            ("plugin", "ext_otel", "plugin/ext_otel"),
            ("spans_only", "floor_spans", "spans_only/floor_spans"),
            ("spans_only", "ext_otel", "spans_only/ext_otel"),
            ("content_off", "ext_otel", "content_off/ext_otel"),
        )
        for a, b, key in pairs:
            if a in per_run and b in per_run:
                r = ratio(per_run, a, b)
                goal = GOALS.get(key)
                lines.append(f"{key} {r:.3f}x" + (f" (goal <= {goal}: {verdict(r, goal)})" if goal else ""))
                parts.append(f"{key}={r:.2f}x")
    if line == "old" and "spans_only" in per_run and "floor_spans" in per_run:
        r = ratio(per_run, "spans_only", "floor_spans")
        lines.append(f"spans_only / floor_spans {r:.3f}x")
        parts.append(f"spans_only/floor_spans={r:.2f}x")
    if "untraced" in per_run and "bare" in per_run:
        u = per_run["untraced"] / per_run["bare"] - 1
        lines.append(f"untraced {u * 100:+.2f}% (goal <= +1%: {verdict(u, GOALS['untraced'])})")
        parts.append(f"untraced={u * 100:+.2f}%")
    lines += knockout_lines(per_run)
    for text in lines:
        out(f"   {text}")
    summary = f"{workload.name} " + " ".join(parts)
    out(f"   {summary}")
    out()
    return summary


def knockout_lines(per_run: dict[str, float]) -> list[str]:
    """Each mechanism's cost per run: the plugin minus the plugin with it switched off, and beside
    it the floor's share of the telemetry the knockout drops (``floor-no-X``, when counted)."""
    lines = []
    plugin = per_run.get("plugin")
    for variant, value in per_run.items():
        base, _, name = variant.partition("-no-")
        if base != "plugin" or not name or plugin is None:
            continue
        text = f"{name}: {(plugin - value) / 1e6:+.2f} M per run"
        floor, without = per_run.get("floor"), per_run.get(f"floor-no-{name}")
        if floor is not None and without is not None:
            text += f" (the floor's share of the telemetry it drops: {(floor - without) / 1e6:+.2f} M)"
        lines.append(text)
    return lines


def report_per_call(results: dict[int, dict[str, float]]) -> str:
    """Per-LLM-call plugin overhead of a short and a long tool loop (content on)."""
    short, long = workloads.PER_CALL
    out(f"== per_call: the plugin's overhead per LLM call, a {short}-call against a {long}-call tool loop")
    per_call: dict[int, float] = {}
    for n in (short, long):
        per_run = results[n]
        calls = workloads.tool_loop(n).llm_calls()
        per_call[n] = over(per_run, "plugin") / calls
        out(
            f"   tool_loop{n}: bare {per_run['bare'] / 1e6:.2f} M, plugin {per_run['plugin'] / 1e6:.2f} M per run: "
            f"{over(per_run, 'plugin') / 1e6:+.2f} M over {calls} LLM calls = {per_call[n] / 1e3:.1f} K per call"
        )
    r = per_call[long] / per_call[short]
    marginal = (over(results[long], "plugin") - over(results[short], "plugin")) / (long - short)
    out(
        f"   per call, {long} against {short}: {r:.3f}x "
        f"(goal <= {GOALS['per_call']}: {verdict(r, GOALS['per_call'])}); "
        f"each call beyond the {short + 1}th: {marginal / 1e3:.1f} K ({marginal / per_call[short]:.3f}x)"
    )
    out()
    return f"per_call {long}/{short}={r:.2f}x"


def report_profile(workload: str, plan: Path, runs: int) -> None:
    out(f"== {workload}: cProfile, ms per run over {runs} runs (cProfile inflates everything: compare the columns)")
    results = {
        v: run_worker(["profile", "--workload", workload, "--variant", v, "--runs", str(runs), "--plan", str(plan)])
        for v in ("bare", "floor", "plugin")
    }
    packages = sorted(
        {p for r in results.values() for p in r["by_package_ms_per_run"]},
        key=lambda p: -results["plugin"]["by_package_ms_per_run"].get(p, 0.0),
    )
    out(f"   {'self time by package':<30}" + "".join(f"{v:>10}" for v in results))
    for package in packages:
        out(
            f"   {package:<30}"
            + "".join(f"{r['by_package_ms_per_run'].get(package, 0.0):10.2f}" for r in results.values())
        )
    out(f"   {'total':<30}" + "".join(f"{r['profiled_ms_per_run']:10.2f}" for r in results.values()))
    plugin = results["plugin"]
    out(f"   flowra_otel: {plugin['plugin_calls_per_run']:.0f} Python calls per run")
    for title, key in (("by self time", "plugin_by_self"), ("by cumulative time", "plugin_by_cum")):
        out(f"   flowra_otel functions, {title}:")
        for row in plugin[key][:20]:
            out(f"     self {row['self_ms']:6.3f}  cum {row['cum_ms']:7.3f}  calls {row['calls']:6.1f}  {row['where']}")
    out()


def report_memory(workload: str, runs: int, warmup: int) -> None:
    """tracemalloc over ``runs`` runs of the plugin and of bare flowra, two processes side by side."""
    out(
        f"== {workload}: memory over {runs} runs after {warmup} warm-up runs "
        "(tracemalloc; flush + gc at each checkpoint)"
    )
    jobs = {
        v: subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "memory",
                "--workload",
                workload,
                "--variant",
                v,
                "--runs",
                str(runs),
                "--warmup",
                str(warmup),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for v in ("plugin", "bare")
    }
    results = {}
    for variant, proc in jobs.items():
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"memory {variant} failed: {stderr[-3000:]}")
        results[variant] = json.loads(stdout.strip().splitlines()[-1])
    for variant, r in results.items():
        marks, sizes, objects = r["marks"], r["traced_bytes"], r["live_objects"]
        quarters = [
            i
            for i in range(len(marks))
            if i in (0, len(marks) // 4, len(marks) // 2, 3 * len(marks) // 4, len(marks) - 1)
        ]
        steps = ", ".join(
            f"{marks[i]:.0f}: {(sizes[i] - sizes[0]) / 1024:+.1f} KiB / {objects[i] - objects[0]:+.0f} objects"
            for i in quarters
        )
        top = "; ".join(f"{t['where']} {t['bytes']:+d} B" for t in r["top_growth"][:3])
        out(f"   {variant:<7} {r['slope_bytes_per_run']:+8.2f} B/run ({r['seconds']:.0f}s); after N runs: {steps}")
        out(f"           grows at: {top}")
    diff = results["plugin"]["slope_bytes_per_run"] - results["bare"]["slope_bytes_per_run"]
    out(f"   plugin - bare = {diff:+.2f} B/run (one leaked span alone is > 1 KiB)")
    out(f"   memory {workload}: plugin_minus_bare={diff:+.2f}B/run")
    out()


# ------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--line", choices=("modern", "old"), help="default: the installed flowra's line")
    parser.add_argument("--shapes", help="comma-separated (default: every shape of the line)")
    parser.add_argument("--variants", help="comma-separated (default: every variant of the line)")
    parser.add_argument("--runs", help="LOW,HIGH runs per process (default: the workload's)")
    parser.add_argument("--warmup", type=int, default=WARMUP, help="runs before the counted ones (default 5)")
    parser.add_argument("--code", help="a folder whose flowra_otel is counted (default: this tree's), for A/B")
    parser.add_argument("--knockouts", nargs="?", const="all", help="the plugin with each mechanism switched off")
    parser.add_argument("--profile", action="store_true", help="a cProfile of bare, floor and plugin instead")
    parser.add_argument("--memory", type=int, metavar="N", help="memory over N runs instead (tracemalloc)")
    parser.add_argument("--save", help="also write the counts to this JSON file")
    parser.add_argument("--merge", help="a --save file: the variants not counted now are taken from it")
    args = parser.parse_args(argv)
    flowra = importlib.metadata.version("flowra")
    line = args.line or ("old" if tuple(int(p) for p in flowra.split(".")) <= (0, 0, 8) else "modern")
    shapes = [s.strip() for s in (args.shapes or ",".join(SHAPES[line])).split(",") if s.strip()]
    unknown = sorted(set(shapes) - set(SHAPES[line]))
    if unknown:
        parser.error(f"unknown shapes {unknown} for the {line} line (known: {', '.join(SHAPES[line])})")
    variants = [v.strip() for v in (args.variants or ",".join(VARIANTS[line])).split(",") if v.strip()]
    if args.knockouts:
        import knockouts

        names = list(knockouts.KNOCKOUTS) if args.knockouts == "all" else args.knockouts.split(",")
        variants = ["bare", "plugin", *(f"plugin-no-{k}" for k in names)] if not args.variants else variants
    bad = sorted({v.partition("-no-")[0] for v in variants} - set(VARIANTS[line]))
    if bad:
        parser.error(f"unknown variants {bad} (known: {', '.join(VARIANTS[line])})")
    started = time.perf_counter()
    out(f"flowra-otel, by instruction counts (callgrind), the {line} line: flowra {flowra}")
    out(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
        f"opentelemetry-sdk {importlib.metadata.version('opentelemetry-sdk')}"
    )
    saved: dict[str, Any] = {}
    earlier = json.loads(Path(args.merge).read_text()) if args.merge else {}
    summary: list[str] = []
    with tempfile.TemporaryDirectory(prefix="flowra-otel-bench-") as tmp:
        folder = Path(tmp)
        out(f"flowra-otel code: {snapshot(folder / 'code', Path(args.code).resolve() if args.code else ROOT)}")
        out()
        if args.memory:
            for shape in shapes:
                report_memory(shape if shape != "per_call" else "tool_loop", args.memory, 500)
            out(f"({time.perf_counter() - started:.0f}s)")
            return 0
        if not args.profile and shutil.which("valgrind") is None:
            out("valgrind is not installed here (its callgrind tool counts the instructions)")
            return 1
        for shape in shapes:
            if shape == "per_call":
                results: dict[int, dict[str, float]] = {}
                for n in workloads.PER_CALL:
                    name = f"tool_loop{n}"
                    runs = _runs(args.runs, workloads.named(name))
                    counted = count(name, ["bare", "plugin"], runs, args.warmup, None)
                    saved[name] = counted
                    results[n] = counted["per_run"]
                summary.append(report_per_call(results))
                continue
            workload = workloads.named(shape)
            plan, info = capture(shape, folder)
            if args.profile:
                report_profile(shape, plan, 50)
                continue
            todo = [v for v in variants if v not in earlier.get(shape, {}).get("per_run", {})] if earlier else variants
            counted = count(shape, todo, _runs(args.runs, workload), args.warmup, plan)
            if earlier.get(shape):
                for key in ("per_run", "spans"):
                    counted[key] = {v: counted[key].get(v, earlier[shape][key].get(v)) for v in variants}
            saved[shape] = {**counted, "info": info}
            summary.append(report_shape(workload, info, counted, line))
    if args.save:
        Path(args.save).write_text(json.dumps(saved, indent=1))
    out(f"({time.perf_counter() - started:.0f}s)")
    if summary:
        out("instructions: " + " | ".join(summary))
    return 0


def _runs(text: str | None, workload: workloads.Workload) -> tuple[int, int]:
    low, high = (int(x) for x in text.split(",")) if text else workload.runs
    if not 0 <= low < high:
        raise SystemExit("--runs LOW,HIGH with 0 <= LOW < HIGH")
    return low, high


if __name__ == "__main__":
    sys.exit(main())
