"""The summary page (results/index.html, summary.md) and snakemake --report on a tiny real run,
checked in headless Chromium."""
import copy
import html
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
from page_check import HEIGHT, LAPTOP, PHONE, check_page, page_layout

sys.path.insert(0, str(ROOT / "workflow"))
from dbsweep import answer, definitions, manifest, markdown, summary  # noqa: E402

BAD = "filesystem~tmpfs/threads~1/workload~fio-rr"
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
    made = sorted(p.relative_to(results).as_posix() for p in (results / "plots").glob("*.png"))
    assert {"plots/throughput_vs_threads.png", "plots/latency_vs_threads.png", "plots/jitter.png",
            "plots/boxplot.png", "plots/timeseries_steady.png"} <= set(made)
    # one thread count: the vs-threads plots are listed as skipped with their reason, not shown
    skipped = {r["plot"]: r["reason"] for r in summary._csv(results / "tables" / "skipped_plots.csv")}
    assert skipped["throughput_vs_threads"].startswith("needs a threads axis with two values or more"), skipped
    assert {"latency_vs_threads", "ci_vs_threads"} <= set(skipped) and not {"jitter", "violin"} & set(skipped)
    plots = [p for p in made if Path(p).stem not in skipped]
    assert sorted(re.findall(r'<img src="([^"]+)"', page)) == plots
    # two workloads, one thread count: the answer sets them side by side, with numbers
    answer_text = page.split('id="answer"')[1].split("</section>")[0]
    assert "No axis with two values" not in page and "workload is the only axis" in page
    assert re.search(r"sb-rr / fio-rr: throughput [\d,.]+ IOPS / [\d,.]+ IOPS = [\d.]+", answer_text), answer_text
    for table in ("cells", "saturation"):
        assert f'<h3>{table} <span class="links"><a href="tables/{table}.csv">CSV</a>' in page
    assert page.index('id="tables"') < page.index('id="method"') < page.index("<h2>Matrix</h2>")
    assert page.count("<table>") >= 3 and "Provenance" in page and "fio-3" in page and "--numjobs=1" in page
    markdown = (results / "summary.md").read_text()
    assert sorted(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)) == plots
    assert "| filesystem | threads | workload |" in markdown and "\\<script\\>" in markdown

    # Headless Chromium at a laptop's and a phone's width: nothing runs off the page, every image loads.
    with Chromium() as browser:
        shots = {width: tmp_path / f"page-{width}.png" for width in (LAPTOP, PHONE)}
        layouts = {width: page_layout(results / "index.html", width, shot, browser) for width, shot in shots.items()}
    for width, shot in shots.items():
        layout = layouts[width]
        assert png_facts(shot)[:2] == (width, HEIGHT) and png_facts(shot)[2] > 50, "a screenshot that is not blank"
        assert layout["viewport"] == width and layout["page"] <= width, layout
        assert sorted(src for src, _, _ in layout["images"]) == plots
        assert all(natural > 100 and right <= width for _, natural, right in layout["images"]), layout["images"]
        assert len(layout["tables"]) == page.count("<table>") and max(layout["tables"]) <= width, layout["tables"]
        # the answer, with numbers, starts in the first screen (768 px tall on a laptop, 844 on a phone);
        # every image links to its full size and is drawn at its natural size on a phone
        assert layout["answer"]["top"] < (768 if width == LAPTOP else 844) * 0.75, layout["answer"]
        assert re.search(r"\d+ IOPS", layout["answer"]["text"]), layout["answer"]["text"]
        assert all(layout["linked"]) and (width == LAPTOP or min(layout["scale"]) >= 0.99), layout

    # snakemake --report: one category named after the study, Tables and Plots under it; every caption
    # states the matrix, the host and the versions.
    study.run("--report", "results/report.html")
    report = (results / "report.html").read_text()
    categories = json.loads(re.search(r"var categories = (\{.*?\});\n", report).group(1))
    assert list(categories) == ["tiny"]
    assert set(categories["tiny"]) == {"Tables", "Plots"}
    assert sorted(categories["tiny"]["Plots"]) == [f"results/{p}" for p in made]
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
    # nothing compared (one cell, workloads side by side, a query study): the time series beside the answer
    assert answer.headline([], [], made + ["timeseries_steady"]) == (["timeseries_steady"], [])
    assert answer.headline([], [], ["query_timing"]) == (["query_timing"], [])
    assert answer.headline([], [], []) == ([], [])


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
    with Chromium() as browser:
        layouts = {width: page_layout(page, width, browser=browser) for width in (PHONE, LAPTOP)}
    for width, layout in layouts.items():
        assert layout["viewport"] == width and layout["page"] <= width, layout
        assert len(layout["tables"]) >= 8 and max(layout["tables"]) <= width, layout["tables"]


