"""scripts/repo_relative.py: recorded logs name no path of the machine that made them."""

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "repo_relative.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_paths_below_the_repository_become_relative_and_the_rest_placeholders(tmp_path):
    log = tmp_path / "pytest.log"
    other = f"{tmp_path}/other-machine/site-packages"  # a folder of another machine, named with --map
    log.write_text(f"rootdir: {ROOT}\nE   {ROOT}/ctxlab/cli/__init__.py:708\n../..{other}/numba/a.py:3\n"
                   f"generated xml file: {tmp_path}/out/pytest.xml\n{ROOT}ly/not/the/repo\n")
    done = run("--out", str(tmp_path / "out"), "--map", f"{other}=<site-packages>", str(log))
    assert done.returncode == 0, done.stderr
    lines = log.read_text().splitlines()
    assert lines[:4] == ["rootdir: .", "E   ctxlab/cli/__init__.py:708", "<site-packages>/numba/a.py:3",
                         "generated xml file: <out>/pytest.xml"]
    # A path that only begins like the repository's is not in it; it may still lie in the temporary folder
    # (a checkout there), which is rewritten as such.
    tmp = tempfile.gettempdir()
    under_tmp = str(ROOT).startswith(tmp + "/")
    assert lines[4] == (f"<tmp>{str(ROOT)[len(tmp):]}ly/not/the/repo" if under_tmp else f"{ROOT}ly/not/the/repo")


def test_an_xml_report_stays_xml(tmp_path):
    import xml.etree.ElementTree as ET

    report = tmp_path / "guard.junit.xml"
    report.write_text(f'<testsuite><testcase file="{tmp_path}/scratch/test_a.py" name="a">'
                      f"<failure>{tmp_path}/scratch/test_a.py:3: boom</failure></testcase></testsuite>")
    done = run("--map", f"{tmp_path}/scratch=<scratch tests>", str(report))
    assert done.returncode == 0, done.stderr
    case = ET.parse(report).getroot().find("testcase")
    assert case.get("file") == "<scratch tests>/test_a.py" and case.find("failure").text.startswith("<scratch tests>/")


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for args in (["--map", "relative=x", str(tmp_path)], [str(tmp_path / "missing.log")]):
        done = run(*args)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) <= 2 and "Traceback" not in done.stderr
