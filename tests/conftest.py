"""Test-wide settings.

The per-user check daemon (harness/isolation/daemon.py) is off for every test but the ones that test it
(tests/integration/test_daemon.py turns it on with a private runtime folder): a `check` driven through the CLI must not
leave a background process behind on the machine that runs the tests, nor find one a user started."""
import os

os.environ["MTXDIAG_DAEMON"] = "0"
