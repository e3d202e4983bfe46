import subprocess
import sys

import nlp
from nlp.cli import main


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert nlp.__version__ in capsys.readouterr().out


def test_help_lists_commands(capsys):
    assert main([]) == 0
    assert "COMMAND" in capsys.readouterr().out


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "nlp", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "usage: nlp" in proc.stdout


def test_unknown_attribute_is_attribute_error():
    import pytest

    with pytest.raises(AttributeError):
        nlp.NoSuchThing  # noqa: B018