# --- every shape of study gets an answer with numbers (synthetic tables through the real functions) ---

STORAGE_AXES = ["filesystem", "threads", "workload"]
DB_AXES = ["engine", "memory", "filesystem", "threads", "workload"]
CELL_STATS_HEADER = "filesystem,threads,workload,metric,reps,seconds,median,ci_low,ci_high,rep_sd\n"


def write_gz(path: Path, text: str) -> None:
    import gzip
    with gzip.open(path, "wt") as f:
        f.write(text)


def one_cell_tables(tables: Path) -> None:
    tables.mkdir(parents=True, exist_ok=True)
    (tables / "cell_stats.csv").write_text(
        CELL_STATS_HEADER + "tmpfs,1,fio-rr,iops,2,20,22109,21900,22300,150\n"
        "tmpfs,1,fio-rr,lat_ms,2,20,0.0412,0.04,0.043,\n")
    (tables / "comparisons.csv").write_text("\n")  # the statistics rule's, with nothing to compare
    write_gz(tables / "summary.csv.gz", "filesystem,threads,workload,rep,lat_p95_ms,lat_p99_ms,lat_max_ms\n"
             "tmpfs,1,fio-rr,1,0.9,1.5,48.2\ntmpfs,1,fio-rr,2,1.1,1.7,12\n")


def test_a_one_cell_study_answers_with_its_throughput_latency_and_the_tools_own_figures(tmp_path):
    tables = tmp_path / "tables"
    one_cell_tables(tables)
    section = answer.cells(tables / "cell_stats.csv", tables / "summary.csv.gz", STORAGE_AXES)
    assert section.lines == [
        "filesystem tmpfs, threads 1, workload fio-rr: throughput 22,109 IOPS [21,900, 22,300]; "
        "latency (median of per-second means) 0.0412 ms [0.0400, 0.0430]; the tool's own latency over the "
        "whole run: p95 1.00 ms, p99 1.60 ms, max 48.2 ms"]
    assert answer.cells(tables / "missing.csv", tables / "summary.csv.gz", STORAGE_AXES) is None


def test_two_workloads_are_set_side_by_side_with_their_ratio_even_in_different_units(tmp_path):
    (tmp_path / "cell_stats.csv").write_text(
        CELL_STATS_HEADER + "tmpfs,1,fio-rr,iops,1,5,20000,19000,21000,\ntmpfs,1,fio-rr,lat_ms,1,5,0.05,0.04,0.06,\n"
        "tmpfs,1,sb-oltp,tps,1,5,500,450,550,\ntmpfs,1,sb-oltp,lat_p95_ms,1,5,4,3,5,\n"
        "tmpfs,1,sb-rr,iops,1,5,10000,9000,11000,\ntmpfs,1,sb-rr,lat_p95_ms,1,5,0.1,0.09,0.11,\n")
    (tmp_path / "comparisons.csv").write_text("\n")
    section = answer.side_by_side(tmp_path / "cell_stats.csv", tmp_path / "comparisons.csv", STORAGE_AXES)
    assert section.title.startswith("workload side by side with fio-rr")
    assert section.lines == [
        "sb-oltp / fio-rr: throughput 500 transactions/s / 20,000 IOPS = 0.0250 (units differ); "
        "latency 4.00 ms / 0.0500 ms = 80.0 (different figures: latency (median of per-second p95s) / latency "
        "(median of per-second means))",
        "sb-rr / fio-rr: throughput 10,000 IOPS / 20,000 IOPS = 0.500; latency 0.100 ms / 0.0500 ms = 2.00 "
        "(different figures: latency (median of per-second p95s) / latency (median of per-second means))"]
    named = answer.side_by_side(tmp_path / "cell_stats.csv", tmp_path / "comparisons.csv", STORAGE_AXES,
                                baseline="sb-rr")
    assert named.lines[0].startswith("fio-rr / sb-rr: throughput 20,000 IOPS / 10,000 IOPS = 2.00")
    # an axis the statistics rule did compare is answered there, not here
    (tmp_path / "comparisons.csv").write_text("axis,baseline,axis_value,metric\nworkload,fio-rr,sb-rr,iops\n")
    assert answer.side_by_side(tmp_path / "cell_stats.csv", tmp_path / "comparisons.csv", STORAGE_AXES) is None


