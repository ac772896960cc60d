"""The summary page (results/index.html, summary.md) and snakemake --report on a tiny real run,
checked in headless Chromium."""
import copy
import json
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from docutils.core import publish_parts

from conftest import ROOT, tiny_study

sys.path.insert(0, str(ROOT / "workflow"))
from dbsweep import summary  # noqa: E402

BAD = "filesystem~tmpfs/threads~1/workload~fio-rr"
WIDTH, HEIGHT = 1200, 1600


def chromium(*args: str) -> subprocess.CompletedProcess:
    # --no-sandbox: the tests run as root, where Chromium's sandbox refuses to start.
    return subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", *args],
                          capture_output=True, text=True, timeout=120, check=True)


def png_facts(path: Path) -> tuple[int, int, int]:
    """Width, height and the number of distinct byte values of the decompressed image data."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def test_summary_page_incomplete_then_complete_and_the_report(study_factory, tmp_path):
    config = tiny_study(description='Random reads: is <script>alert("x")</script> & | faster?')
    config["axes"]["filesystem"] = ["tmpfs"]
    config["workloads"]["fio-rr"]["options"] |= {"direct": 0, "runtime": 2, "bogus_option": 1}
    config["workloads"]["sb-rr"]["options"]["time"] = 2
    del config["workloads"]["sb-rr"]["options"]["file-extra-flags"]  # tmpfs has no O_DIRECT
    study = study_factory(config)
    results = study.path("results")

    # A cell fails: rule all cannot complete, and the onerror handler writes the page from results/runs.
    assert study.run("--keep-going", check=False).returncode != 0
    page = (results / "index.html").read_text()
    assert "Incomplete" in page and BAD in page and "unrecognized option &#x27;--bogus_option=1&#x27;" in page
    assert ".snakemake/log/" in page, "the page names the failed run's log"
    assert f'href="logs/run/{BAD}/rep~1.log"' in page and f'href="runs/{BAD}/rep~1/attempt~' in page
    assert "<script>" not in page and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; |" in page
    assert "workload~sb-rr" not in page.split("Cells without results")[1], "the good cell is not listed"
    assert "bogus\\_option" in (results / "summary.md").read_text()
    assert (results / "index.html").stat().st_mtime == 0, "dated 1970, so the next run's rule summary replaces it"

    # Fixed: the run completes and rule summary writes the full page.
    fixed = copy.deepcopy(config)
    del fixed["workloads"]["fio-rr"]["options"]["bogus_option"]
    study.write(fixed)
    study.run()
    page = (results / "index.html").read_text()
    assert "Complete" in page and "Incomplete" not in page and "bogus_option" not in page
    plots = sorted(p.relative_to(results).as_posix() for p in (results / "plots").glob("*.png"))
    assert {"plots/throughput_vs_threads.png", "plots/latency_vs_threads.png", "plots/jitter.png",
            "plots/boxplot.png", "plots/timeseries_steady.png"} <= set(plots)
    assert sorted(re.findall(r'<img src="([^"]+)"', page)) == plots
    for table in ("cells", "saturation"):
        assert f"<h3>{table} (" in page
    assert page.count("<table>") >= 3 and "Provenance" in page and "fio-3" in page and "--numjobs=1" in page
    markdown = (results / "summary.md").read_text()
    assert sorted(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)) == plots
    assert "| filesystem | threads | workload |" in markdown and "\\<script\\>" in markdown

    # Headless Chromium renders it: a screenshot of the asked size that is not blank, and every image loads.
    shot = tmp_path / "page.png"
    chromium(f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", (results / "index.html").as_uri())
    width, height, distinct = png_facts(shot)
    assert (width, height) == (WIDTH, HEIGHT) and distinct > 50
    probe = results / "probe.html"
    probe.write_text(page.replace("</body>", "<script>window.addEventListener('load', () => {"
                                  "const p = document.createElement('pre'); p.id = 'probe';"
                                  "p.textContent = JSON.stringify([...document.images].map("
                                  "i => [i.getAttribute('src'), i.naturalWidth]));"
                                  "document.body.appendChild(p); });</script></body>"))
    dom = chromium("--virtual-time-budget=10000", "--dump-dom", probe.as_uri()).stdout
    probe.unlink()
    loaded = dict(json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom).group(1).replace("&quot;", '"')))
    assert sorted(loaded) == plots and all(w > 100 for w in loaded.values()), loaded
    assert dom.count("<table>") == page.count("<table>")

    # snakemake --report: one category named after the study, Tables and Plots under it; every caption
    # states the matrix, the host and the versions.
    study.run("--report", "results/report.html")
    report = (results / "report.html").read_text()
    categories = json.loads(re.search(r"var categories = (\{.*?\});\n", report).group(1))
    assert list(categories) == ["tiny"]
    assert set(categories["tiny"]) == {"Tables", "Plots"}
    assert sorted(categories["tiny"]["Plots"]) == [f"results/{p}" for p in plots]
    caption = "Study <strong>tiny</strong>, matrix filesystem: tmpfs; threads: 1; workload: fio-rr, sb-rr"
    assert report.count(caption) >= 6 and report.count("Measured on host") >= 6 and "fio fio-3" in report

    # A completed cell whose rerun fails (new options) loses its run.json: the page says so, and the
    # next run plans the cell again rather than finding "nothing to be done".
    study.write(config)
    assert study.run("--keep-going", check=False).returncode != 0
    page = (results / "index.html").read_text()
    assert "Incomplete" in page and BAD in page and "bogus_option" in page
    assert study.planned("run") == {BAD}


def test_skipped_plots_and_not_applicable_cells_are_listed(tmp_path):
    """The notes of other rules (results/tables/skipped_plots.csv as the figures rule writes it,
    not_applicable cells) reach the page; text from them is escaped."""
    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    (results / "tables" / "skipped_plots.csv").write_text(
        'plot,reason\nlatency_percentiles,"no latency histogram <sysbench 1.0> in these runs"\n')
    question = ".. include:: /etc/passwd\n*Is* `a_b_` |x| <b>?"
    study = summary.Study("s", question, {"engine": ["myrocks"], "version": ["17"]}, 0, 1, [],
                          [("engine~myrocks/version~17", "17 is not a mariadb version")])
    written = summary.write(study, results, [], complete=True)
    page = written["html"].read_text()
    assert "latency_percentiles" in page and "no latency histogram &lt;sysbench 1.0&gt; in these runs" in page
    assert "engine~myrocks/version~17" in page and "not applicable" in page
    markdown = written["md"].read_text()
    assert "no latency histogram \\<sysbench 1.0\\> in these runs" in markdown
    assert "| `engine~myrocks/version~17` |  | not applicable | 17 is not a mariadb version |" in markdown
    assert markdown.splitlines()[2] == "\\.. include:: /etc/passwd \\*Is\\* \\`a\\_b\\_\\` \\|x\\| \\<b\\>?"
    # The report's front page: the question stays literal text, no directive or markup forms.
    front = publish_parts(written["front"].read_text(), writer="html")["body"]
    assert "<p>.. include:: /etc/passwd *Is* `a_b_` |x| &lt;b&gt;?</p>" in front and "system-message" not in front


def test_markdown_tables_become_escaped_html_tables():
    text = ("Preamble with **bold** and `code` <b>raw</b>.\n\n### memory=16M\n\n"
            "| engine | tps | note |\n| :--- | ---: | :---: |\n| innodb | 1,234 | a \\| b |\n\n_host h; study: s_\n")
    out = summary.markdown_html(text, level=1)
    assert "<p>Preamble with <strong>bold</strong> and <code>code</code> &lt;b&gt;raw&lt;/b&gt;.</p>" in out
    assert "<h4>memory=16M</h4>" in out
    assert '<td style="text-align:right">1,234</td>' in out and '<td style="text-align:center">a | b</td>' in out
    assert "<p><em>host h; study: s</em></p>" in out


def test_every_caption_states_the_matrix_host_and_versions():
    """Each caption ends by including what rule summary writes; a caption added without it would not."""
    captions = [p for p in (ROOT / "workflow" / "report").glob("*.rst") if p.name != "workflow.rst"]
    assert len(captions) >= 10
    for path in captions:
        assert path.read_text().rstrip().endswith(".. include:: results/report/provenance.rst"), path.name
