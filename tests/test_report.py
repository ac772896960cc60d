"""The summary page (results/index.html, summary.md) and snakemake --report on a tiny real run,
checked in headless Chromium."""
import copy
import json
import re
import struct
import sys
import zlib
from pathlib import Path

import pytest
from docutils.core import publish_parts

from chromium import Chromium
from conftest import ROOT, tiny_study

sys.path.insert(0, str(ROOT / "workflow"))
from dbsweep import answer, manifest, markdown, summary  # noqa: E402

BAD = "filesystem~tmpfs/threads~1/workload~fio-rr"
LAPTOP, PHONE, HEIGHT = 1366, 390, 1600


# The page as laid out: the viewport's width, the page's (wider when something runs off it), the right
# edge of every table's box (its scrolling box when it has one) and of every image, with the image's
# natural width (0 when it did not load).
LAYOUT = """({viewport: window.innerWidth, page: document.documentElement.scrollWidth,
  tables: [...document.querySelectorAll('table')].map(t => Math.ceil((t.closest('.scroll') || t)
          .getBoundingClientRect().right)),
  images: [...document.images].map(i => [i.getAttribute('src'), i.naturalWidth,
                                         Math.ceil(i.getBoundingClientRect().right)])})"""


def page_layout(page: Path, width: int, screenshot: Path | None = None) -> dict:
    """The page as headless Chromium lays it out at `width` px; a screenshot of its first screen."""
    with Chromium() as browser:
        browser.open(page.as_uri(), width, HEIGHT)
        if screenshot:
            browser.screenshot(screenshot)
        return browser.evaluate(LAYOUT)


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


@pytest.mark.workflow  # runs snakemake
def test_summary_page_incomplete_then_complete_and_the_report(study_factory, tmp_path):
    config = tiny_study(description='Random reads: is <script>alert("x")</script> & | faster?')
    config["axes"]["filesystem"] = ["tmpfs"]
    config["workloads"]["fio-rr"]["options"] |= {"direct": 0, "runtime": 2, "cpus_allowed": 1023}
    # fio --parse-only (at load) accepts a CPU this host lacks; fio itself refuses it when the cell runs
    config["workloads"]["sb-rr"]["options"]["time"] = 2
    del config["workloads"]["sb-rr"]["options"]["file-extra-flags"]  # tmpfs has no O_DIRECT
    study = study_factory(config)
    results = study.path("results")

    # A cell fails: rule all cannot complete, and the onerror handler writes the page from results/runs.
    assert study.run("--keep-going", check=False).returncode != 0
    page = (results / "index.html").read_text()
    assert "Incomplete" in page and BAD in page and "CPU 1023 too large" in page
    assert ".snakemake/log/" in page, "the page names the failed run's log"
    assert f'href="logs/run/{BAD}/rep~1.log"' in page and f'href="runs/{BAD}/rep~1/attempt~' in page
    assert "<script>" not in page and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; |" in page
    assert "workload~sb-rr" not in page.split("Cells without results")[1], "the good cell is not listed"
    assert "CPU 1023 too large" in (results / "summary.md").read_text()
    assert (results / "index.html").stat().st_mtime == 0, "dated 1970, so the next run's rule summary replaces it"

    # Fixed: the run completes and rule summary writes the full page.
    fixed = copy.deepcopy(config)
    del fixed["workloads"]["fio-rr"]["options"]["cpus_allowed"]
    study.write(fixed)
    done = study.run()
    # stderr is not a terminal: the study's progress as plain lines, the last when the run ends
    progress = [line for line in done.stderr.splitlines() if re.match(r"dbsweep: \d+/2 repetitions done", line)]
    assert progress[0].startswith("dbsweep: 1/2 repetitions done") and progress[-1].startswith(
        "dbsweep: 2/2 repetitions done") and any(f"running {BAD} rep~1" in line for line in progress), progress
    page = (results / "index.html").read_text()
    assert '<a href="explore.html">' in page and (results / "explore.html").stat().st_size > 4e6
    assert "Complete" in page and "Incomplete" not in page and "cpus_allowed" not in page
    assert re.search(r"Host warnings: (none in 2|\d of 2) repetition\(s\)", page), "the host's warnings counted"
    plots = sorted(p.relative_to(results).as_posix() for p in (results / "plots").glob("*.png"))
    assert {"plots/throughput_vs_threads.png", "plots/latency_vs_threads.png", "plots/jitter.png",
            "plots/boxplot.png", "plots/timeseries_steady.png"} <= set(plots)
    assert sorted(re.findall(r'<img src="([^"]+)"', page)) == plots
    for table in ("cells", "saturation"):
        assert f'<h3>{table} <span class="links"><a href="tables/{table}.csv">CSV</a>' in page
    assert page.index('id="tables"') < page.index('id="method"') < page.index("<h2>Matrix</h2>")
    assert page.count("<table>") >= 3 and "Provenance" in page and "fio-3" in page and "--numjobs=1" in page
    markdown = (results / "summary.md").read_text()
    assert sorted(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)) == plots
    assert "| filesystem | threads | workload |" in markdown and "\\<script\\>" in markdown

    # Headless Chromium at a laptop's and a phone's width: nothing runs off the page, every image loads.
    for width in (LAPTOP, PHONE):
        shot = tmp_path / f"page-{width}.png"
        layout = page_layout(results / "index.html", width, shot)
        assert png_facts(shot)[:2] == (width, HEIGHT) and png_facts(shot)[2] > 50, "a screenshot that is not blank"
        assert layout["viewport"] == width and layout["page"] <= width, layout
        assert sorted(src for src, _, _ in layout["images"]) == plots
        assert all(natural > 100 and right <= width for _, natural, right in layout["images"]), layout["images"]
        assert len(layout["tables"]) == page.count("<table>") and max(layout["tables"]) <= width, layout["tables"]

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
    assert "Incomplete" in page and BAD in page and "CPU 1023 too large" in page
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


