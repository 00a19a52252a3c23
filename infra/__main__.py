"""Pulumi entry point (`main: infra/`): only wiring."""
import sys
from pathlib import Path

# Pulumi runs this file with infra/ as the working folder; make the project importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.program import main  # noqa: E402

main()
