"""flowra-otel on flowra 0.0.93, head to head, by instruction counts: ``./dev bench-093``.

Two workloads (``--workload``), counted under valgrind's callgrind, every variant in processes of
its own (``modern_worker.py``):

* ``support`` (the default; ``support_workload.py``): a support ``ChatAgent`` whose zero-latency
  scripted model asks for three tools at once (a plain function, a coroutine, and a custom agent
  used as a tool that asks its own model through ``LLMCaller``), then two at once, then the agent
  tool alone, then answers (6 LLM calls, 15 spans, 35 metric records per run); one app hook on
  ``AfterToolCallEvent``; content capture on. ``--iterations N`` repeats the three requests N
  times (more calls, more parallel tools, more sub-agents per run).
* ``tool_loop`` (``modern_workload.py``, the workload of ``run.py``): a ``TurnAgent`` asking for
  one trivial tool 20 times, then answering; content capture off.

Variants:

* ``bare``              flowra 0.0.93 alone;
* ``floor``             the in-situ SDK floor: plain ``runtime.hooks`` handlers making the plugin's
                        very spans (attributes, content included) and metric records with the raw
                        SDK (``modern_floor.py``); ``floor_spans`` the same without metric records;
* ``ext_otel``          flowra's own tracer, ``flowra.ext.otel`` (its defaults: agent, step, LLM and
                        tool spans, no metrics; content capture as the workload's); ``ext_otel_nosteps``
                        with ``trace_steps=False`` (tool_loop only, by default);
* ``plugin``            ``OtelHooks(...).install(runtime)``, content capture as the workload's: spans
                        and metrics; ``spans_only`` the same with ``metrics=False``;
                        ``content_off`` with ``capture_content=False``;
* ``untraced``          the plugin installed in the process (emit patch, a traced runtime beside),
                        this runtime without it.

Each variant runs twice (``--runs`` LOW and HIGH runs after the same set-up and warm-up), the
two processes started together; the difference of the two totals over HIGH - LOW runs is one
run's instructions, start-up, imports and warm-up cancelled out. The same code gives the same
count however loaded the machine is. Every worker imports one copy of ``flowra_otel`` taken when
the command starts (``PYTHONPATH``), so edits made to the tree during a long count do not mix in.

    ./dev bench-093                          the support workload, every variant (~6 min quiet)
    ./dev bench-093 --workload tool_loop     the 20-tool loop (~25 min on a quiet 2-core machine)
    ./dev bench-093 --variants bare,plugin   some of them
    ./dev bench-093 --profile                a cProfile of bare, floor and plugin instead (ms per run)
    ./dev bench-093 --variants plugin --merge earlier.json   count some, take the rest from a --save
    ./dev bench-093 --code DIR               count DIR's flowra_otel instead of this tree's (A/B)

The last line sums it up: ``overhead_vs_floor`` = (plugin - bare) / (floor - bare) per run (the
same per span: both make the same spans), ``vs_ext_otel`` = the plugin's overhead over
``ext_otel``'s, ``untraced`` over bare.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKER = HERE / "modern_worker.py"
VARIANTS = (
    "bare",
    "floor",
    "floor_spans",
    "flowing_context",
    "ext_otel",
    "ext_otel_nosteps",
    "plugin",
    "spans_only",
    "content_off",
    "untraced",
)
DEFAULT_VARIANTS = {
    "support": ("bare", "floor", "floor_spans", "ext_otel", "plugin", "spans_only", "content_off", "untraced"),
    "tool_loop": tuple(v for v in VARIANTS if v != "content_off"),
}
TITLES = {
    "support": "a support ChatAgent (3 tools at once, 2 at once, an agent as a tool with its own LLMCaller call, "
    "an app hook), content capture on",
    "tool_loop": "zero-latency scripted TurnAgent, 20 tool calls per run, content capture off",
}
LABELS = {
    "bare": "flowra alone",
    "floor": "floor: plain handlers, the plugin's spans + metric records, raw SDK",
    "floor_spans": "floor, spans only",
    "flowing_context": "a context made current in every node's steps (FlowingVar), nothing else",
    "ext_otel": "flowra.ext.otel, its defaults (steps traced)",
    "ext_otel_nosteps": "flowra.ext.otel, trace_steps=False",
    "plugin": "flowra-otel: OtelHooks(...).install(runtime), spans and metrics",
    "spans_only": "flowra-otel, metrics=False",
    "content_off": "flowra-otel, capture_content=False (spans and metrics)",
    "untraced": "flowra-otel installed, this runtime untraced",
}
WARMUP = 5
RUNS = {"support": (3, 23), "tool_loop": (4, 24)}
WORKLOAD: list[str] = []  # the workload of this command (--workload), then --iterations N if given


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
    """Copy ``source``'s ``flowra_otel`` (the working tree's) into ``folder``; every worker imports
    that copy. Returns what identifies the code: the commit, and a digest of the copied sources."""
    shutil.copytree(source / "flowra_otel", folder / "flowra_otel", ignore=shutil.ignore_patterns("__pycache__"))
    SNAPSHOT.append(folder)
    digest = hashlib.sha256()
    for path in sorted((folder / "flowra_otel").rglob("*.py")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run([*git, "status", "--porcelain", "flowra_otel"], capture_output=True, text=True, check=False)
    state = " + uncommitted changes" if dirty.stdout.strip() else ""
    where = "" if source == ROOT else f"{source}, beside "
    return f"{where}commit {commit.stdout.strip() or '?'}{state}; flowra_otel sources sha256 {digest.hexdigest()[:12]}"


def run_worker(args: Sequence[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(WORKER), *args, "--workload", *WORKLOAD],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"modern_worker.py {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def callgrind(variant: str, runs: int, warmup: int, plan: Path) -> subprocess.Popen[str]:
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(WORKER),
        "runs",
        "--variant",
        variant,
        "--plan",
        str(plan),
        "--runs",
        str(runs),
        "--warmup",
        str(warmup),
        "--workload",
        *WORKLOAD,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


def collected(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    stdout, stderr = proc.communicate()
    total = None
    for line in stderr.splitlines():
        if "Collected :" in line:
            total = int(line.rsplit(":", 1)[1].strip())
    if proc.returncode != 0 or total is None:
        raise RuntimeError(f"callgrind run failed (exit {proc.returncode}): {stderr[-2000:]}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    info: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    return total, info


def count(variants: Sequence[str], runs: tuple[int, int], warmup: int, plan: Path) -> dict[str, Any]:
    """Instructions per run of each variant: its two processes (LOW and HIGH runs) started
    together, one variant after the other."""
    totals: dict[tuple[str, int], int] = {}
    spans: dict[str, float | None] = {}
    for variant in variants:
        started = time.perf_counter()
        log(f"  callgrind: {variant}, {runs[0]} and {runs[1]} runs")
        procs = [(n, callgrind(variant, n, warmup, plan)) for n in runs]
        for n, proc in procs:
            totals[(variant, n)], info = collected(proc)
            spans[variant] = info.get("spans_per_run")
            where = info.get("flowra_otel")
            if where is not None and SNAPSHOT and not where.startswith(str(SNAPSHOT[0])):
                raise RuntimeError(f"{variant} imported flowra_otel from {where}, not the snapshot")
        log(
            f"  done: {variant}: {totals[(variant, runs[0])] / 1e9:.3f} G and {totals[(variant, runs[1])] / 1e9:.3f} G "
            f"({time.perf_counter() - started:.0f}s)"
        )
    low, high = runs
    per_run = {v: (totals[(v, high)] - totals[(v, low)]) / (high - low) for v in variants}
    return {"per_run": per_run, "spans": spans, "totals": {f"{v}:{n}": t for (v, n), t in totals.items()}}


def pct(x: float) -> str:
    return f"{x * 100:+.2f}%"


def report(result: dict[str, Any]) -> None:
    per_run: dict[str, float] = result["per_run"]
    spans: dict[str, float | None] = result["spans"]
    bare = per_run.get("bare")
    out("Instructions per run (callgrind; the same code gives the same count on any load):")
    out(f"  {'variant':<18}{'per run':>12}{'over bare':>13}{'spans':>7}{'per span':>11}  what")
    for variant, count_ in per_run.items():
        extra = count_ - bare if bare is not None and variant != "bare" else None
        n = spans.get(variant)
        per_span = f"{extra / n / 1e3:9.1f} K" if extra is not None and n else ""
        over_text = f"{extra / 1e6:+8.2f} M" if extra is not None else ""
        out(
            f"  {variant:<18}{count_ / 1e6:10.2f} M{over_text:>13}{(f'{n:.0f}' if n else '-'):>7}{per_span:>11}  "
            f"{LABELS[variant]}"
        )
    out()
    if bare is None:
        return

    def over(name: str) -> float:
        return per_run[name] - bare if name in per_run else float("nan")

    def ratio(a: str, b: str) -> float:
        return over(a) / over(b) if b in per_run and over(b) > 0 else float("nan")

    parts = []
    n_spans = spans.get("plugin") or spans.get("spans_only") or 42
    if "plugin" in per_run and "floor" in per_run:
        out(
            f"  plugin overhead / floor overhead: {ratio('plugin', 'floor'):.3f}x per run and per span "
            f"(plugin {over('plugin') / 1e6:+.2f} M, floor {over('floor') / 1e6:+.2f} M per run; "
            f"{over('plugin') / n_spans / 1e3:.1f} K against {over('floor') / n_spans / 1e3:.1f} K per span); "
            "goal <= 1.10x"
        )
        parts.append(f"overhead_vs_floor={ratio('plugin', 'floor'):.2f}x")
    if "spans_only" in per_run and "floor_spans" in per_run:
        out(f"  spans only: plugin / floor overheads {ratio('spans_only', 'floor_spans'):.3f}x; goal <= 1.10x")
        parts.append(f"spans_only_vs_floor={ratio('spans_only', 'floor_spans'):.2f}x")
    for ext in ("ext_otel", "ext_otel_nosteps"):
        if ext in per_run and "plugin" in per_run:
            line = (
                f"  overheads against {ext}'s ({over(ext) / 1e6:+.2f} M): plugin {ratio('plugin', ext):.3f}x "
                f"(goal <= 1.0)"
            )
            parts.append(f"vs_{ext}={ratio('plugin', ext):.2f}x")
            if "spans_only" in per_run:
                line += f", spans only {ratio('spans_only', ext):.3f}x (goal <= 0.8)"
                parts.append(f"spans_only_vs_{ext}={ratio('spans_only', ext):.2f}x")
            if "content_off" in per_run:
                line += f", content off {ratio('content_off', ext):.3f}x"
                parts.append(f"content_off_vs_{ext}={ratio('content_off', ext):.2f}x")
            out(line)
    if "untraced" in per_run:
        out(f"  untraced: {pct(per_run['untraced'] / bare - 1)} over bare; goal <= +1%")
        parts.append(f"untraced={pct(per_run['untraced'] / bare - 1)}")
    if "plugin" in per_run:
        parts.append(f"plugin_per_span={over('plugin') / n_spans / 1e3:.1f}K")
    if "floor" in per_run:
        parts.append(f"floor_per_span={over('floor') / n_spans / 1e3:.1f}K")
    out()
    out("instructions: " + " ".join(parts))


def report_profile(plan: Path, runs: int) -> None:
    out(f"cProfile, ms per run over {runs} runs (cProfile inflates everything: compare the columns):")
    results = {
        v: run_worker(["profile", "--variant", v, "--runs", str(runs), "--plan", str(plan)])
        for v in ("bare", "floor", "plugin")
    }
    packages = sorted(
        {p for r in results.values() for p in r["by_package_ms_per_run"]},
        key=lambda p: -results["plugin"]["by_package_ms_per_run"].get(p, 0.0),
    )
    out(f"  {'self time by package':<30}" + "".join(f"{v:>10}" for v in results))
    for package in packages:
        out(
            f"  {package:<30}"
            + "".join(f"{r['by_package_ms_per_run'].get(package, 0.0):10.2f}" for r in results.values())
        )
    out(f"  {'total':<30}" + "".join(f"{r['profiled_ms_per_run']:10.2f}" for r in results.values()))
    plugin = results["plugin"]
    out(f"  flowra_otel: {plugin['plugin_calls_per_run']:.0f} Python calls per run")
    for title, key in (("by self time (tottime)", "plugin_by_self"), ("by cumulative time (cumtime)", "plugin_by_cum")):
        out(f"  flowra_otel functions, {title}:")
        for row in plugin[key][:20]:
            out(f"    self {row['self_ms']:6.3f}  cum {row['cum_ms']:7.3f}  calls {row['calls']:6.1f}  {row['where']}")
    out()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--workload", choices=tuple(RUNS), default="support", help="support (default) or tool_loop (the old one)"
    )
    parser.add_argument(
        "--iterations", type=int, help="rounds of the support workload (default 1), tool calls of tool_loop"
    )
    parser.add_argument("--variants", help="comma-separated (default: the workload's set)")
    parser.add_argument("--runs", help="LOW,HIGH runs per process (default 3,23 support, 4,24 tool_loop)")
    parser.add_argument("--warmup", type=int, default=WARMUP, help="runs before the counted ones (default 5)")
    parser.add_argument("--merge", help="a --save file: the variants not counted now are taken from it")
    parser.add_argument("--code", help="a folder whose flowra_otel is counted (default: this tree's), for A/B")
    parser.add_argument("--profile", action="store_true", help="a cProfile of bare, floor and plugin instead")
    parser.add_argument("--save", help="also write the counts to this JSON file")
    args = parser.parse_args(argv)
    WORKLOAD.append(args.workload)
    if args.iterations:
        WORKLOAD.extend(("--iterations", str(args.iterations)))
    variants = [v.strip() for v in (args.variants or ",".join(DEFAULT_VARIANTS[args.workload])).split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown} (known: {', '.join(VARIANTS)})")
    low, high = (int(x) for x in args.runs.split(",")) if args.runs else RUNS[args.workload]
    if not 0 <= low < high:
        parser.error("--runs LOW,HIGH with 0 <= LOW < HIGH")
    started = time.perf_counter()
    out(f"flowra-otel on flowra 0.0.93, by instruction counts: {TITLES[args.workload]}")
    out(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
        f"flowra {importlib.metadata.version('flowra')}, opentelemetry-sdk "
        f"{importlib.metadata.version('opentelemetry-sdk')}, flowra-otel {importlib.metadata.version('flowra-otel')}"
    )
    with tempfile.TemporaryDirectory(prefix="flowra-otel-bench-093-") as tmp:
        code = snapshot(Path(tmp) / "code", Path(args.code).resolve() if args.code else ROOT)
        out(f"flowra-otel code: {code}")
        plan = Path(tmp) / "plan.pickle"
        info = run_worker(["capture", "--out", str(plan)])
        out(
            f"captured one plugin run: {info['spans']} spans, {info['metric_records']} metric records, "
            f"hook points with work (or counted): {info['hook_points']}"
        )
        if args.profile:
            report_profile(plan, 100)
            out(f"({time.perf_counter() - started:.0f}s)")
            return 0
        if shutil.which("valgrind") is None:
            out("valgrind is not installed here (its callgrind tool counts the instructions)")
            return 1
        out(
            f"each variant: {low} and {high} runs after {args.warmup} warm-up runs, two processes of its own "
            "started together"
        )
        out()
        result = count(variants, (low, high), args.warmup, plan)
        result["code"] = code
    if args.merge:
        earlier = json.loads(Path(args.merge).read_text())
        taken = [v for v in VARIANTS if v in earlier["per_run"] and v not in result["per_run"]]
        out(f"taken from {args.merge} ({earlier.get('code', 'code not recorded')}): {', '.join(taken) or 'none'}")
        order = [v for v in VARIANTS if v in result["per_run"] or v in taken]
        result["per_run"] = {v: result["per_run"].get(v, earlier["per_run"].get(v)) for v in order}
        result["spans"] = {v: result["spans"].get(v, earlier["spans"].get(v)) for v in order}
    report(result)
    if args.save:
        Path(args.save).write_text(json.dumps(result, indent=1))
    out(f"({time.perf_counter() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
