"""The writer lock of unpartitioned tables (pipelines.warehouse.catalog.table_lock): a
second writer waits for the first one's read-modify-write to end, even in another
process; the holder may take it again (publish inside a caller's lock)."""
from __future__ import annotations

import subprocess
import sys
import time

from pipelines.config.lake import Lake
from pipelines.warehouse.catalog import table_lock
from schemas.tables import REGRESSIONS


def test_a_second_process_waits_for_the_holder(tmp_path):
    lake = Lake(tmp_path)
    child = ("import sys, time\nfrom pathlib import Path\n"
             "from pipelines.config.lake import Lake\n"
             "from pipelines.warehouse.catalog import table_lock\n"
             "from schemas.tables import REGRESSIONS\n"
             "with table_lock(Lake(Path(sys.argv[1])), REGRESSIONS):\n"
             "    print(time.time())\n")
    with table_lock(lake, REGRESSIONS):
        with table_lock(lake, REGRESSIONS):  # reentrant: no deadlock for the holder
            proc = subprocess.Popen([sys.executable, "-c", child, str(tmp_path)], stdout=subprocess.PIPE, text=True)
            time.sleep(2.0)
            assert proc.poll() is None, "the second writer did not wait for the lock"
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert float(out) >= 1.5  # it waited until the holder let go
    assert (tmp_path / "warehouse" / "regressions" / "_LOCK").exists()
