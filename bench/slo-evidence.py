#!/usr/bin/python3
"""Which ScaledObject meets an LLM latency SLO at the fewest GPU-hours, on real demand.

Replays every ScaledObject of examples/simulate/slo/ (and any given with --config) on both Azure
2023 traces (examples/simulate/traces/) with both calibrated engine models
(examples/simulate/models/llama-3-8b-h100.yaml, llama-3-70b-2xh100.yaml), at start-ups of 30, 90
and 240 s, through `gpuscale simulate --slo`, and prints one Markdown table per (model, trace,
start-up): GPU-hours, the SLO floor, the ratio, SLO attainment, p99 TTFT and p99 TPOT.

The SLOs are MLPerf's server scenario (mlcommons/inference loadgen/mlperf.conf): chat p99 TTFT
2 s with p99 TPOT 100 ms (Llama-3.1-8B) or 200 ms (Llama-2-70B); code completion p99 TTFT 1 s.
The arrivals are scaled (--trace-scale) so that the SLO floor needs 2 to 30 replicas or so.

  bench/slo-evidence.py [--bin build/gpuscale] [--startup 90] [--config X.yaml ...] [--json OUT]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIM = os.path.join(ROOT, "examples", "simulate")
# model file, its SLO per trace, the arrival factor per trace
CASES = [
    ("llama-3-8b-h100.yaml", {"conv": ("ttft=2s,tpot=100ms", 50), "code": ("ttft=1s", 20)}),
    ("llama-3-70b-2xh100.yaml", {"conv": ("ttft=2s,tpot=200ms", 2), "code": ("ttft=1s", 1)}),
]
SCRAPE = "30s"  # kube-prometheus-stack's ServiceMonitor default interval


def model_with_startup(src, startup_s, tmp):
    text = open(src).read()
    new, n = re.subn(r"^startup:.*$", "startup: {min: %ds, max: %ds}" % (startup_s, startup_s),
                     text, flags=re.M)
    assert n == 1, src
    out = os.path.join(tmp, "%s-%ds.yaml" % (os.path.basename(src)[:-5], startup_s))
    open(out, "w").write(new)
    return out


def run(binary, model, trace, scale, slo, configs):
    args = [binary, "simulate", "--model", model, "--trace", trace, "--trace-scale", str(scale),
            "--slo", slo, "--prometheus-scrape-interval", SCRAPE, "--format", "json",
            "--progress", "never", "--compare"] + configs
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode:
        sys.exit("gpuscale simulate failed: %s\n%s" % (" ".join(args), p.stderr))
    return json.loads(p.stdout)["runs"]


def fmt_s(v):
    return "never" if v is None else ("%.2f s" % v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "gpuscale"))
    ap.add_argument("--startup", type=int, action="append",
                    help="start-up seconds (repeatable; default 30, 90 and 240)")
    ap.add_argument("--config", action="append", default=[], help="another ScaledObject")
    ap.add_argument("--json", help="write every run here too")
    a = ap.parse_args()
    configs = sorted(glob.glob(os.path.join(SIM, "slo", "*.yaml"))) + a.config
    startups = a.startup or [30, 90, 240]
    everything = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, traces in CASES:
            for startup in startups:
                m = model_with_startup(os.path.join(SIM, "models", model), startup, tmp)
                for tr, (slo, scale) in traces.items():
                    trace = os.path.join(SIM, "traces", "azure-llm-2023-%s.csv" % tr)
                    runs = run(a.bin, m, trace, scale, slo, configs)
                    print("\n**%s, %s trace x%g, start-up %d s, SLO %s (99 %%)**\n" %
                          (model[:-5], tr, scale, startup, slo))
                    print("| configuration | GPU-h | SLO floor | ratio | attainment | p99 TTFT "
                          "| p99 TPOT |")
                    print("|---|---|---|---|---|---|---|")
                    for r in runs:
                        met = r["sloAttainmentPercent"] >= 99
                        print("| %s | %.2f | %.2f | %.2fx | %s%.2f %%%s | %s | %s |" % (
                            os.path.basename(r["config"])[:-5], r["gpuHours"],
                            r["sloFloorGpuHours"], r["ratioToFloor"], "**" if met else "",
                            r["sloAttainmentPercent"], "**" if met else "",
                            fmt_s(r["ttftP99Seconds"]),
                            "%.0f ms" % (1000 * r["tpotP99Seconds"])
                            if r["tpotP99Seconds"] is not None else "-"))
                        everything.append(dict(r, model=model, trace=tr, startup=startup,
                                               slo=slo, scale=scale))
                    reach = runs[0]["sloAttainablePercent"]
                    if reach < 99:
                        print("\nAt most %.2f %% of these requests can meet the SLO on this model, "
                              "whatever the replica count: the rest take longer than its bounds "
                              "alone on an empty replica." % (reach + 1e-9))
                    sys.stdout.flush()
    print("\nAcross start-ups:\n")
    print("| model, trace | start-up | SLO floor | attainable | cheapest meeting the SLO "
          "| best attainment otherwise |")
    print("|---|---|---|---|---|---|")
    groups = {}
    for r in everything:
        groups.setdefault((r["model"][:-5], r["trace"], r["startup"]), []).append(r)
    for (model, tr, startup), runs in sorted(groups.items()):
        name = lambda r: os.path.basename(r["config"])[:-5]
        met = [r for r in runs if r["sloAttainmentPercent"] >= 99]
        cheap = min(met, key=lambda r: r["gpuHours"]) if met else None
        best = max((r for r in runs if r is not cheap), key=lambda r: r["sloAttainmentPercent"],
                   default=None)
        print("| %s, %s | %d s | %.2f | %.2f %% | %s | %s |" % (
            model, tr, startup, runs[0]["sloFloorGpuHours"],
            runs[0]["sloAttainablePercent"] + 1e-9,  # JSON keeps 6 digits: round as the report does
            "%s, %.2f GPU-h (%.2fx), %.2f %%" % (name(cheap), cheap["gpuHours"],
                                                 cheap["ratioToFloor"],
                                                 cheap["sloAttainmentPercent"])
            if cheap else "none",
            "%s, %.2f %% at %.2fx" % (name(best), best["sloAttainmentPercent"],
                                      best["ratioToFloor"]) if best else "-"))
    if a.json:
        json.dump(everything, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
