"""The live progress line: each tool's per-second output read as it is written (real captured output)."""
import io
import re
import threading
import time
from pathlib import Path

from dbsweep.progress import Follow
from dbsweep.workloads import fio, sysbench_fileio, sysbench_oltp

FIXTURES = Path(__file__).parent / "fixtures"


def readings(module, name):
    state = {}
    lines = re.split(r"[\r\n]", (FIXTURES / name / "stdout.txt").read_text())
    return [r for r in (module.live(line, state) for line in lines) if r is not None]


def test_each_tool_reads_its_own_per_second_lines():
    assert readings(sysbench_oltp, "oltp_read_write_overload") == [(1, 390.46, "tps"), (2, 510.37, "tps"),
                                                                    (3, 472.01, "tps")]
    # sysbench fileio prints MiB/s; the header's block size (16KiB) makes them IOPS
    assert readings(sysbench_fileio, "sysbench_rndrd") == [(1, 1101.21 * 64, "IOPS"), (2, 1097.12 * 64, "IOPS")]
    # fio's status line ends in \r and gives no elapsed second; 67.9k is 67,900
    assert readings(fio, "fio_status_randrw") == [(None, 67900.0, "IOPS"), (None, 63200.0, "IOPS")]
    assert fio.live("Jobs: 1 (f=1): [m(1)][50.0%][r=38.5MiB/s,w=16.4MiB/s][r=9861,w=4212 IOPS][eta 00m:01s]",
                    {}) == (None, 14073.0, "IOPS")
    assert sysbench_oltp.live("SQL statistics:", {}) is None


def test_follow_writes_a_line_per_second_while_the_file_grows(tmp_path):
    """The fixture's stdout written out as sysbench wrote it, a line at a time, while Follow reads."""
    text = (FIXTURES / "oltp_read_write_overload" / "stdout.txt").read_text().splitlines(keepends=True)
    out = tmp_path / "stdout.txt"
    log = io.StringIO()

    def tool():
        with open(out, "w") as f:
            for line in text:
                f.write(line)
                f.flush()
                time.sleep(0.12 if line.startswith("[ ") else 0)

    writer = threading.Thread(target=tool)
    with Follow(out, sysbench_oltp.live, 3, log, every=0.1) as follow:
        writer.start()
        writer.join()
        time.sleep(0.3)
    lines = log.getvalue().splitlines()
    assert lines[-1] == "progress: run 3/3 s, 472 tps"
    assert "progress: run 1/3 s, 390 tps" in lines and follow.lines_written == len(lines) <= 3


def test_follow_without_output_writes_nothing(tmp_path):
    log = io.StringIO()
    with Follow(tmp_path / "never.txt", fio.live, None, log, every=0.05):
        time.sleep(0.2)
    assert log.getvalue() == ""
