"""The request ledger: every finished request infertop measured (the proxy's, the chat's,
``run``'s and the bench's), one row each in a local SQLite file — numbers and names, never
text — and what ``infertop usage``, the usage screen and the history read from it.

- :mod:`.store` — the file: where, opened privately, schema versions and migrations;
- :mod:`.columns` — one row per :class:`~tui.core.outcome.RequestOutcome`;
- :mod:`.writer` — :class:`~.writer.LedgerSink`, the outcome sink: a bounded queue and a
  writer thread, batched transactions;
- :mod:`.retention` — by age and a size cap, oldest first;
- :mod:`.packs` — hour packs: every request's numbers, an hour of them per blob;
- :mod:`.shares` — a window's requests as columns (packs, else rows with their busy
  shares computed then), and packing the hours that are due;
- :mod:`.grouping` — group codes, exact sums and percentiles over those columns;
- :mod:`.usage` — grouped totals of a time window, busy time and energy attributed
  (tui/core/attribution.py);
- :mod:`.history` — past requests, filtered, one at a time.

Layer: imports tui/core only (tests/test_import_hygiene.py); the front ends (tui/cli,
tui/app) open it and add its sink to their outcomes.
"""
