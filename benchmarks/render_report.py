"""Render a report.html in headless Chromium to a PNG, to show that the page draws offline.

    python benchmarks/render_report.py REPORT/report.html --out report.png [--height 2400]

Uses Debian's ``chromium`` (``apt-get install -y chromium``) with networking features switched
off and a throwaway profile; prints one JSON line with the PNG's size and how much of it is
not background.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def render(html: Path, out: Path, *, width: int = 1400, height: int = 2400, timeout_s: float = 120.0) -> Path:
    """Screenshot ``html`` (a local file) into ``out`` with headless Chromium; raise on failure."""
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("no chromium binary found (apt-get install -y chromium)")
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rap-chromium-") as profile:
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={out}",
            f"--window-size={width},{height}",
            html.resolve().as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0 or not out.is_file():
        raise RuntimeError(f"chromium failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return out


def ink_fraction(png: Path) -> float:
    """Share of pixels that differ from the most common colour (0 for a blank page)."""
    import numpy as np
    from matplotlib.image import imread

    img = imread(png)[..., :3]
    flat = (img.reshape(-1, 3) * 255).round().astype(np.int64)
    codes = flat[:, 0] * 65536 + flat[:, 1] * 256 + flat[:, 2]
    _, counts = np.unique(codes, return_counts=True)
    return float(1.0 - counts.max() / codes.size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("html", type=Path, help="a report.html written by `rap report`")
    parser.add_argument("--out", type=Path, default=Path("report.png"))
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=2400)
    args = parser.parse_args(argv)
    png = render(args.html, args.out, width=args.width, height=args.height)
    print(json.dumps({"png": str(png), "bytes": png.stat().st_size, "ink_fraction": round(ink_fraction(png), 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
