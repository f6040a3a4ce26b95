"""The documentation site (docs/, Sphinx): it builds with warnings as errors, every public name of
``tensorbridge`` is in the API reference with a docstring, the index and API pages load in
headless Chromium without a console error and with their sections, and the performance page's
charts are there and can be redrawn from the committed results.

``.ci/dev docs`` builds the site into build/docs-html and runs this file with
``TB_DOCS_HTML`` pointing at it; without that variable the site is built here, into a
temporary directory.
"""

from __future__ import annotations

import html
import inspect
import json
import os
import re
import subprocess
import sys
import time
import types

import pytest

import tensorbridge as tb

sys.path.insert(0, os.path.dirname(__file__))
import _browser

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
GUIDE_PAGES = ["guide/arrays", "guide/eager", "guide/compile", "guide/call_torch", "guide/cpp"]
REFERENCE_PAGES = ["serving", "api", "performance", "troubleshooting"]
CHARTS = ["kernels.png", "compile.png", "dlpack.png", "call_torch.png"]

needs_chromium = pytest.mark.skipif(
    _browser.chromium() is None, reason="Debian's chromium is not installed (.ci/dev installs it)"
)


@pytest.fixture(scope="module")
def html_dir(tmp_path_factory) -> str:
    built = os.environ.get("TB_DOCS_HTML")
    if built:
        built = os.path.abspath(built)
        assert os.path.isfile(os.path.join(built, "index.html")), f"TB_DOCS_HTML={built}: no site"
        return built
    pytest.importorskip("sphinx", reason="sphinx is not installed (.ci/dev installs it)")
    out = str(tmp_path_factory.mktemp("docs-html"))
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", DOCS, out],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stdout}\n{proc.stderr}"
    return out


SUBMODULES = ("diagnostics", "cpp")


def public_names() -> list[str]:
    """``tensorbridge.__all__`` and every other public attribute the package defines (not the
    modules it imports, nor the ``from __future__`` feature), then the ``__all__`` of its public
    submodules as ``diagnostics.explain``."""
    extra = [
        n
        for n in dir(tb)
        if not n.startswith("_")
        and not isinstance(getattr(tb, n), types.ModuleType)
        and n != "annotations"
    ]
    sub = [f"{m}.{n}" for m in SUBMODULES for n in getattr(tb, m).__all__]
    return sorted(set(tb.__all__) | set(extra)) + sub


def resolve(name: str):
    obj = tb
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def test_top_level_is_the_ways_in_the_table_and_config():
    """The package's top level stays short: diagnostics and C++ helpers live in submodules. The
    exception classes users catch (KernelDeclinedError) sit beside what raises them."""
    errors = [
        n
        for n in tb.__all__
        if isinstance(getattr(tb, n), type) and issubclass(getattr(tb, n), Exception)
    ]
    assert errors == ["KernelDeclinedError"], errors
    assert len(tb.__all__) - len(errors) <= 20, sorted(tb.__all__)
    for name in tb.diagnostics.__all__ + tb.cpp.__all__:
        assert name not in dir(tb), name


def own_doc(obj) -> str:
    """The docstring without pybind11's signature line."""
    if isinstance(obj, str):  # __version__: documented on the page itself
        return "the package version"
    doc = inspect.getdoc(obj) or ""
    lines = doc.splitlines()
    name = getattr(obj, "__name__", "")
    if lines and name and lines[0].startswith(name + "("):
        lines = lines[1:]
    return "\n".join(lines).strip()


def test_public_names_have_docstrings():
    missing = [n for n in public_names() if not own_doc(resolve(n))]
    assert not missing, f"public names without a docstring: {missing}"


