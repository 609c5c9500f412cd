#!/usr/bin/env python3
"""One entry point for a fresh machine: ``python3 dev.py demo | test | lint | bench | shell``.

Why a script rather than make or tox: the README promises commands that work with nothing but
``python3``. This file creates (or reuses) ``.venv``, installs the project with its dev extras when
``pyproject.toml`` changed since the last install, then runs the requested job inside the venv.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
STAMP = VENV / ".holon-install-stamp"


def _stamp_value() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def ensure_env() -> None:
    """Create the venv and install the project unless the install stamp is current."""
    if not PY.exists():
        print("dev.py: creating .venv", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    if STAMP.exists() and STAMP.read_text() == _stamp_value():
        return
    print("dev.py: installing holon-ctx and its dev tools into .venv", file=sys.stderr)
    pip = [str(PY), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "install", "-e", f"{ROOT}[dev]"], check=True)
    STAMP.write_text(_stamp_value())


def run(args: list[str]) -> int:
    return subprocess.run([str(PY), *args], cwd=ROOT, check=False).returncode


def main(argv: list[str]) -> int:
    job = argv[0] if argv else "help"
    rest = argv[1:]
    if job not in {"demo", "test", "lint", "bench", "shell", "cli"}:
        print(__doc__)
        return 0 if job in {"help", "-h", "--help"} else 2
    ensure_env()
    if job == "demo":
        return run(["-m", "holon_ctx", "demo", *rest])
    if job == "cli":
        return run(["-m", "holon_ctx", *rest])
    if job == "test":
        return run(["-m", "pytest", *rest])
    if job == "lint":
        code = run(["-m", "ruff", "check", "."])
        return code or run(["-m", "mypy", "--strict", "holon_ctx"])
    if job == "bench":
        return run(["-m", "pytest", "bench", "--benchmark-only", "-p", "no:randomly", *rest])
    return run(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
