"""The HTML report in a real browser: Debian's Chromium, headless, loads a report with
tables and plots, every image loads, no table runs past the window (each sits in its own
scrolling box), and a screenshot is taken. Skipped where Chromium is absent, except under
XFBENCH_REQUIRE_BROWSER=1 (.ci/run installs it and sets that), where its absence fails."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from test_report import H100, entry, runner_folder, standard

from xfbench import environment
from xfbench.report import render

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH = 1280

# Run in the page once it has loaded; writes what it found into <body data-check="...">,
# which --dump-dom prints.
CHECK = """
<script>
window.addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const images = [...document.images];
  const result = {
    images: images.length,
    broken: images.filter((i) => !(i.complete && i.naturalWidth > 0)).length,
    tables: document.querySelectorAll("table").length,
    unboxed: [...document.querySelectorAll("table")]
      .filter((t) => !t.parentElement.matches("div.scroll")).length,
    past_window: [...document.querySelectorAll("div.scroll")]
      .filter((d) => d.getBoundingClientRect().right > width + 1).length,
    page_scrolls_sideways: document.documentElement.scrollWidth > width + 1,
  };
  document.body.setAttribute("data-check", JSON.stringify(result));
});
</script>
"""


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # root in a container has no user namespace for the sandbox
            "--disable-gpu",
            f"--window-size={WIDTH},1000",
            "--virtual-time-budget=10000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def chromium():
    if CHROMIUM is None:
        if environment.REQUIRE_BROWSER.read() == "1":
            pytest.fail("XFBENCH_REQUIRE_BROWSER=1 but no chromium on PATH (apt install chromium)")
        pytest.skip("no chromium on PATH (Debian: apt install chromium)")
    return CHROMIUM


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_the_html_report_renders_in_chromium_with_its_images_and_no_table_past_the_window(
    tmp_path, chromium
):
    bench = standard() + [
        {
            "group": "gemm",
            "name": f"gemm{n}",
            "stats": {"median": 1.0},
            "extra_info": {
                "implementation": "cupy",
                "dtype": "bf16",
                "tflops": tf,
                "device": "cuda:0",
                "device_name": H100,
                "size": n,
            },
        }
        for n, tf in ((1024, 300.0), (8192, 700.0))
    ]
    bench.append(entry("resnet50", [0.01] * 3, device="cuda:0", device_name=H100, batch=16))
    a = runner_folder(tmp_path, "alpha", bench, gpus=[H100])
    b = runner_folder(tmp_path, "beta", standard(2.0))
    out = tmp_path / "report"
    render([a, b], out, ["html"], with_paper=True)
    html = (out / "report.html").read_text()
    checked = tmp_path / "checked.html"
    checked.write_text(html.replace("</body>", CHECK + "</body>"))

    proc = _chromium("--dump-dom", checked.as_uri())
    found = re.search(r'data-check="([^"]*)"', proc.stdout)
    assert found, proc.stderr[-2000:]
    result = json.loads(found[1].replace("&quot;", '"'))
    print("browser check:", result)
    assert result["images"] >= 3 and result["broken"] == 0, result
    assert result["tables"] >= 5 and result["unboxed"] == 0, result
    assert result["past_window"] == 0 and not result["page_scrolls_sideways"], result

    shot = tmp_path / "report.png"
    proc = _chromium(f"--screenshot={shot}", (out / "report.html").as_uri())
    assert shot.exists() and shot.stat().st_size > 10_000, proc.stderr[-2000:]
