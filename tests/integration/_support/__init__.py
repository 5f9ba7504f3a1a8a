"""Helpers shared by the integration tests of several folders.

A folder's own support module (``server_support.py``, ``mcp_support.py``, ...)
or script puts ``tests/integration`` on ``sys.path`` and imports from here:

- :mod:`_support.loopback`: a free loopback port, and an ASGI app served
  by Hypercorn on one (under trio or asyncio, in a thread);
- :mod:`_support.paying`: the ``get_weather`` and ``pay`` tools of the
  server and protocol tests' agents, and the context where paying waits for
  an approval;
- :mod:`_support.npm`: npm packages pinned by a lock file, installed once
  per machine (standard library only: ``.ci/run`` runs the install scripts
  with the system ``python3``).
"""