DEMO = ROOT / "tests" / "fixtures" / "demo_tables"  # the default study's tables, as its run wrote them
DEMO_AXES = ["engine", "memory", "filesystem", "threads", "workload"]


def test_the_answer_has_one_line_per_pair_naming_only_the_axes_that_vary():
    compared = {(c.axis, c.metric): c for c in answer.comparisons(DEMO / "comparisons.csv", DEMO_AXES)}
    assert list(compared) == [("engine", "tps"), ("memory", "tps"), ("filesystem", "iops"), ("threads", "iops")]
    assert compared["filesystem", "iops"].lines == [
        "xfs / ext4 at threads 1, workload fio-randread: 4.81 [0.998, 11.3], within noise",
        "xfs / ext4 at threads 1, workload fileio-rndrd: 6.25 [2.06, 14.9], higher",
        "xfs / ext4 at threads 4, workload fio-randread: 0.990 [0.716, 2.52], within noise",
        "xfs / ext4 at threads 4, workload fileio-rndrd: 0.985 [0.318, 1.49], within noise"]
    assert compared["engine", "tps"].lines[2] == "postgresql / innodb at memory 16M: 3.61 [1.80, 5.60], higher"
    noise = answer.noise(DEMO / "comparisons.csv", DEMO / "cell_stats.csv")
    assert noise.run_to_run_pct is None and noise.cells_with_reps == 0  # one repetition per cell
    assert 50 < noise.detectable_pct < 120
    assert "Each cell ran once" in answer.noise_text(noise) and "±87%" in answer.noise_text(noise)


def test_an_events_study_answers_with_each_event_s_recovery_first():
    """From the recovery table rule recovery wrote from a real topology study's tables (a Galera member
    killed, a semi-sync replica cut off for 4 s)."""
    axes = ["engine", "memory", "filesystem", "threads", "workload", "topology", "proxy", "events"]
    lines = answer.recovery(ROOT / "tests/fixtures/topology_tables/recovery_table.csv", axes)
    assert lines[0].startswith("loss at topology galera3: kill node2 at 4 s: 471 tps before; "
                               "under 95% for 6 s of the 6 s after it")
    assert ("not back within 95% by the window's end: 0 tps in its last second; "
            "transactions lost by the window's end 2,825") in lines[0]
    assert "no transaction completed in the window's last 6 s: one had waited 5,989 ms by its end" in lines[0]
    assert "longest transaction" not in lines[0]  # 12.6 ms, while one waited 6 s
    assert lines[1].startswith("outage at topology semisync: cut link primary-replica1 at 3 s for 4 s: 743 tps before")
    assert lines[1].endswith("replica lag still at its largest at the window's end, 6 s: no peak seen; "
                             "replicas not caught up by the window's end: 6,600 transactions behind; "
                             "semi-sync off 5 s (median of 1 repetition)")
    assert answer.recovery(ROOT / "tests/fixtures/topology_tables/missing.csv", axes) == []


