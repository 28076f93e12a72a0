#!/usr/bin/env python3
"""Makes examples/simulate/traces/azure-llm-2023-{conv,code}.csv from Azure's public LLM inference
traces 2023 (github.com/Azure/AzurePublicDataset, data/AzureLLMInferenceTrace_{conv,code}.csv,
CC-BY 4.0; Patel et al., "Splitwise", ISCA 2024): the same requests, TIMESTAMP as seconds from
the first request (ms). Also converts the 2024 week-long traces (same schema) if given a file.

  python3 scripts/azure-llm-trace.py [conv|code|FILE.csv] > out.csv
"""
import csv
import datetime
import sys
import urllib.request

URL = ("https://raw.githubusercontent.com/Azure/AzurePublicDataset/master/data/"
       "AzureLLMInferenceTrace_%s.csv")


def rows(src):
    if src in ("conv", "code"):
        with urllib.request.urlopen(URL % src, timeout=60) as r:
            return list(csv.DictReader(r.read().decode().splitlines())), src
    with open(src, newline="") as f:
        return list(csv.DictReader(f)), src


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "conv"
    rs, name = rows(src)
    t0 = None
    out = sys.stdout
    out.write("# Azure LLM inference trace (github.com/Azure/AzurePublicDataset, %s), CC-BY 4.0.\n"
              % name)
    out.write("# Derived: TIMESTAMP in seconds from the first request (ms); tokens unchanged.\n")
    out.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    for r in rs:
        t = datetime.datetime.fromisoformat(r["TIMESTAMP"][:26])
        t0 = t0 or t
        out.write("%.3f,%d,%d\n" % ((t - t0).total_seconds(), int(r["ContextTokens"]),
                                   int(r["GeneratedTokens"])))


if __name__ == "__main__":
    main()
