"""Run ``luigi --module tasks ...`` or ``daybreak ...`` with this host's clock off by N minutes, as botocore
reads it to sign a request (the store's clock is the real one).

    python tests/clock_driver.py -42 luigi RangeDaily --of StgQsrPos ...
    python tests/clock_driver.py -42 daybreak status
"""

from __future__ import annotations

import datetime as dt
import sys

import botocore.auth

OFFSET = dt.timedelta(minutes=float(sys.argv[1]))
real_now = botocore.auth.get_current_datetime
botocore.auth.get_current_datetime = lambda: real_now() + OFFSET

if __name__ == "__main__":
    if sys.argv[2] == "luigi":
        import luigi.retcodes

        luigi.retcodes.run_with_retcodes(["--module", "tasks", *sys.argv[3:]])
    else:
        from tasks.cli import main

        sys.exit(main(sys.argv[3:]))