def test_a_query_study_answers_with_time_per_execution_against_its_baseline(tmp_path):
    (tmp_path / "query_timing.csv").write_text(
        "name,engine,configuration,value,executions,relative,ratio_low,ratio_high,verdict\n"
        "ms,innodb,engine=innodb,12.5,20,1,,,\nms,myrocks,engine=myrocks,25,20,2,1.8,2.2,higher\n"
        "rows,innodb,engine=innodb,100,20,1,,,\n")
    section = answer.queries(tmp_path / "query_timing.csv", ["engine"])
    assert section.lines == ["engine=innodb: 12.5 ms per execution (median of 20 executions) (the baseline)",
                             "engine=myrocks: 25.0 ms per execution (median of 20 executions); 2.00 [1.80, 2.20] "
                             "of the baseline's, higher"]
    assert answer.queries(tmp_path / "missing.csv", ["engine"]) is None


def write_png(path: Path, width: int = 880, height: int = 550) -> Path:
    """A grey PNG of the size rule figures draws (8 x 5 in at 110 dpi), with a darker band."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\0" + bytes([60 if 200 < y < 220 else 230]) * width for y in range(height))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return path


def shape_pages(tmp_path: Path) -> dict[str, Path]:
    """The pages rule summary writes for four shapes, from synthetic tables: one cell, two workloads, a
    query study, a study with its own analysis script."""
    pages = {}
    # one cell
    results = tmp_path / "one-cell" / "results"
    one_cell_tables(results / "tables")
    plot = write_png(results / "plots" / "timeseries_steady.png")
    study = summary.Study("one cell", "Random reads on tmpfs", {"filesystem": ["tmpfs"], "threads": ["1"],
                                                                "workload": ["fio-rr"]}, 1, 2, [])
    pages["one cell"] = summary.write(study, results, [plot], complete=True)["html"]
    # two workloads
    results = tmp_path / "two-workloads" / "results"
    (results / "tables").mkdir(parents=True)
    (results / "tables" / "cell_stats.csv").write_text(
        CELL_STATS_HEADER + "tmpfs,1,fio-rr,iops,1,5,20000,19000,21000,\ntmpfs,1,sb-oltp,tps,1,5,500,450,550,\n")
    (results / "tables" / "comparisons.csv").write_text("\n")
    plot = write_png(results / "plots" / "violin.png")
    study = summary.Study("two workloads", "fio or sysbench?", {"filesystem": ["tmpfs"], "threads": ["1"],
                                                                 "workload": ["fio-rr", "sb-oltp"]}, 2, 1, [])
    pages["two workloads"] = summary.write(study, results, [plot], complete=True)["html"]
    # a query study
    results = tmp_path / "query" / "results"
    (results / "tables").mkdir(parents=True)
    (results / "tables" / "query_timing.csv").write_text(
        "name,engine,configuration,value,executions,relative,ratio_low,ratio_high,verdict\n"
        "ms,innodb,engine=innodb,12.5,20,1,,,\nms,myrocks,engine=myrocks,25,20,2,1.8,2.2,higher\n")
    plot = write_png(results / "plots" / "query_timing.png", 1210, 1100)
    study = summary.Study("query", "Which engine runs my query faster?", {"engine": ["innodb", "myrocks"]}, 2, 1, [])
    pages["query"] = summary.write(study, results, [plot], complete=True)["html"]
    # a user analysis script
    results = tmp_path / "user" / "results"
    one_cell_tables(results / "tables")
    folder = results / "user" / "per_thread"
    folder.mkdir(parents=True)
    (folder / "per_thread.csv").write_text("threads,iops_per_thread\n1,22109\n")
    (folder / "long.csv").write_text("n\n" + "".join(f"{i}\n" for i in range(60)))
    (folder / "notes.md").write_text("Per thread: **IOPS** / threads.\n\n"
                                     "| threads | ratio |\n| ---: | ---: |\n| 1 | 1.00 |\n")
    write_png(folder / "per_thread.png")
    (folder / "raw.pdf").write_bytes(b"%PDF-1.4\n")
    (folder / "outputs.json").write_text(json.dumps(
        {"tables": ["long.csv", "notes.md", "per_thread.csv"], "plots": ["per_thread.png", "raw.pdf"], "other": []}))
    study = summary.Study("user script", "", {"filesystem": ["tmpfs"], "threads": ["1"], "workload": ["fio-rr"]},
                          1, 2, [])
    pages["user script"] = summary.write(study, results, [], complete=True, user=[folder])["html"]
    return pages


def test_every_shape_s_page_answers_with_numbers_in_its_first_screen_and_links_its_images(tmp_path):
    """Laid out by headless Chromium at a laptop's and a phone's width (first screen: 768 and 844 px
    tall): an Answer section with numbers starts in it; every image loads, links to itself, and on a
    phone is drawn at 80% of its size or more (its labels readable: it scrolls sideways in its figure)."""
    pages = shape_pages(tmp_path)
    expected = {"one cell": "throughput 22,109 IOPS [21,900, 22,300]",
                "two workloads": "sb-oltp / fio-rr: throughput 500 transactions/s / 20,000 IOPS = 0.0250",
                "query": "engine=myrocks: 25.0 ms per execution",
                "user script": "throughput 22,109 IOPS"}
    with Chromium() as browser:  # one for every page: a Chromium's start is a second of CPU
        layouts = {(shape, width): page_layout(page, width, browser=browser)
                   for shape, page in pages.items() for width in (LAPTOP, PHONE)}
    for shape, page in pages.items():
        text = page.read_text()
        assert "No axis with two values" not in text
        for width, screen in ((LAPTOP, 768), (PHONE, 844)):
            layout = layouts[shape, width]
            assert layout["answer"] and layout["answer"]["top"] < screen * 0.6, (shape, width, layout["answer"])
            assert expected[shape] in layout["answer"]["text"].replace("\n", " "), (shape, layout["answer"]["text"])
            assert layout["page"] <= width, (shape, width, layout)
            assert layout["images"] and all(natural > 100 and right <= width
                                            for _, natural, right in layout["images"]), (shape, layout["images"])
            assert all(layout["linked"]), (shape, layout["linked"])
            if width == PHONE:
                assert min(layout["scale"]) >= 0.8, (shape, layout["scale"])
    one = pages["one cell"].read_text()
    assert "1 cell × 2 repetitions" in one and "The one cell (median per-second value [95% CI])" in one
    method = one.split('id="figures"')[1]
    assert "<dt>latency (median of per-second means)</dt>" in method and "per-second p95s" not in method
    assert "<dt>the tool&#x27;s own latency over the whole run</dt>" in method
    user = pages["user script"].read_text()
    assert '<h2 id="user">Your own analysis</h2>' in user and ">22109</td>" in user
    assert "<strong>IOPS</strong>" in user and 'href="user/per_thread/raw.pdf"' in user
    assert "per_thread.csv" in user and "#### notes.md" in (pages["user script"].parent / "summary.md").read_text()
    assert "The first 50 of 60 rows; the file has them all." in user and ">49</td>" in user and ">50</td>" not in user


# The analysis' tables of a storage sweep and a database study, written by the real R rules from the
# testthat helpers' hand-built studies, with each study's axes and values (axes.json).
R_TABLES = r"""
options(dbsweep.plots = FALSE)  # tables only: R starts without ggplot2
source("tests/testthat/helper-data.R"); source("tests/testthat/helper-db-data.R")
out <- commandArgs(TRUE)[1]
stats_out <- function(dir) list(steady_state = file.path(dir, "steady_state.csv"),
  cell_stats_csv = file.path(dir, "cell_stats.csv"), cell_stats_md = file.path(dir, "cell_stats.md"),
  comparisons_csv = file.path(dir, "comparisons.csv"), comparisons_md = file.path(dir, "comparisons.md"))
