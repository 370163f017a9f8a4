"""Where the package's data files live: one place, so that moving a module never breaks a path.

Plain paths, not ``importlib.resources``: the latter fails under some editable installs.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = PACKAGE_DIR.parent  # a source checkout; installed wheels have no repository around them

PROMPTS_DIR = PACKAGE_DIR / "prompts"
SPECS_DIR = PACKAGE_DIR / "specs"
TEMPLATES_DIR = PACKAGE_DIR / "templates"
DATA_DIR = PACKAGE_DIR / "data"