def test_api_reference_has_every_public_name(html_dir):
    with open(os.path.join(html_dir, "api.html")) as f:
        page = f.read()
    missing, empty = [], []
    for name in public_names():
        m = re.search(rf'<dt class="[^"]*" id="tensorbridge\.{re.escape(name)}">', page)
        if m is None:
            missing.append(name)
            continue
        dd = page[m.end() : page.find("</dd>", m.end())]
        body = re.sub(r"<[^>]+>", "", dd[dd.find("<dd>") :])
        if len(html.unescape(body).split()) < 3:
            empty.append(name)
    assert not missing, f"not in the API reference: {missing}"
    assert not empty, f"in the API reference without text: {empty}"


def test_every_page_is_built(html_dir):
    for page in ["index", *GUIDE_PAGES, *REFERENCE_PAGES]:
        assert os.path.isfile(os.path.join(html_dir, page + ".html")), page


def test_browser_check_reports_console_errors_and_missing_files(tmp_path):
    """The check the page tests rely on: a page with a console.error, an uncaught exception
    and a missing image reports all three."""
    if _browser.chromium() is None:
        pytest.skip("Debian's chromium is not installed (.ci/dev installs it)")
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><h1 id="x">x</h1><img src="missing.png">'
        '<script>console.error("bad thing"); notDefined();</script></body></html>'
    )
    errors, value = _browser.open_page(page.as_uri(), "document.getElementById('x').id")
    assert value == "x"
    text = "\n".join(errors)
    assert "console.error: bad thing" in text
    assert "notDefined" in text
    assert "missing.png" in text


SECTIONS_JS = """JSON.stringify({
  sections: Array.from(document.querySelectorAll("section[id]")).map(s => s.id),
  links: Array.from(document.querySelectorAll("a.reference.internal"))
              .map(a => a.getAttribute("href")),
  documented: Array.from(document.querySelectorAll("dt[id^='tensorbridge.']")).map(d => d.id),
  title: document.title,
})"""


@needs_chromium
def test_index_page_in_chromium(html_dir):
    url = "file://" + os.path.join(html_dir, "index.html")
    errors, value = _browser.open_page(url, SECTIONS_JS)
    assert errors == [], f"the index page logged errors: {errors}"
    page = json.loads(value)
    assert page["title"].startswith("tensorbridge")
    assert {"tensorbridge", "ways-in", "set-up"} <= set(page["sections"]), page["sections"]
    linked = {h.split("#")[0].removesuffix(".html") for h in page["links"]}
    missing = [p for p in GUIDE_PAGES + REFERENCE_PAGES if p not in linked]
    assert not missing, f"the index does not link {missing}"


@needs_chromium
def test_api_page_in_chromium(html_dir):
    url = "file://" + os.path.join(html_dir, "api.html")
    errors, value = _browser.open_page(url, SECTIONS_JS)
    assert errors == [], f"the API page logged errors: {errors}"
    page = json.loads(value)
    want = {
        "api-reference",
        "arrays-and-dlpack",
        "tensors-for-eager-pytorch",
        "the-op-table",
        "configuration",
        "torch-compile-and-torch-export",
        "torch-from-numpy-and-jax",
        "diagnostics",
        "c-extensions",
        "names-that-moved",
    }
    assert want <= set(page["sections"]), sorted(want - set(page["sections"]))
    shown = {d.removeprefix("tensorbridge.") for d in page["documented"]}
    assert not set(public_names()) - shown, sorted(set(public_names()) - shown)


def test_performance_page_shows_every_chart(html_dir):
    with open(os.path.join(html_dir, "performance.html")) as f:
        page = f.read()
    srcs = re.findall(r'<img[^>]* src="([^"]+)"', page)
    for chart in CHARTS:
        src = next((s for s in srcs if s.endswith(chart)), None)
        assert src is not None, f"{chart} is not on the performance page"
        path = os.path.join(html_dir, src)
        assert os.path.getsize(path) > 10_000, f"{path}: not a chart"
    assert "logical CPUs" in page  # the machine the figures come from


