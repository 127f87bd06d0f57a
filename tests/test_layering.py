"""DESIGN.md section 2: dependencies point down only.  A file in one layer
may include only its own layer's headers and those of layers below it."""
import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[1] / "csrc"

# Lowest first.  test/ may include anything; py/ anything but test/.
ORDER = ["util", "bsonx", "storage", "query", "agg", "coll", "command", "wire", "py"]


def _files():
    if not CSRC.is_dir():
        return []
    return sorted(p for p in CSRC.rglob("*.[ch]") if p.relative_to(CSRC).parts[0] in ORDER)


@pytest.mark.skipif(not CSRC.is_dir(), reason="csrc/ not present (installed package only)")
@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(CSRC)))
def test_includes_point_down(path):
    layer = path.relative_to(CSRC).parts[0]
    rank = ORDER.index(layer)
    for line in path.read_text().splitlines():
        m = re.match(r'\s*#\s*include\s+"\.\./([a-z]+)/', line)
        if m:
            target = m.group(1)
            assert target in ORDER and ORDER.index(target) <= rank, (
                f"{path.relative_to(CSRC)}: {layer}/ includes {target}/ ({line.strip()})")
