"""The fleet: one row of server-side numbers per inference endpoint (``infertop fleet``).

Headless (no Textual): :mod:`tui.fleet.rows` defines what each column means,
:mod:`tui.fleet.direct` scrapes endpoints itself, :mod:`tui.fleet.promql` reads them all
back from an existing Prometheus server in one query, :mod:`tui.fleet.poller` combines
the two, and :mod:`tui.fleet.columns` formats rows for the screen and the CLI.
"""
