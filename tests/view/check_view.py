#!/usr/bin/env python3
"""ampc view's page in a real browser.

Writes the page for examples/mlp.yaml at O2 and examples/transformer.yaml at
O1, loads each in headless Chromium and reads the DOM the page's script
leaves (--dump-dom):
  - the drawn op nodes are as many as the graph's nodes, and the header's
    node count says so too (both against `ampc --explain`, one line a node);
  - the header's cast count, and the nodes drawn as casts, equal the casts
    `--explain` lists;
  - opening the page as page.html#select=%25NAME fills the details panel
    with that node's op, precision rule, source location and memory;
  - `ampc view --diff O0` (mlp at O2) marks as many nodes changed as
    `ampc diff --levels O0,O2` lists, and a node's details say what it was
    at O0;
  - `ampc view --detail blocks` (transformer at O1) draws each encoder
    block as one box, as many as the note at the top counts; #select= of a
    box lists the nodes it holds, of a folded node links to its box, and
    the page's script raises no error (Chromium's console log);
  - what a 1400x900 window shows when a page opens (no #select=): for a
    small graph (mlp at O2, 30 nodes), a ~150-node one (resnet at O0) and
    transformer at O1 (271 nodes), and that one folded, at least 5 nodes lie
    (mostly) inside the graph's pane, with labels at least 8 px high, and
    the model's first forward node (or its box) is among them; the "+"
    button zooms 1.25x about the
    middle of the view. Graphviz draws large training graphs
    thousands of points wide, mostly empty: a page that opened at 100% on
    its top-left corner showed nothing of the transformer. A script the
    test appends to a copy of the page measures the nodes' boxes in the
    browser, so the check does not trust the page's own script.
A screenshot of each page is kept beside it (build/tests/view/*.png) as the
test's artifact, and of each page as it opens (*-open.png).

Run by CTest as `view-browser`; exits 77 (skip) without Chromium, except
under CI=true, where a missing browser fails the test.
"""
import argparse
import html
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
MISSING = 1 if os.environ.get("CI") == "true" else SKIP
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class Dom(html.parser.HTMLParser):
    """What the checks read from the dumped DOM."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ops = []        # (data-node, classes) of each op node
        self.folds = []      # data-node of each folded block's box
        self.diff = []       # data-diff of each op node that has one
        self.text_of = {}    # element id -> its text, for the ids below
        self._open = []      # ids being collected, with their depth
        self._depth = 0

    WANTED = ("node-count", "cast-count", "details", "diff-count", "diff-summary", "box-count")

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._depth += 1
        classes = (a.get("class") or "").split()
        if tag == "g" and "node" in classes and "fold" in classes:
            self.folds.append(a.get("data-node"))
        if tag == "g" and "node" in classes and "op" in classes:
            self.ops.append((a.get("data-node"), classes))
            if a.get("data-diff"):
                self.diff.append(a["data-diff"])
        if a.get("id") in self.WANTED:
            self._open.append((a["id"], self._depth))
            self.text_of[a["id"]] = ""

    def handle_endtag(self, tag):
        if self._open and self._open[-1][1] == self._depth:
            self._open.pop()
        self._depth -= 1

    def handle_data(self, data):
        for element_id, _ in self._open:
            self.text_of[element_id] += data + " "


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def explain_counts(ampc, model, level):
    """Nodes and casts of the training graph, as --explain lists them."""
    r = run([ampc, model, "-O", level, "--graph", "train", "--explain"], timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: ampc --explain: {r.stderr}")
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("%")]
    return len(rows), sum(1 for row in rows if row[1] == "cast")


def browse(browser, url, profile, extra):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--no-default-browser-check", "--disable-dev-shm-usage",
           f"--user-data-dir={profile}"] + extra + [url]
    return run(cmd, timeout=120)


def check_page(args, browser, model, level, select, expect_in_details):
    name = os.path.splitext(os.path.basename(model))[0]
    page = os.path.join(args.out, f"{name}-{level}.html")
    r = run([args.ampc, "view", model, "-O", level, "-o", page], timeout=300)
    if r.returncode != 0:
        return [f"ampc view {name} -O {level} failed ({r.returncode}): {r.stderr}"]
    nodes, casts = explain_counts(args.ampc, model, level)
    url = "file://" + os.path.abspath(page) + "#select=" + select.replace("%", "%25")
    failures = []
    with tempfile.TemporaryDirectory() as profile:
        dumped = browse(browser, url, profile, ["--dump-dom"])
        if dumped.returncode != 0 or "<html" not in dumped.stdout:
            return [f"{name}: chromium --dump-dom failed ({dumped.returncode}): "
                    f"{dumped.stderr[-2000:]}"]
    dom = Dom()
    dom.feed(dumped.stdout)

    def expect(what, got, want):
        if got != want:
            failures.append(f"{name} {level}: {what}: got {got!r}, expected {want!r}")

    expect("op nodes in the SVG", len(dom.ops), nodes)
    expect("op nodes with a data-node name", sum(1 for n, _ in dom.ops if n), nodes)
    expect("node count in the header", dom.text_of.get("node-count", "").strip(), str(nodes))
    expect("nodes drawn as casts", sum(1 for _, c in dom.ops if "cast" in c), casts)
    expect("cast count in the header", dom.text_of.get("cast-count", "").strip(), str(casts))
    details = " ".join(dom.text_of.get("details", "").split())
    for want in [select] + expect_in_details:
        if want not in details:
            failures.append(f"{name} {level}: the details panel for {select} lacks {want!r}: "
                            f"{details[:600]!r}")

    shot = os.path.join(args.out, f"{name}-{level}.png")
    if os.path.exists(shot):
        os.remove(shot)
    with tempfile.TemporaryDirectory() as profile:
        browse(browser, url, profile, [f"--screenshot={shot}", "--window-size=1400,900",
                                       "--hide-scrollbars"])
    if not os.path.exists(shot) or os.path.getsize(shot) < 1000:
        failures.append(f"{name}: no screenshot at {shot}")
    else:
        with open(shot, "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                failures.append(f"{name}: {shot} is not a PNG")
    print(f"{name} {level}: {len(dom.ops)} nodes, {casts} casts; screenshot {shot}")
    return failures


def check_diff_page(args, browser, model, level, against, select):
    """`ampc view --diff`: the marks agree with `ampc diff`'s text."""
    name = os.path.splitext(os.path.basename(model))[0]
    page = os.path.join(args.out, f"{name}-{level}-diff-{against}.html")
    r = run([args.ampc, "view", model, "-O", level, "--diff", against, "-o", page], timeout=300)
    if r.returncode != 0:
        return [f"ampc view --diff {against} failed ({r.returncode}): {r.stderr}"]
    text = run([args.ampc, "diff", model, "--levels", f"{against},{level}"], timeout=300).stdout
    changed = next((int(line.split(";")[1].split()[0]) for line in text.splitlines()
                    if line.startswith("nodes:")), None)
    url = "file://" + os.path.abspath(page) + "#select=" + select.replace("%", "%25")
    with tempfile.TemporaryDirectory() as profile:
        dumped = browse(browser, url, profile, ["--dump-dom"])
    dom = Dom()
    dom.feed(dumped.stdout)
    failures = []
    got = sum(1 for d in dom.diff if d == "changed")
    if got != changed:
        failures.append(f"{name} --diff {against}: {got} nodes marked changed, ampc diff lists "
                        f"{changed}")
    if dom.text_of.get("diff-count", "").strip() != str(changed):
        failures.append(f"{name} --diff {against}: header says "
                        f"{dom.text_of.get('diff-count')!r}, expected {changed}")
    details = " ".join(dom.text_of.get("details", "").split())
    if f"before f32 at {against}" not in details:
        failures.append(f"{name} --diff {against}: the details of {select} lack 'before f32 at "
                        f"{against}': {details[:400]!r}")
    if "only at" not in dom.text_of.get("diff-summary", ""):
        failures.append(f"{name} --diff {against}: no diff summary")
    shot = os.path.join(args.out, f"{name}-{level}-diff-{against}.png")
    with tempfile.TemporaryDirectory() as profile:
        browse(browser, url, profile, [f"--screenshot={shot}", "--window-size=1400,900",
                                       "--hide-scrollbars"])
    print(f"{name} {level} --diff {against}: {got} nodes marked changed; screenshot {shot}")
    return failures