sweep <- make_sweep()
input <- write_sweep(sweep)
dir <- file.path(out, "storage")
rule_tables(input, list(cells_csv = file.path(dir, "cells.csv"), cells_md = file.path(dir, "cells.md"),
            saturation_csv = file.path(dir, "saturation.csv"), saturation_md = file.path(dir, "saturation.md")),
            list(axes = sweep$axes), log = file.path(dir, "t.log"))
rule_statistics(input, stats_out(dir), list(axes = sweep$axes), log = file.path(dir, "s.log"))
db <- make_db_sweep(duration = 30L)
dir <- file.path(out, "database")
input <- write_db_sweep(db)
rule_statistics(input, stats_out(dir), list(axes = db$axes), log = file.path(dir, "s.log"))
names <- c("engine_memory", "binlog", "efficiency")
rule_db_tables(c(input, stats_out(dir)), as.list(stats::setNames(file.path(dir, paste0(rep(names, each = 2),
               c(".csv", ".md"))), paste0(rep(names, each = 2), c("_csv", "_md")))),
               list(axes = db$axes), log = file.path(dir, "d.log"))
values <- function(s) lapply(stats::setNames(s$axes, s$axes), function(a) unique(as.character(s$summary[[a]])))
jsonlite::write_json(list(storage = values(sweep), database = values(db)), file.path(out, "axes.json"))
"""


def test_every_figure_of_the_tables_and_the_answer_has_a_definition_with_its_unit(tmp_path):
    """The tables the R rules write for a storage sweep and a database study, on a page as rule summary
    writes it: the Method section defines each of their figures (and the answer's); a name nobody
    defined fails here. The two p95s are told apart."""
    import subprocess
    done = subprocess.run(["Rscript", "-e", R_TABLES, str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    axes = json.loads((tmp_path / "axes.json").read_text())
    for shape in ("storage", "database"):
        matrix = {a: v if isinstance(v, list) else [v] for a, v in axes[shape].items()}
        results = tmp_path / shape / "results"
        (results / "tables").mkdir(parents=True)
        targets = []
        for path in (tmp_path / shape).glob("*.*"):
            if path.suffix in (".md", ".csv"):
                targets.append(results / "tables" / path.name)
                targets[-1].write_text(path.read_text())
        study = summary.Study(shape, "", matrix, 1, 1, [])
        written = summary.write(study, results, targets, complete=True)
        page = {"tables": [(p, markdown.tidy(markdown.parse(p.read_text()), list(matrix)))
                           for p in targets if p.suffix == ".md"], "comparisons": [1], "sections": [1]}
        headers = [h for _, blocks in page["tables"] for b in blocks if isinstance(b, markdown.Table)
                   for h in b.header + [x for part in b.parts for x in part.header]]
        not_figures = set(matrix) | {v for values in matrix.values() for v in values}
        defined, missing = definitions.figures(headers + list(summary.ANSWER_FIGURES), not_figures)
        assert missing == [], (shape, missing)
        text = written["html"].read_text()
        assert '<h3 id="figures">Figures on this page</h3>' in text
        for name, _sentence in defined:
            assert f"<dt>{html.escape(name)}</dt>" in text or name in summary.ANSWER_FIGURES, name
    storage = (tmp_path / "storage" / "results" / "index.html").read_text()
    assert "<dt>persec_lat_p95_ms</dt><dd>the p95 of per-second means" in storage
    assert "<dt>lat_max_ms</dt><dd>the tool&#x27;s own maximum latency over the whole run" in storage
    unit = re.compile(r"(\bms\b|%|\bMB\b|\bKB\b|MiB/s|IOPS|transactions/s|\bcount\b|no unit|metric's unit|"
                      r"\bin s\b|0\.\.1|requests|microseconds|context switches|threads|rows/s|queries/s)")
    text_columns = {"metric", "ci_method", "lat_source", "configuration", "name", "verdict", "test", "phase", "status"}
    no_unit = [n for n, s in definitions.DEFINITIONS.items() if n not in text_columns and not unit.search(s)]
    assert no_unit == [], "every figure's definition names its unit"


def test_a_query_study_s_answer_reads_the_table_rule_query_timing_writes(tmp_path):
    """query_table() (the real R function) on executions with a known answer: cold takes 5x the warm
    baseline, hot the same; the answer's lines say so with numbers."""
    import subprocess
    script = r"""
    options(dbsweep.plots = FALSE)  # a table only: R starts without ggplot2
    source("workflow/R/library.R", chdir = TRUE)
    ex <- rbind(data.table(cache = "warm", rep = 1L, execution = 1:6, name = "ms", value = c(10, 12, 11, 13, 9, 11)),
                data.table(cache = "cold", rep = 1L, execution = 1:6, name = "ms", value = c(50, 55, 60, 52, 58, 54)),
                data.table(cache = "hot", rep = 1L, execution = 1:6, name = "ms", value = c(9, 13, 10, 12, 11, 12)),
                data.table(cache = "warm", rep = 1L, execution = 1:6, name = "rows", value = 10))
    write_csv(query_table(ex, "cache", list(cache = "warm")), commandArgs(TRUE)[1])
    """
    done = subprocess.run(["Rscript", "-e", script, str(tmp_path / "query_timing.csv")], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = answer.queries(tmp_path / "query_timing.csv", ["cache"])
    assert lines.lines[0].startswith("cache=cold: 54.5 ms per execution (median of 6 executions); 4.95 [")
    assert lines.lines[0].endswith("of the baseline's, higher")
    assert lines.lines[1].endswith("within noise") and lines.lines[1].startswith("cache=hot: 11.5 ms")
    assert lines.lines[2] == "cache=warm: 11.0 ms per execution (median of 6 executions) (the baseline)"


def test_an_insert_benchmark_study_answers_with_each_phase_s_rates(tmp_path):
    """insert_table() (the real R function) on phases with a known answer: PostgreSQL's qr queries are
    twice InnoDB's, its inserts fell short of the 100/s target; the load phase's 0 queries/s are left out."""
    import subprocess
    script = r"""
    options(dbsweep.plots = FALSE)  # a table only: R starts without ggplot2
    source("workflow/R/library.R", chdir = TRUE)
    rows <- function(engine, rep, phase, inserts_s, queries_s, target = NA) {
      data.table(engine = engine, rep = rep, phase = phase, target_inserts_s = target, inserts_s = inserts_s,
                 queries_s = queries_s, cpu_us_per_op = 100, kb_read_per_op = 1, kb_written_per_op = 2, db_mb = 50)
    }
    phases <- rbind(rows("innodb", 1:3, "qr", c(100, 98, 99), c(1000, 1100, 900), 100),
                    rows("postgresql", 1:3, "qr", c(80, 70, 90), c(2000, 2200, 1800), 100),
                    rows("innodb", 1, "load", 5000, 0), rows("postgresql", 1, "load", 10000, 0))
    write_csv(insert_table(phases, "engine", list(engine = "innodb")), commandArgs(TRUE)[1])
    """
    done = subprocess.run(["Rscript", "-e", script, str(tmp_path / "insert_benchmark.csv")], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = answer.insert_phases(tmp_path / "insert_benchmark.csv", ["engine"]).lines
    assert lines[0] == "load phase, engine=innodb: 5,000 inserted rows/s (the baseline)"
    assert lines[1].startswith("load phase, engine=postgresql: 10,000 inserted rows/s; 2.00")
    assert ("qr phase, engine=postgresql: 80.0 inserted rows/s (short of the target 100); "
            "0.804 [0.657, 0.984] of the baseline's, lower") in lines
    queries = [line for line in lines if "queries/s" in line]
    assert queries[1].startswith("qr phase, engine=postgresql: 2,000 queries/s; 2.00 [") and queries[1].endswith(
        "of the baseline's, higher")
    assert not any("load phase" in line and "queries/s" in line for line in lines)


def test_a_ratio_without_interval_or_verdict_says_why_rather_than_no_verdict(tmp_path):
    """An insert-benchmark study of one repetition per engine (the shape of a real run's table): the
    ratio to the baseline has no interval and no verdict, and the answer says it ran once."""
    (tmp_path / "insert_benchmark.csv").write_text(
        "phase,metric,engine,reps,target_inserts_s,value,configuration,baseline,relative,ratio_low,ratio_high,"
        "verdict,test,short_of_target\n"
        "load,inserts_s,innodb,1,,8126.5,engine=innodb,TRUE,1,,,,,FALSE\n"
        "load,inserts_s,postgresql,1,,26545.6,engine=postgresql,FALSE,3.2665,,,,,FALSE\n"
        "qr,queries_s,postgresql,2,,3395,engine=postgresql,FALSE,1.19,,,,,FALSE\n")
    lines = answer.insert_phases(tmp_path / "insert_benchmark.csv", ["engine"]).lines
    assert lines[1] == ("load phase, engine=postgresql: 26,546 inserted rows/s; 3.27 of the baseline's "
                        "(one repetition: no interval or verdict)")
    assert lines[2].endswith("1.19 of the baseline's (no interval or verdict: too few values to test)")
    assert not any("no verdict" in line.split("(")[0] for line in lines)


OPENLOOP_HEADER = ("engine,memory,filesystem,threads,workload,rep,rate_percent,rate_calibrated_tps,rate,"
                   "rate_achieved,achieved_pct,queue_max,queue_end,lat_p99_ms,lat_mean_ms,status\n")


def test_an_open_loop_study_answers_first_with_each_cell_at_its_rate(tmp_path):
    """openloop.csv as rule openloop writes it (one row per repetition): at threads 1 both repetitions kept
    up (medians 104 achieved, p99 40 ms); at threads 2 one of two fell short. The page says so before the
    throughput ratio, which for an open-loop study is the rate it was given."""
    results = tmp_path / "results"
    one_cell_tables(results / "tables")
    (results / "tables" / "openloop.csv").write_text(
        OPENLOOP_HEADER + "innodb,32M,tmpfs,1,oltp,1,50,206.63,103,103,100,2,1,30,10,kept up\n"
        "innodb,32M,tmpfs,1,oltp,2,50,206.63,103,105,102,4,1,50,12,kept up\n"
        "innodb,32M,tmpfs,2,oltp,1,50,206.63,103,96.6,93.8,900,850,15.8,4.14,short of its rate\n"
        "innodb,32M,tmpfs,2,oltp,2,50,206.63,103,103,100,1,1,15.8,4.14,kept up\n")
    section = answer.open_loop(results / "tables" / "openloop.csv", DB_AXES)
    assert section.lines == [
        "threads 1: target rate 103 transactions/s (50% of the calibrated 207); achieved 104 (101%), kept up; "
        "latency from arrival (time in the queue included): p99 40.0 ms, mean 11.0 ms; longest queue 3 "
        "(median of 2 repetitions)",
        "threads 2: target rate 103 transactions/s (50% of the calibrated 207); achieved 99.8 (96.9%), short of "
        "its rate in 1 of 2 repetitions; latency from arrival (time in the queue included): p99 15.8 ms, mean "
        "4.14 ms; longest queue 450 (median of 2 repetitions)"]
    assert answer.open_loop(results / "tables" / "missing.csv", DB_AXES) is None
    study = summary.Study("open loop", "", {"engine": ["innodb"], "memory": ["32M"], "filesystem": ["tmpfs"],
                                            "threads": ["1", "2"], "workload": ["oltp"]}, 2, 2, [])
    page = summary.write(study, results, [], complete=True)["html"].read_text()
    answer_html = page.split('id="answer"')[1]
    assert answer_html.index("At each cell&#x27;s rate of arrivals") < answer_html.index("The one cell")
    method = page.split('id="figures"')[1]
    assert "<dt>latency from arrival</dt>" in method and "<dt>rate</dt>" in method


def test_the_shapes_page_check_fails_on_a_page_that_does_not_answer(tmp_path):
    """check_page (tests/page_check.py, which the workflow tests run on their studies' pages) passes a
    page that answers and fails each defect it guards: the answer below the first screen, a false
    sentence, an image that does not load or is not linked to its full size, a table that runs off."""
    write_png(tmp_path / "plot.png", 300, 200)  # narrower than a phone: drawn at its natural size
    answer_html = '<section id="answer"><h2>Answer</h2><p>ext4 / tmpfs: 0.182 [0.162, 0.304], lower</p>'
    good = answer_html + '<a href="plot.png"><img src="plot.png"></a></section>'
    pages = {"good": good, "below the first screen": '<div style="height:900px"></div>' + good,
             "a false sentence": good + "<p>No axis with two values or more to compare</p>",
             "no verdict": good.replace("lower", "no verdict"),
             "an image not loaded": good.replace('src="plot.png"', 'src="missing.png"'),
             "an image not linked": answer_html + '<img src="plot.png"></section>',
             "a table cut off": good + '<table><tr><td style="min-width:2000px">x</td></tr></table>'}
    with Chromium() as browser:
        for name, body in pages.items():
            page = tmp_path / f"{name}.html"
            page.write_text(f'<!doctype html><meta name="viewport" content="width=device-width">{body}')
            if name == "good":
                check_page(page, r"ext4 / tmpfs: [\d.]+ \[", name, browser=browser)
            else:
                with pytest.raises(AssertionError):
                    check_page(page, r"ext4 / tmpfs: [\d.]+ \[", name, browser=browser)


TOPOLOGY_RULES = r"""
source("workflow/R/library.R", chdir = TRUE)
fixture <- function(name) file.path("tests/fixtures/topology_tables", name)
args <- commandArgs(TRUE)
tables <- args[1]
plots <- args[2]
axes <- c("engine", "memory", "filesystem", "threads", "workload", "topology", "proxy", "events")
rule_topology(list(summary = fixture("summary.csv.gz"), counters = fixture("counters.csv.gz"),
                   events = fixture("events.csv.gz"), provenance = fixture("provenance.json"),
                   samples = fixture("samples.csv.gz")),
              list(table_csv = file.path(tables, "topology.csv"), table_md = file.path(tables, "topology.md"),
                   replication = file.path(plots, "replication.png")),
              list(axes = axes), log = file.path(tables, "topology.log"))
rule_recovery(list(recovery = fixture("recovery.csv.gz"), provenance = fixture("provenance.json")),
              list(table_csv = file.path(tables, "recovery.csv"), table_md = file.path(tables, "recovery.md")),
              list(axes = axes), log = file.path(tables, "recovery.log"))
"""


def test_a_topology_study_s_page_answers_with_each_event_s_recovery_in_its_first_screen(tmp_path):
    """A topology study's page, from a real topology study's tables (tests/fixtures/topology_tables: a
    semi-sync replica cut off, a Galera member killed) through the real R rules (topology, recovery) and
    rule summary's writer, checked in Chromium at 1366 and 390 px. No study is run for it: the workflow
    test of topologies (test_topology_run.py) stops at the topology table and plot."""
    import shutil
    import subprocess
    results = tmp_path / "results"
    tables, plots = results / "tables", results / "plots"
    tables.mkdir(parents=True)
    plots.mkdir()
    done = subprocess.run(["Rscript", "-e", TOPOLOGY_RULES, str(tables), str(plots)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.copy(ROOT / "tests/fixtures/topology_tables/provenance.json", tables)
    # the links' round trips a busy host delivered (as a real run of test_topology_run.py's study had them):
    # settings that ran otherwise come before the answer, folded, so that the answer stays in the first screen
    head = "engine,memory,filesystem,threads,workload,topology,proxy,events,rep,host,kind,key,declared,delivered,"
    cell = {"semisync": "innodb,64M,ext4,4,rw,semisync,first,outage,1,vm,", "galera3":
            "innodb,64M,ext4,4,rw,galera3,first,loss,1,vm,"}
    write_gz(tables / "delivered.csv.gz", head + "source,tolerance,verdict\n" + "".join(
        f"{cell[t]}link,{link} round trip ms (window {moment}),2,{ms},ping,±1 ms,deviated\n"
        for t, link, moment, ms in [("semisync", "primary-replica1", "start", 10.2),
                                    ("semisync", "primary-replica1", "end", 4.87),
                                    ("galera3", "node1-node2", "start", 3.69), ("galera3", "node1-node3", "end", 3.73)])
        + f"{cell['semisync']}filesystem,type,ext4,ext4,/proc/self/mounts,exact,equal\n")
    matrix = {"engine": ["innodb"], "memory": ["64M"], "filesystem": ["ext4"], "threads": ["4"], "workload": ["rw"],
              "topology": ["semisync", "galera3"], "proxy": ["first"], "events": ["outage", "loss"]}
    study = summary.Study("topology", "What does a replica cut off, or a member killed, cost?", matrix, 2, 1, [])
    page = summary.write(study, results, [tables / "topology.md", tables / "recovery.md",
                                          plots / "replication.png"], complete=True)["html"]
    check_page(page, r"^Answer Through each timed event .*cut link primary-replica1 at 3 s for 4 s: 743 tps "
               r"before; .*replicas not caught up by the window's end: 6,600 transactions behind", "a topology")
    text = page.read_text()
    assert "4 setting(s) ran otherwise than declared" in text.split('id="answer"')[0]
    assert "<summary>The 4 settings that ran otherwise" in text and "declared 2, delivered 10.2" in text
    assert '<a href="plots/replication.png"><img src="plots/replication.png"' in text
    assert "<dt>replication</dt><dd>per second: the client&#x27;s transactions/s and latency" in text


def test_sysbench_statement_plans_say_which_cells_ran_which_plan(tmp_path):
    """plans.csv.gz as aggregate writes it for a sysbench study (one row per statement and repetition): a
    statement with one plan in both cells says so; one whose plan changed names each plan's cells."""
    tables = tmp_path / "results" / "tables"
    tables.mkdir(parents=True)
    write_gz(tables / "plans.csv.gz", "engine,memory,rep,query,statement,fingerprint,seconds,file\n"
             "innodb,32M,1,point_select,ANALYZE FORMAT=JSON,aaa,0.01,runs/a.json\n"
             "innodb,64M,1,point_select,ANALYZE FORMAT=JSON,aaa,0.01,runs/b.json\n"
             "innodb,32M,1,order_range,ANALYZE FORMAT=JSON,bbb,0.01,runs/c.json\n"
             "innodb,64M,1,order_range,ANALYZE FORMAT=JSON,ccc,0.01,runs/d.json\n")
    assert summary.statement_plans(tmp_path / "results", ["engine", "memory"]) == [
        "point_select: one plan (aaa) in every one of the 2 cells", "order_range: 2 plans: bbb in memory 32M; "
        "ccc in memory 64M"]
    (tables / "query_timing.csv").write_text("name\n")  # a query study: its plans have their own section
    assert summary.statement_plans(tmp_path / "results", ["engine", "memory"]) == []


def test_every_plot_a_rule_can_draw_has_a_definition_and_the_page_defines_those_it_shows(tmp_path):
    smk = (ROOT / "workflow" / "rules" / "analyse.smk").read_text()
    names = set(re.findall(r'\{PLOTS\}/(\w+)\.png', smk))
    names |= set(re.findall(r'^\s+(\w+) = "', (ROOT / "workflow/R/statistics_plots.R").read_text().split(
        "PLOT_TITLES <- list(")[1].split(")\n")[0], re.M))  # rule figures' kinds
    assert {"timeseries_steady", "throughput_vs_threads", "replication", "violin"} <= names
    assert names - set(definitions.PLOTS) == set()
    page = shape_pages(tmp_path)["one cell"].read_text()
    method = page.split('id="plot-figures"')[1]
    assert "<dt>timeseries_steady</dt><dd>each repetition&#x27;s per-second throughput" in method