def test_report_redraws_the_committed_charts(tmp_path):
    """benchmarks/report.py --from-json draws every chart from the committed results, and the
    machine description on the page is the one of those results."""
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (.ci/dev installs it)")
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import report
    finally:
        sys.path.pop(0)
    with open(os.path.join(DOCS, "performance", "results.json")) as f:
        doc = json.load(f)
    written = report.draw(doc, str(tmp_path))
    names = sorted(os.path.basename(p) for p in written)
    assert names == sorted([*CHARTS, "machine.rst"])
    for chart in CHARTS:
        assert (tmp_path / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert os.path.isfile(os.path.join(DOCS, "performance", chart)), f"{chart} not committed"
    with open(os.path.join(DOCS, "performance", "machine.rst")) as f:
        assert f.read() == (tmp_path / "machine.rst").read_text()
    # Every chart has data: a run whose tables lack a figure would draw nothing for it.
    assert report.kernel_ratios(doc) and report.compile_speedups(doc)
    assert report.dlpack_times(doc) and report.call_torch_times(doc)


def test_benchmark_tables_are_recorded_for_the_report(tmp_path, monkeypatch, capsys):
    """TB_BENCH_JSON: every table a benchmark prints is appended as one JSON line, timings as
    min / median ns, ratios as numbers, unmeasured cells with their reason."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import _bench_util as bu
    finally:
        sys.path.pop(0)
    path = tmp_path / "tables.jsonl"
    monkeypatch.setenv("TB_BENCH_JSON", str(path))
    row = ["add", bu.Timing(1500.0, 1700.0, 10, 5), 1.25, bu.NA("no torchax")]
    bu.print_table("per-op time", ["op", "tb min", "torch/tb", "torchax"], [row])
    bu.print_table("second", ["x"], [["y"]])
    assert "per-op time" in capsys.readouterr().out
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert first["title"] == "per-op time" and first["headers"][2] == "torch/tb"
    assert first["rows"] == [
        ["add", {"min_ns": 1500.0, "median_ns": 1700.0}, 1.25, {"na": "no torchax"}]
    ]
    assert second["rows"] == [["y"]]


def test_benchmark_runner_takes_torch_measurements_side_by_side(monkeypatch, capsys):
    """The benchmarks' runner: every timing is a torch.utils.benchmark Measurement of the path,
    peers get the same number of interleaved repeats, a path that raises becomes an n/a cell,
    and --compare prints the table through torch.utils.benchmark.Compare."""
    from torch.utils.benchmark import Measurement

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import _bench_util as bu
    finally:
        sys.path.pop(0)
    calls = {"fast": 0, "slow": 0}

    def path(name, seconds):
        def fn():
            calls[name] += 1
            if seconds:
                time.sleep(seconds)

        return lambda: fn

    got = bu.measure_interleaved(
        [("fast", path("fast", 0)), ("slow", path("slow", 0.002)), ("bad", lambda: 1 / 0)],
        repeats=4,
        target_s=0.01,
        budget_s=10,
    )
    fast, slow = got["fast"], got["slow"]
    assert isinstance(fast.measurement, Measurement) and isinstance(slow.measurement, Measurement)
    assert fast.repeats == slow.repeats == 4
    assert slow.min_ns >= 2e6 and fast.min_ns < slow.min_ns / 10
    assert slow.min_ns <= slow.median_ns
    assert calls["slow"] >= 4 * slow.number
    assert isinstance(got["bad"], bu.NA) and "ZeroDivisionError" in got["bad"].reason
    one = bu.measure(path("slow", 0.002)(), repeats=2, target_s=0.005)
    assert one.repeats >= 3 and one.min_ns >= 2e6
    monkeypatch.setattr(bu, "_COMPARE", True)
    bu.print_table("sleep", ["path", "time"], [["fast", fast], ["slow", slow], ["bad", got["bad"]]])
    out = capsys.readouterr().out
    assert "[" in out and "sleep" in out and "Times are in" in out  # Compare's table
    assert "n/a [1]: ZeroDivisionError" in out  # and the harness's own
