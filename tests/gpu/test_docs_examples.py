"""The manual's Python blocks marked ``runs in nox -s gpu`` run here; see :mod:`tests.docs_examples`."""

from tests.docs_examples import blocks_test

test_the_manual_s_blocks_run = blocks_test("gpu")