def check_folded_page(args, browser, model, level, box, block, member):
    """`ampc view --detail blocks`: boxes, their details and a folded node's."""
    name = os.path.splitext(os.path.basename(model))[0]
    page = os.path.join(args.out, f"{name}-{level}-blocks.html")
    r = run([args.ampc, "view", model, "-O", level, "--detail", "blocks", "-o", page], timeout=300)
    if r.returncode != 0:
        return [f"ampc view --detail blocks failed ({r.returncode}): {r.stderr}"]
    failures = []
    if "warning: the page is folded" not in r.stderr:
        failures.append(f"{name} --detail blocks: no warning on stderr: {r.stderr!r}")
    checks = [(box, [block, "Holds", member, "linear"]), (member, [member, "drawn in " + block])]
    for select, wants in checks:
        url = "file://" + os.path.abspath(page) + "#select=" + select.replace("%", "%25")
        with tempfile.TemporaryDirectory() as profile:
            dumped = browse(browser, url, profile, ["--dump-dom", "--enable-logging=stderr",
                                                    "--v=0"])
        dom = Dom()
        dom.feed(dumped.stdout)
        if "Uncaught" in dumped.stderr:
            errors = [line for line in dumped.stderr.splitlines() if "Uncaught" in line]
            failures.append(f"{name} --detail blocks: the page's script failed: {errors[:3]}")
        boxes = dom.text_of.get("box-count", "").strip()
        if not dom.folds or boxes != str(len(dom.folds)):
            failures.append(f"{name} --detail blocks: {len(dom.folds)} boxes drawn, the note "
                            f"counts {boxes!r}")
        if any(n == member for n, _ in dom.ops):
            failures.append(f"{name} --detail blocks: {member} is drawn, not folded")
        details = " ".join(dom.text_of.get("details", "").split())
        for want in wants:
            if want not in details:
                failures.append(f"{name} --detail blocks: the details of {select} lack "
                                f"{want!r}: {details[:400]!r}")
    print(f"{name} {level} --detail blocks: {len(dom.folds)} boxes")
    return failures


