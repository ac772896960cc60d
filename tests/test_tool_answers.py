"""fio's answers about a study's options, kept for the next process: each Snakemake process (the main one and
every job) loads the study, and fio spends about 0.15 s of CPU before it answers."""
import os
import shutil
import stat
from types import SimpleNamespace

import pytest

from dbsweep import tool_answers
from dbsweep.errors import ConfigError
from dbsweep.workloads import fio


@pytest.fixture
def counted_fio(tmp_path, monkeypatch):
    """The real fio, behind a script that counts its calls; answers kept in tmp_path/answers.json."""
    real = shutil.which("fio")
    wrapper = tmp_path / "bin" / "fio"
    wrapper.parent.mkdir()
    calls = tmp_path / "calls"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(tool_answers, "FILE", tmp_path / "answers.json")
    monkeypatch.setattr(tool_answers, "_KNOWN", {})
    monkeypatch.setattr(tool_answers, "_NEW", set())

    def count() -> int:
        return len(calls.read_text().splitlines()) if calls.exists() else 0
    return SimpleNamespace(path=wrapper, count=count)


def new_process(monkeypatch):
    """This process saves its answers, as the workflow does once the study has loaded; another one starts
    with nothing in memory and the file on disk."""
    tool_answers.save()
    monkeypatch.setattr(tool_answers, "_KNOWN", {})


def test_a_check_asks_fio_once_and_a_new_process_reads_the_answer(counted_fio, monkeypatch):
    options = {"rw": "randread", "bs": "16k", "size": "1M"}
    fio.parse_only(options, "workloads.w.options")
    asked = counted_fio.count()
    assert asked == 1
    assert not tool_answers.FILE.exists()  # nothing on disk before the study has loaded
    new_process(monkeypatch)
    fio.parse_only(options, "workloads.w.options")
    assert counted_fio.count() == asked
    # a refusal is kept too, and still refuses with fio's own words
    bad = {"rw": "randwhat", "size": "1M"}
    with pytest.raises(ConfigError, match=r"workloads.w.options.rw: 'randwhat' refused by fio"):
        fio.parse_only(bad, "workloads.w.options")
    new_process(monkeypatch)
    with pytest.raises(ConfigError, match=r"workloads.w.options.rw: 'randwhat' refused by fio"):
        fio.parse_only(bad, "workloads.w.options")
    assert counted_fio.count() == asked + 1


def test_another_build_of_the_tool_is_asked_again(counted_fio, monkeypatch):
    argv = ["fio", "--parse-only", "--name=check", "--filename=fio.data", "--size=1M"]
    first = tool_answers.answer(argv)
    assert first[0] == 0
    new_process(monkeypatch)
    counted_fio.path.write_text(counted_fio.path.read_text() + "\n")  # a new size and mtime: another build
    assert tool_answers.answer(argv) == first
    assert counted_fio.count() == 2


def test_without_the_tool_or_a_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tool_answers, "FILE", None)
    monkeypatch.setattr(tool_answers, "_KNOWN", {})
    monkeypatch.setattr(tool_answers, "_NEW", set())
    assert tool_answers.answer(["no-such-tool-here", "--version"]) is None
    said = tool_answers.answer(["fio", "--version"])
    assert said[0] == 0 and said[1].startswith("fio-")
    tool_answers.save()
    assert list(tmp_path.iterdir()) == []  # nothing written without a file named
