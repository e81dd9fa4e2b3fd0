"""Which code a benchmark record measured: the commit of this checkout, or KERNELCRAFT_CODE where the checkout
measured is a copy without its history (a device machine gets the working tree, not `.git`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code() -> str | None:
    if os.environ.get("KERNELCRAFT_CODE"):
        return os.environ["KERNELCRAFT_CODE"]
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    except OSError:  # no git on this machine
        return None
    return done.stdout.strip() or None