# Appended to a copy of a page: once it has loaded (and its own script has
# set the view), lists the SVG nodes that lie at least half inside the part
# of the graph's pane that the window shows, with the rendered size of their
# largest label, in <pre id="ampc-view-check">.
MEASURE = r"""<script>
(function () {
  function measure() {
    var pane = document.getElementById('graph'), svg = pane.querySelector('svg');
    var p = pane.getBoundingClientRect();
    var view = {left: Math.max(0, p.left + pane.clientLeft), top: Math.max(0, p.top + pane.clientTop),
                right: Math.min(window.innerWidth, p.left + pane.clientLeft + pane.clientWidth),
                bottom: Math.min(window.innerHeight, p.top + pane.clientTop + pane.clientHeight)};
    var pxPerUnit = svg.getScreenCTM().a;
    var seen = [];
    Array.prototype.forEach.call(svg.querySelectorAll('g.node'), function (g) {
      var r = g.getBoundingClientRect();
      var w = Math.min(r.right, view.right) - Math.max(r.left, view.left);
      var h = Math.min(r.bottom, view.bottom) - Math.max(r.top, view.top);
      if (w <= 0 || h <= 0 || w * h < 0.5 * r.width * r.height) return;
      var font = 0;
      Array.prototype.forEach.call(g.querySelectorAll('text'), function (t) {
        font = Math.max(font, parseFloat(t.getAttribute('font-size') || '0') * pxPerUnit);
      });
      seen.push({id: g.id, name: g.getAttribute('data-node'), font: font,
                 box: [r.left, r.top, r.width, r.height]});
    });
    // The "+" button: 1.25 times larger, the drawing's point at the
    // pane's middle kept there (in the drawing's units).
    var mid = svg.createSVGPoint();
    mid.x = (view.left + view.right) / 2;
    mid.y = (view.top + view.bottom) / 2;
    var before = mid.matrixTransform(svg.getScreenCTM().inverse());
    var width = svg.getBoundingClientRect().width;
    document.querySelector('button[data-zoom=in]').click();
    var after = mid.matrixTransform(svg.getScreenCTM().inverse());
    var out = document.createElement('pre');
    out.id = 'ampc-view-check';
    out.textContent = JSON.stringify({
      window: [window.innerWidth, window.innerHeight],
      pane: [view.left, view.top, view.right, view.bottom],
      nodes: svg.querySelectorAll('g.node').length, visible: seen,
      zoomIn: svg.getBoundingClientRect().width / width,
      zoomMoved: Math.max(Math.abs(after.x - before.x), Math.abs(after.y - before.y)),
      zoomUnit: 1 / pxPerUnit});
    document.body.appendChild(out);
  }
  window.addEventListener('load', function () { setTimeout(measure, 0); });
})();
</script>
"""
MIN_NODES_IN_VIEW = 5
MIN_LABEL_PX = 8.0


