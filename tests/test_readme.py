"""The README's quick start runs as written."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quick_start_runs(capsys):
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "Calibration error" in out and "mode=topk k=2" in out


def test_ci_runs_the_readme_test_command():
    readme = README.read_text()
    ci = (README.parent / ".ci" / "run").read_text()
    command = re.search(r"```bash\n(python3 -m venv .*pytest.*)\n```", readme).group(1)
    assert command in ci
