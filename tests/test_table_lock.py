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


def test_mines_of_one_date_wait_for_each_other_and_other_dates_do_not(tmp_path):
    from pipelines.warehouse.catalog import mine_lock

    lake = Lake(tmp_path)
    child = ("import sys\nfrom pathlib import Path\n"
             "from pipelines.config.lake import Lake\n"
             "from pipelines.warehouse.catalog import mine_lock\n"
             "with mine_lock(Lake(Path(sys.argv[1])), sys.argv[2]):\n"
             "    print('got it')\n")
    with mine_lock(lake, "2026-11-24"):
        other = subprocess.run([sys.executable, "-c", child, str(tmp_path), "2026-11-23"], capture_output=True,
                               text=True, timeout=60)
        assert other.stdout.strip() == "got it"  # another night is not held up
        same = subprocess.Popen([sys.executable, "-c", child, str(tmp_path), "2026-11-24"], stdout=subprocess.PIPE,
                                text=True)
        time.sleep(2.0)
        assert same.poll() is None, "a second mine of the same night did not wait"
    assert same.communicate(timeout=60)[0].strip() == "got it"
