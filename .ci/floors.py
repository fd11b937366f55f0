"""Print ``name==floor`` for each of the library's direct dependencies (pyproject.toml).

The lowest-versions job (.ci/lowest) installs the library with these as constraints, so the
floors declared in pyproject.toml are versions that were installed and tested.
"""

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
for spec in project["project"]["dependencies"]:
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*.*?>=\s*([0-9][^,;\s]*)", spec)
    if match is None:
        sys.exit(f"no >= floor in dependency {spec!r}")
    print(f"{match.group(1)}=={match.group(2)}")
