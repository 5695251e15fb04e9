"""One output writer for every command (issue 12, point 1 and the writing items of point 5)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from tests.conftest import RESULTS
from tests.hostile import assert_one_line_exit_2, assert_usage_error, invoke

SOURCE = RESULTS / "refcount.json"


def device_node(path, like: str):
    """A character device in tmp_path like /dev/null or /dev/full (never the real ones: a bug would destroy them)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.stat(like).st_rdev)
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return path


def leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_a_new_file_gets_the_umask_mode(tmp_path):
    out = tmp_path / "r.md"
    old = os.umask(0o027)
    try:
        assert invoke("show", SOURCE, "--format", "markdown", "-o", out).exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


def test_an_existing_file_is_replaced_and_keeps_its_mode(tmp_path):
    out = tmp_path / "r.md"
    out.write_text("old")
    out.chmod(0o664)
    inode = out.stat().st_ino
    assert invoke("show", SOURCE, "--format", "markdown", "-o", out).exit_code == 0
    assert out.read_text().startswith("## refcount")
    assert stat.S_IMODE(out.stat().st_mode) == 0o664
    assert out.stat().st_ino != inode  # replaced by a rename: a reader never sees half a file
    assert leftovers(tmp_path) == []


def test_a_symlink_is_followed_and_its_target_replaced(tmp_path):
    target = tmp_path / "target.md"
    target.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    assert invoke("show", SOURCE, "--format", "markdown", "-o", link).exit_code == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("## refcount")


def test_a_character_device_is_written_in_place_not_replaced(tmp_path):
    null = device_node(tmp_path / "null", "/dev/null")
    result = invoke("show", SOURCE, "-o", null)
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(null.stat().st_mode)


def test_a_full_device_fails_naming_the_path_and_stays_a_device(tmp_path):
    full = device_node(tmp_path / "full", "/dev/full")
    result = invoke("show", SOURCE, "-o", full)
    assert_one_line_exit_2(result)
    assert str(full) in result.output and "No space left" in result.output
    assert stat.S_ISCHR(full.stat().st_mode)


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    result = invoke("show", SOURCE, "--format", "json", "-o", fifo)
    reader.join(10)
    if reader.is_alive():  # nothing opened the pipe for writing: release the reader
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got and '"schema": "ctxlab/1"' in got[0]


def test_dash_means_standard_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("show", SOURCE, "--format", "json", "-o", "-")
    assert result.exit_code == 0 and '"schema": "ctxlab/1"' in result.output
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("command", [["show", SOURCE, "-o", ""], ["report", "merge", SOURCE, "-o", ""],
                                     ["report", "merge", SOURCE, "--html", ""], ["migrate", "-o", ""],
                                     ["check", "--json", ""], ["doctor", "-o", ""]])
def test_an_empty_output_path_is_a_usage_error(command):
    assert_usage_error(invoke(*command), "empty")


def test_write_errors_name_the_users_path_not_a_temporary_file(tmp_path):
    out = tmp_path / "nodir" / "x.md"
    result = invoke("show", SOURCE, "-o", out)
    assert_one_line_exit_2(result)
    assert str(out) in result.output and ".x.md." not in result.output


def test_merge_writes_all_outputs_or_none(tmp_path):
    md = tmp_path / "m.md"
    result = invoke("report", "merge", SOURCE, "--markdown", md, "--html", tmp_path / "nodir" / "x.html")
    assert_one_line_exit_2(result)
    assert not md.exists()
    md.write_text("kept")
    full = device_node(tmp_path / "full", "/dev/full")
    result = invoke("report", "merge", SOURCE, "--markdown", md, "--html", full)
    assert_one_line_exit_2(result)
    assert md.read_text() == "kept" and leftovers(tmp_path) == []


def test_write_output_replaces_and_check_writable_refuses_an_empty_name(tmp_path):
    from ctxlab.output import check_writable, write_output

    target = tmp_path / "r.json"
    write_output(str(target), "first")
    write_output(str(target), "second")
    assert target.read_text() == "second"
    check_writable(str(tmp_path / "new.json"))
    check_writable("-")
    with pytest.raises(OSError, match="empty"):
        check_writable("")


def test_dev_stdout_behind_a_regular_file_is_written_in_place(tmp_path):
    out = tmp_path / "redirected.txt"
    with open(out, "w") as shell_redirect:  # as `ctxlab show X -o /dev/stdout > redirected.txt` leaves it
        shell_redirect.write("earlier output\n")
        shell_redirect.flush()
        inode = out.stat().st_ino
        result = invoke("show", SOURCE, "--format", "json", "-o", f"/proc/self/fd/{shell_redirect.fileno()}")
    assert result.exit_code == 0, result.output
    assert out.stat().st_ino == inode
    text = out.read_text()
    assert text.startswith("earlier output\n") and '"schema": "ctxlab/1"' in text


def test_a_reader_that_goes_away_stops_the_report_quietly(tmp_path):
    """``ctxlab show ... | head -c 20``: no 'Broken pipe' error, no traceback; 141 when the write met the closed
    pipe, as SIGPIPE would end a C tool (0 when the whole report fitted in the pipe before head left)."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = (f"{sys.executable} -m ctxlab show labs/results/check.json --format json | head -c 20 > /dev/null; "
               "echo ${PIPESTATUS[0]}")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=root, env=env, timeout=120)
    assert done.stdout.strip() in ("0", "141"), (done.stdout, done.stderr)
    assert "Broken pipe" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("length", [200, 242, 250, 255])
def test_an_output_name_as_long_as_the_directory_allows_is_written(tmp_path, length):
    longest = os.pathconf(tmp_path, "PC_NAME_MAX")
    name = ("r" * longest)[:min(length, longest) - 3] + ".md"  # a valid name: the temporary one beside it is cut
    out = tmp_path / name
    result = invoke("show", SOURCE, "--format", "markdown", "-o", out)
    assert result.exit_code == 0, result.output
    assert out.read_text().strip() and leftovers(tmp_path) == []
