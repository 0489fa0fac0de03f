"""Whole-file writes (racer_bench.system.files): atomic, private temp names, nothing left over."""

from __future__ import annotations

import threading

import pytest

from racer_bench.system import files


def test_a_write_replaces_the_file_and_leaves_no_temp_file(tmp_path) -> None:
    path = tmp_path / "deep" / "cache.json"
    files.write_text(path, "first")
    files.write_text(path, "second")
    assert path.read_text(encoding="utf-8") == "second"
    assert [p.name for p in path.parent.iterdir()] == ["cache.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temp_file(tmp_path) -> None:
    path = tmp_path / "state.pt"
    files.write_bytes(path, b"old")
    with pytest.raises(RuntimeError), files.replacing(path) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer died")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.pt"]


def test_writers_side_by_side_each_leave_a_whole_file(tmp_path) -> None:
    path = tmp_path / "verdict.json"
    texts = [str(i) * 200_000 for i in range(8)]
    errors: list[BaseException] = []

    def write(text: str) -> None:
        try:
            for _ in range(5):
                files.write_text(path, text)
        except BaseException as error:  # collected: a thread's exception would be lost
            errors.append(error)

    threads = [threading.Thread(target=write, args=(t,)) for t in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert path.read_text(encoding="utf-8") in texts
    assert [p.name for p in tmp_path.iterdir()] == ["verdict.json"]
