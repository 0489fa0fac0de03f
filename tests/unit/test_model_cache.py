"""The dequantized-model cache is published atomically, and a lost race keeps the winner."""

from pathlib import Path

import pytest

from racer_bench.models.loaders import publish_folder


def _folder(path: Path, text: str) -> Path:
    path.mkdir()
    (path / "config.json").write_text(text)
    return path


def test_publish_renames_the_finished_folder_into_place(tmp_path: Path) -> None:
    tmp = _folder(tmp_path / "m.tmp1", "first")
    publish_folder(tmp, tmp_path / "m")
    assert (tmp_path / "m" / "config.json").read_text() == "first"
    assert not tmp.exists()


def test_a_second_process_keeps_the_published_copy_and_drops_its_own(tmp_path: Path) -> None:
    publish_folder(_folder(tmp_path / "m.tmp1", "first"), tmp_path / "m")
    late = _folder(tmp_path / "m.tmp2", "second")
    publish_folder(late, tmp_path / "m")
    assert (tmp_path / "m" / "config.json").read_text() == "first"
    assert not late.exists()


def test_a_missing_temporary_folder_is_still_an_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        publish_folder(tmp_path / "never_written", tmp_path / "m")