def check_opening_view(args, browser, model, level, suffix=""):
    """What a 1400x900 window shows as the page opens."""
    name = os.path.splitext(os.path.basename(model))[0]
    page = os.path.join(args.out, f"{name}-{level}{suffix}.html")
    if not os.path.exists(page):
        r = run([args.ampc, "view", model, "-O", level, "-o", page], timeout=300)
        if r.returncode != 0:
            return [f"ampc view {name} -O {level} failed ({r.returncode}): {r.stderr}"]
    with open(page, encoding="utf-8") as f:
        text = f.read()
    at = text.rindex("</body>")
    measured = os.path.join(args.out, f"{name}-{level}{suffix}-measure.html")
    with open(measured, "w", encoding="utf-8") as f:
        f.write(text[:at] + MEASURE + text[at:])
    # The first forward node: the page's JSON lists the nodes in execution
    # order (op_<i>), each with its role.
    data = json.loads(re.search(r'<script type="application/json" id="ampc-nodes">(.*?)</script>',
                                text, re.S).group(1))
    ops = sorted((k for k in data if k.startswith("op_")), key=lambda k: int(k[3:]))
    first = next((k for k in ops if data[k].get("role") == "forward"), ops[0] if ops else None)
    url = "file://" + os.path.abspath(measured)

    def measure(width, height):
        with tempfile.TemporaryDirectory() as profile:
            dumped = browse(browser, url, profile, ["--dump-dom", f"--window-size={width},{height}",
                                                    "--virtual-time-budget=5000"])
        m = re.search(r'<pre id="ampc-view-check">(.*?)</pre>', dumped.stdout, re.S)
        if not m:
            raise RuntimeError(f"the measuring script left nothing ({dumped.returncode}): "
                               f"{dumped.stderr[-1000:]}")
        return json.loads(html.unescape(m.group(1)))

    try:
        # Headless Chromium's --dump-dom counts the browser's own bars in
        # the window's size: measured once, the window is grown by them so
        # that the page sees 1400x900.
        got = measure(1400, 900)
        if got["window"] != [1400, 900]:
            got = measure(2800 - got["window"][0], 1800 - got["window"][1])
    except RuntimeError as e:
        return [f"{name} {level}: {e}"]
    readable = [n for n in got["visible"] if n["font"] >= MIN_LABEL_PX]
    failures = []
    want = min(MIN_NODES_IN_VIEW, got["nodes"])
    if len(readable) < want:
        failures.append(
            f"{name} {level}: as the page opens in a {got['window'][0]}x{got['window'][1]} window, "
            f"{len(got['visible'])} of {got['nodes']} nodes are in view, {len(readable)} with "
            f"labels of {MIN_LABEL_PX:g} px or more (want {want}; labels "
            f"{sorted(round(n['font'], 1) for n in got['visible'])[:8]} px)")
    # Zooming in keeps the drawing's point at the middle of the view there
    # (to within 2 px: the scroll offsets are whole pixels); the drawing
    # is larger than the pane at these zooms, so no edge stops the scroll.
    if abs(got["zoomIn"] - 1.25) > 0.01:
        failures.append(f"{name} {level}: '+' zoomed by {got['zoomIn']:.3f}, not 1.25")
    if got["zoomMoved"] > 2 * got["zoomUnit"]:
        failures.append(f"{name} {level}: '+' moved the middle of the view by "
                        f"{got['zoomMoved'] / got['zoomUnit']:.1f} px")
    # On a folded page, the box that holds it.
    first = first and data[first].get("box", first)
    if first and first not in {n["id"] for n in got["visible"]}:
        failures.append(f"{name} {level}: the first forward node {data[first]['name']} ({first}) "
                        f"is not in view as the page opens")
    shot = os.path.join(args.out, f"{name}-{level}{suffix}-open.png")
    with tempfile.TemporaryDirectory() as profile:
        browse(browser, "file://" + os.path.abspath(page), profile,
               [f"--screenshot={shot}", "--window-size=1400,900", "--hide-scrollbars"])
    fonts = sorted(n["font"] for n in readable)
    print(f"{name} {level} as it opens in a {got['window'][0]}x{got['window'][1]} window: "
          f"{len(got['visible'])} of {got['nodes']} nodes in view, {len(readable)} with labels "
          f"of {fonts[0] if fonts else 0:.1f} px or more; '+' moved the middle by "
          f"{got['zoomMoved'] / got['zoomUnit']:.2f} px; screenshot {shot}")
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ampc", required=True)
    p.add_argument("--examples", required=True, help="the repository's examples/ folder")
    p.add_argument("--out", required=True, help="where the pages and screenshots go")
    args = p.parse_args()
    browser = next((b for b in map(shutil.which, BROWSERS) if b), None)
    if not browser:
        print(f"{'FAIL' if MISSING == 1 else 'SKIP'}: no Chromium ({', '.join(BROWSERS)}); "
              "scripts/install-deps.sh installs it")
        return MISSING
    os.makedirs(args.out, exist_ok=True)
    pages = [
        ("mlp.yaml", "O2", "%fc1",
         ["linear", "bf16", "policy: cast_model_type half", "mlp.yaml:24:5", "524,288 B",
          "%x.bf16", "bf16[1024,1024]"]),
        ("transformer.yaml", "O1", "%layer0.q.weight.bf16",
         ["cast", "f32 \u2192 bf16", "of state: served from the cast cache",
          "transformer.yaml:24:9", "32,768 B"]),
    ]
    failed = 0
    for model, level, select, details in pages:
        failures = check_page(args, browser, os.path.join(args.examples, model), level, select,
                              details)
        for f in failures:
            print("FAIL:", f)
        failed += bool(failures)
    failures = check_diff_page(args, browser, os.path.join(args.examples, "mlp.yaml"), "O2",
                               "O0", "%fc1")
    for f in failures:
        print("FAIL:", f)
    failed += bool(failures)
    failures = check_folded_page(args, browser, os.path.join(args.examples, "transformer.yaml"),
                                 "O1", "blk_0", "layer0", "%layer0.q")
    for f in failures:
        print("FAIL:", f)
    failed += bool(failures)
    # The folded page was written above; it opens on the box of the first node.
    opening = [("mlp.yaml", "O2", ""), ("resnet.yaml", "O0", ""), ("transformer.yaml", "O1", ""),
               ("transformer.yaml", "O1", "-blocks")]
    for model, level, suffix in opening:
        failures = check_opening_view(args, browser, os.path.join(args.examples, model), level,
                                      suffix)
        for f in failures:
            print("FAIL:", f)
        failed += bool(failures)
    print(f"{len(pages) + 2 + len(opening) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
