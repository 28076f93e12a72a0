"""One recommendation per engine, everywhere a user reads one: `gpuscale agent --help` prints the table that
the binary holds (src/core/advice.c), and the README, docs/engines.md, examples/README.md and the chart's NOTES
must give the same trigger for each engine (and the trigger beside it) and never show an advised-against profile as a trigger. Changing a
recommendation is one edit in src/core/advice.c; this test then names every place that still disagrees.
Every scalerAddress that names the chart's Services uses the port those Services serve."""
import os
import pathlib
import re
import subprocess

import pytest

SRC = pathlib.Path(os.environ.get("GPUSCALE_SRC", pathlib.Path(__file__).resolve().parents[2]))
BIN = os.environ.get("GPUSCALE_BIN", str(SRC / "build" / "gpuscale"))
CHART = SRC / "deploy" / "helm" / "gpuscale"

PLACES = ["README.md", "docs/engines.md", "examples/README.md",
          "deploy/helm/gpuscale/templates/NOTES.txt"]


def advice():
    """{label: (profile, [advised against])} from `gpuscale agent --help`."""
    out = subprocess.run([BIN, "agent", "--help"], capture_output=True, text=True, timeout=30).stdout
    block = out.split("Recommended trigger per engine", 1)
    assert len(block) == 2, "agent --help has no 'Recommended trigger per engine' block:\n" + out
    rows, beside = {}, {}
    for line in block[1].splitlines()[1:]:
        m = re.match(r"^  (\S+)\s+profile: (\S+) \(with [^)]*\)(?:, beside metricType: (\S+) \([^)]*\))?"
                     r"(?:; advised against: (.*))?$", line)
        if not m:
            break
        rows[m.group(1)] = (m.group(2), [p.strip() for p in (m.group(4) or "").split(",") if p.strip()])
        if m.group(3):
            beside[m.group(1)] = m.group(3)
    assert {"vLLM", "SGLang", "TGI", "Triton"} <= set(rows), rows
    return rows, beside


ADVICE, BESIDE = advice()


@pytest.mark.parametrize("place", PLACES)
def test_each_place_gives_each_engine_its_recommended_trigger(place):
    text = (SRC / place).read_text(encoding="utf-8")
    missing = []
    for label, (profile, _) in ADVICE.items():
        # The engine's name and its profile on one line (a table row, a list line, a NOTES line).
        rx = re.compile(r"(?<![\w-])" + re.escape(label) + r"(?![\w-]).*profile: `?" + re.escape(profile) + r"\b")
        if not any(rx.search(line) for line in text.splitlines()):
            missing.append(f"{place}: no line recommends profile: {profile} for {label}")
        # the trigger recommended beside it, named on the same line
        if label in BESIDE:
            rx = re.compile(r"(?<![\w-])" + re.escape(label) + r"(?![\w-]).*" + re.escape(BESIDE[label]))
            if not any(rx.search(line) for line in text.splitlines()):
                missing.append(f"{place}: no line names {BESIDE[label]} beside {profile} for {label}")
    assert not missing, "\n".join(missing)


def triggers_files():
    files = [SRC / p for p in PLACES]
    files += [p for p in sorted((SRC / "examples").rglob("*.yaml")) if "simulate" not in p.parts]
    return files


@pytest.mark.parametrize("path", triggers_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_trigger_uses_an_advised_against_profile(path):
    against = {p: label for label, (_, ps) in ADVICE.items() for p in ps}
    bad = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for m in re.finditer(r"(?:profile:|--profile|-p) +\"?([a-z0-9-]+)", line):
            if m.group(1) in against:
                bad.append(f"{path.relative_to(SRC)}:{n}: profile {m.group(1)}, advised against for "
                           f"{against[m.group(1)]}")
    assert not bad, "\n".join(bad)


def test_agent_help_asks_the_mock_a_question_it_can_answer():
    # The mock has GPUs and no engine pods: its example query is a GPU metric, not an engine profile.
    out = subprocess.run([BIN, "agent", "--help"], capture_output=True, text=True, timeout=30).stdout
    line = next(ln for ln in out.splitlines() if "gpuscale query" in ln)
    assert "metricType=gpu_utilization" in line, line


def chart_ports():
    """{service kind: port} of the chart's gRPC Services (gateway and agent)."""
    ports = {}
    for kind, f in (("gateway", "gateway.yaml"), ("agent", "agent-services.yaml")):
        text = (CHART / "templates" / f).read_text()
        m = re.search(r"- name: grpc\s+port: (\d+)", text)
        assert m, f"no grpc port in {f}"
        ports[kind] = m.group(1)
    return ports


def address_files():
    files = [SRC / "README.md", CHART / "templates" / "NOTES.txt"]
    files += sorted((SRC / "docs").rglob("*.md")) + sorted((SRC / "examples").rglob("*.yaml"))
    files += sorted((SRC / "examples").rglob("*.md"))
    return files


def test_every_scaler_address_uses_the_charts_port():
    ports = chart_ports()
    bad = []
    for path in address_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in re.finditer(r"scalerAddress: *\"?[^\s\"]*gpuscale-(gateway|agent)[^\s:\"]*:(\d+)", line):
                if m.group(2) != ports[m.group(1)]:
                    bad.append(f"{path.relative_to(SRC)}:{n}: {m.group(1)} port {m.group(2)}, the chart's "
                               f"Service serves {ports[m.group(1)]}")
    assert not bad, "\n".join(bad)
