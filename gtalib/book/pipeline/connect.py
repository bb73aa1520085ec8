"""Connecting to a running Dask scheduler (``--cluster tcp://HOST:PORT``, ``--scheduler-file``)
with one error for every way it can fail, within seconds: nothing listens there, the host is
unknown, the file is not a scheduler file, or something other than a Dask scheduler answers
(a dashboard's port, a web server). Dask's own ``Client`` waits for a scheduler's handshake
without a time limit (``distributed.comm.core.connect`` reads it with no timeout), so a service
that accepts the connection and says nothing would hang it; the handshake is made here first,
under :data:`CONNECT_TIMEOUT_S`.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from distributed import Client
from distributed.comm import connect
from distributed.comm.addressing import parse_address, parse_host_port

#: Seconds a ``tcp://`` scheduler's host has to accept a connection.
CONNECT_PROBE_S = 5.0
#: Seconds a Dask scheduler has to answer the handshake, and then the client's connection.
CONNECT_TIMEOUT_S = 5.0


def scheduler_address(scheduler_file) -> str:
    """The address in a Dask scheduler file (JSON written by ``dask scheduler --scheduler-file``,
    whose ``"address"`` is the scheduler's, e.g. ``tcp://10.0.0.5:8786``).

    Raises:
        ValueError: no such file, not JSON (or not text), or no ``"address"`` of the form
            ``PROTOCOL://HOST:PORT``.
    """
    path = Path(scheduler_file)
    if not path.is_file():  # Dask would wait for a missing file forever (a scheduler starting)
        raise ValueError(f"scheduler file {scheduler_file}: no such file; start the scheduler "
                         f"first (dask scheduler --scheduler-file {scheduler_file})")
    try:
        info = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"scheduler file {scheduler_file}: not a Dask scheduler file (JSON with "
                         f"the scheduler's \"address\"): {exc}") from None
    address = info.get("address") if isinstance(info, dict) else None
    if not isinstance(address, str) or "://" not in address:
        raise ValueError(f"scheduler file {scheduler_file}: not a Dask scheduler file: no "
                         f"\"address\" of the form tcp://HOST:PORT in it")
    return address


async def _handshake(address: str) -> None:
    comm = await asyncio.wait_for(connect(address, timeout=CONNECT_TIMEOUT_S), CONNECT_TIMEOUT_S)
    await comm.close()


def connect_scheduler(address: str, what: str) -> Client:
    """A ``distributed.Client`` of the scheduler at ``address``, once it has answered Dask's
    handshake within :data:`CONNECT_TIMEOUT_S` seconds. ``what`` names the option in errors.

    Raises:
        ValueError: naming ``what``: the host is unknown, nothing listens at the port (each
            found by one probe, at once), or no Dask scheduler answered in time (something else
            listens there, or nothing answers).
    """
    protocol, location = parse_address(address)
    try:
        if protocol in ("tcp", "tls"):  # refused or unknown fails now, not after Dask's retries
            host, port = parse_host_port(location)
            socket.create_connection((host, port), timeout=CONNECT_PROBE_S).close()
        asyncio.run(_handshake(address))
        return Client(address, timeout=CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - refused, unknown, timed out, or not Dask's reply
        if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
            why = (f"nothing answered Dask's handshake within {CONNECT_TIMEOUT_S:g} s: is it a "
                   f"Dask scheduler's address, not its dashboard's or another service's?")
        else:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{what}: no Dask scheduler answered at {address} ({why})") from None
