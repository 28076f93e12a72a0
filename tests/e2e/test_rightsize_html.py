"""The rightsize HTML report in a real browser: `gpuscale rightsize --format html` against the fake
Prometheus (tests/e2e/fake_prometheus.py), opened in headless Chromium (Debian's `chromium`).

Checks: the page is one self-contained, well-formed file (no scripts, no external resources,
every chart present); Chromium renders it to a non-blank screenshot in which the charts' colours
appear; Chromium's DOM has the charts; and its console shows no errors (no script errors, no
blocked loads). Set RS_HTML_SCREENSHOT=PATH to keep the screenshot (docs/img/rightsize-report.png
is made that way).
"""

import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import xml.dom.minidom
import zlib

import pytest

import helpers

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


# ---- PNG decoding (standard library only) ----------------------------------------------------

def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into (w, h, rows),
    rows being lists of (r, g, b) tuples."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if typ == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += chunk
        elif typ == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ft == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 0xFF
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def hexrgb(s):
    return tuple(int(s[i:i + 2], 16) for i in (1, 3, 5))


# ---- fixtures ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workdir():
    d = tempfile.mkdtemp(prefix="gs-rightsize-html-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


EVIL_POD = "evil-<script>alert(1)</script>"
FB_TOTAL = 81559
H100 = "NVIDIA H100 80GB HBM3"


def fleet(end):
    """The fake Prometheus's history: an idle node (drain), a busy node whose pod has a hostile
    name, two small inference pods on one node (MIG slices that share a card), and a node with a
    one-day hole in its data."""
    series = []

    def gpu(node, i, util, used, power, pod=None, gaps=()):
        lab = {"Hostname": node, "gpu": str(i), "UUID": "GPU-%s-%d" % (node, i),
               "modelName": H100}
        if pod:
            lab.update({"namespace": pod[0], "pod": pod[1], "container": "main"})
        free = {"const": FB_TOTAL - used["const"]} if "const" in used else None
        for m, pat in (("DCGM_FI_DEV_GPU_UTIL", util), ("DCGM_FI_DEV_FB_USED", used),
                       ("DCGM_FI_DEV_FB_FREE", free), ("DCGM_FI_DEV_POWER_USAGE", power)):
            series.append({"metric": m, "labels": lab, "pattern": pat, "gaps": list(gaps)})

    for i in range(2):
        gpu("gpu-idle-a", i, {"const": 0}, {"const": 0}, {"const": 70})
        gpu("gpu-busy-b", i, {"square": [40, 95, 86400]}, {"const": 60000},
            {"square": [300, 600, 86400]}, pod=("ml", EVIL_POD))
    gpu("gpu-infer-c", 0, {"square": [6, 9, 7200]}, {"const": 7500}, {"const": 140},
        pod=("inference", "llm-infer-0"))
    # A second small pod on the node's other card: packed together, the two slices free a card
    # (a slice alone on its card would save nothing, and is no recommendation).
    gpu("gpu-infer-c", 1, {"square": [6, 9, 7200]}, {"const": 7500}, {"const": 140},
        pod=("inference", "llm-infer-1"))
    gpu("gpu-gap-d", 0, {"square": [20, 70, 43200]}, {"const": 30000}, {"const": 250},
        gaps=[(end - 3 * 86400, end - 2 * 86400)])
    return {"mode": "ok", "series": series}


@pytest.fixture(scope="module")
def html_report(workdir):
    """Runs the real binary against the fake Prometheus; returns the path of the HTML file."""
    end = int(time.time()) // 300 * 300
    desc = os.path.join(workdir, "fleet.json")
    with open(desc, "w") as f:
        json.dump(fleet(end), f)
    fake = subprocess.Popen(["/usr/bin/python3", os.path.join(os.path.dirname(__file__),
                                                              "fake_prometheus.py"), desc],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = os.path.join(workdir, "report.html")
    try:
        line = fake.stdout.readline()
        assert line.startswith("PORT "), "fake Prometheus: %r %s" % (line, fake.stderr.read())
        url = "http://127.0.0.1:%d" % int(line.split()[1])
        r = subprocess.run([helpers.binary(), "rightsize", "--prometheus", url, "--window", "7d",
                            "--step", "5m", "--end", str(end), "--format", "html", "--output",
                            out], capture_output=True, text=True, timeout=120)
    finally:
        fake.terminate()
        fake.wait(timeout=10)
        fake.stdout.close()
        fake.stderr.close()
    assert r.returncode == 0, "rightsize --format html failed (%d): %s" % (r.returncode, r.stderr)
    assert os.path.getsize(out) > 0
    return out


def chromium(workdir, *args, timeout=120):
    profile = tempfile.mkdtemp(prefix="chromium-", dir=workdir)
    try:
        return subprocess.run([CHROMIUM] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile] +
                              list(args), capture_output=True, text=True, timeout=timeout,
                              cwd=workdir)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(stderr):
    """Console messages that mean the page misbehaved: script errors and blocked loads."""
    bad = ("Uncaught", "Refused to", "SyntaxError", "ReferenceError", "TypeError",
           "net::ERR_", "Failed to load resource")
    return [l for l in stderr.splitlines() if "CONSOLE" in l or any(b in l for b in bad)]


# ---- tests ------------------------------------------------------------------------------------

def test_html_is_self_contained_and_well_formed(html_report):
    text = open(html_report, encoding="utf-8").read()
    doc = xml.dom.minidom.parseString(text.encode())  # XHTML-compatible: parses as XML
    assert doc.documentElement.tagName == "html"
    assert "<script" not in text.lower()
    assert "evil-&lt;script&gt;alert(1)&lt;/script&gt;" in text  # the pod name, as text
    for attr in (" src=", " href=", "url(", "@import"):
        assert attr not in text, attr
    svgs = doc.getElementsByTagName("svg")
    assert len(svgs) >= 3  # savings bars, heatmap, at least one node timeline
    for s in svgs:
        assert s.getAttribute("xmlns") == "http://www.w3.org/2000/svg"
    ids = {e.getAttribute("id") for e in doc.getElementsByTagName("h2")}
    assert {"summary", "savings", "recommendations", "heatmap", "timelines"} <= ids


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_html_renders_in_chromium(html_report, workdir):
    shot = os.path.join(workdir, "shot.png")
    r = chromium(workdir, "--window-size=1200,1800", "--screenshot=" + shot,
                 "file://" + html_report)
    assert r.returncode == 0, r.stderr[-2000:]
    assert os.path.exists(shot), "no screenshot: " + r.stderr[-2000:]
    assert console_errors(r.stderr) == [], console_errors(r.stderr)
    w, h, rows = png_pixels(shot)
    assert (w, h) == (1200, 1800)
    colours = {}
    for row in rows[::2]:
        for px in row[::2]:
            colours[px] = colours.get(px, 0) + 1
    assert len(colours) > 50, "screenshot is (nearly) blank: %d colours" % len(colours)
    top = max(colours.values())
    assert top < 0.95 * sum(colours.values()), "one colour fills the screenshot"
    # The charts are drawn, not just the text: the drain bar's red and the idle yellow of the
    # heatmap (an idle GPU in the fake's history) are on screen.
    assert colours.get(hexrgb("#d62728"), 0) > 500, "no savings bar for a drain"
    assert colours.get(hexrgb("#ffffd9"), 0) > 500, "no idle cells in the heatmap"
    keep = os.environ.get("RS_HTML_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_html_dom_in_chromium(html_report, workdir):
    r = chromium(workdir, "--dump-dom", "file://" + html_report)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert console_errors(r.stderr) == [], console_errors(r.stderr)
    # Chromium parsed the inline SVG as SVG (it would drop unknown markup otherwise).
    assert dom.count("<svg") >= 3
    assert dom.count("<rect") > 20 and "<path" in dom
    assert "Utilisation heatmap" in dom and "Savings by recommendation" in dom
    assert "<script" not in dom.lower()
    assert "evil-&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    # the MIG advice shows its packing (two slices share a card, each frees half of one) and its
    # burst figure
    assert ('<span class="packing">packing: card 1 (1g.10gb at memory slice 6) with '
            'inference/llm-infer-1: frees 0.50 GPU; H100-80GB: 2 GPU(s) pack onto 1 '
            'card(s)</span>') in dom
    assert "frees nothing" not in dom  # a $0 slice is no recommendation
    assert ('<span class="burst">bursts: utilisation above 14.3 % (the slice\'s share) in 0.00 % '
            'of steps; tolerance 1 %</span>') in dom