def test_run_to_run_noise_from_cells_with_repetitions(tmp_path):
    (tmp_path / "cell_stats.csv").write_text(
        "threads,metric,reps,median,rep_sd\n1,iops,3,100,4\n4,iops,3,200,4\n1,lat_ms,3,2,1\n")
    (tmp_path / "comparisons.csv").write_text(
        "axis,baseline,axis_value,metric,threads,ratio,ratio_low,ratio_high,verdict\n"
        "threads,1,4,iops,4,2,1.8,2.2205,higher\n")
    noise = answer.noise(tmp_path / "comparisons.csv", tmp_path / "cell_stats.csv")
    assert noise.run_to_run_pct == 3.0 and noise.cells_with_reps == 2 and round(noise.detectable_pct) == 11
    # 2 (1.96 x 0.03 / ln 1.05)^2 = 2.9; for 10% 0.76, but never fewer than 2
    assert ("5% from noise would take about 3 repetitions per cell, 10% about 2 (a study's repeat_until runs rounds "
            "of every cell until then).") in answer.noise_text(noise)
    # a study with repeat_until says how its rounds went in a line of its own
    assert "10% about 2." in answer.noise_text(noise, rounds=True)
    assert answer.repetitions_needed(8.8, 5) == 25 and answer.repetitions_needed(8.8, 10) == 7


def test_headline_plots_declared_or_one_per_compared_axis():
    made = ["ratio_heatmap", "tps_vs_memory", "throughput_vs_threads", "ci_vs_threads", "violin"]
    assert answer.headline([], ["engine", "memory", "filesystem", "threads"], made) == (
        ["ratio_heatmap", "tps_vs_memory", "throughput_vs_threads", "ci_vs_threads"], [])
    assert answer.headline(["violin", "openloop_p99"], ["engine"], made) == (["violin"], ["openloop_p99"])


def test_tables_lose_all_na_columns_split_storage_from_database_and_the_method_is_written_once():
    docs = {name: markdown.parse((DEMO / f"{name}.md").read_text()) for name in ("cell_stats", "comparisons")}
    method = markdown.repeated_paragraphs(list(docs.values()))
    assert len(method) == 2 and method[0].startswith("Warm-up:") and method[1].startswith("_host ")
    blocks = markdown.tidy(docs["cell_stats"], DEMO_AXES, set(method))
    assert not any(isinstance(b, markdown.Para) and b.text in method for b in blocks)
    (table,) = [b for b in blocks if isinstance(b, markdown.Table)]
    storage, database = table.parts
    assert storage.title == "workloads fio-randread, fileio-rndrd" and database.title == "workloads oltp-rw"
    assert storage.header[:4] == ["filesystem", "threads", "workload", "metric"]
    assert "rep_sd" not in storage.header and "engine" in database.header
    assert all("NA" not in row[:3] for row in storage.rows)
    text = markdown.to_markdown(blocks)
    assert "_workloads oltp-rw_\n\n| engine | memory | filesystem |" in text


def test_provenance_lists_every_server_version():
    lines = dict(summary.provenance_lines({"host": "h", "tools": {"fio": "fio-3.33", "postgresql": "PostgreSQL 17.2"},
                                           "servers": {"postgresql": ["PostgreSQL 16.6", "PostgreSQL 17.2"]}}))
    assert lines["postgresql"] == "PostgreSQL 16.6; PostgreSQL 17.2" and lines["fio"] == "fio-3.33"


def test_provenance_has_the_kernels_command_line_and_settings():
    host = manifest.host()  # this host's, read from /proc
    assert host["kernel_cmdline"] == Path("/proc/cmdline").read_text().strip()
    assert host["sysctl"]["vm.swappiness"] == Path("/proc/sys/vm/swappiness").read_text().strip()
    assert set(host["sysctl"]) <= set(manifest.SYSCTLS) and "vm.dirty_ratio" in host["sysctl"]
    lines = dict(summary.provenance_lines({"host": "h", "kernel_cmdline": host["kernel_cmdline"],
                                           "sysctl": {"vm.swappiness": "1", "vm.dirty_ratio": "5"}}))
    assert lines["kernel command line"] == host["kernel_cmdline"]
    assert lines["sysctl"] == "vm.swappiness=1, vm.dirty_ratio=5"


def test_a_wide_table_stays_in_its_box_at_a_phone_width(tmp_path):
    """The default study's 20-column statistics table and its other tables, on a page as rule summary
    writes it, laid out by headless Chromium at 390 and 1366 px."""
    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    targets = []
    for path in DEMO.iterdir():
        targets.append(results / "tables" / path.name)
        targets[-1].write_text(path.read_text())
    long_cell = "engine~myrocks/memory~256M/filesystem~xfs/threads~4/workload~oltp-read-write-with-a-long-name"
    study = summary.Study("demo", "Random reads " * 30, {a: ["x"] for a in DEMO_AXES}, 14, 1, [],
                          [(long_cell, "a reason " * 20)])
    page = summary.write(study, results, targets, complete=True)["html"]
    for width in (PHONE, LAPTOP):
        layout = page_layout(page, width)
        assert layout["viewport"] == width and layout["page"] <= width, layout
        assert len(layout["tables"]) >= 8 and max(layout["tables"]) <= width, layout["tables"]
