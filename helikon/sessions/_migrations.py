"""The schema migrations of the SQL session backends, run the same way for each.

A migration is ``(version, description, statements)``. :func:`run_migrations`
creates the ``helikon_session_migrations`` table when missing, refuses a
database that has a version this helikon does not know (a newer helikon
migrated it), then applies each pending migration in version order and
records it. It runs inside the caller's transaction, through the driver's own
``execute``, so the backend decides how migrators are serialised (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: an advisory lock) and a failure leaves
nothing half-applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeAlias

from helikon.sessions._protocol import SessionError

#: One migration: its version, what it does, and the statements that do it.
Migration: TypeAlias = tuple[int, str, tuple[str, ...]]


class Execute(Protocol):
    """A connection's ``execute(sql[, params])``, returning the rows (``sqlite3`` and psycopg alike).

    Statements without parameters are passed alone, so a driver that formats
    parameters (psycopg's ``%s``) leaves a literal ``%`` in them alone.
    """

    def __call__(self, sql: str, params: Sequence[Any] = ..., /) -> Iterable[Sequence[Any]]: ...


def run_migrations(
    execute: Execute, migrations: Sequence[Migration], *, table: str, placeholder: str
) -> tuple[int, ...]:
    """Apply the pending ``migrations`` through ``execute``; return the versions applied.

    Args:
        execute: the connection's ``execute``, inside an open transaction.
        migrations: every migration this helikon knows, in version order.
        table: the ``CREATE TABLE IF NOT EXISTS helikon_session_migrations``
            statement in the backend's dialect.
        placeholder: the driver's parameter marker (``?`` or ``%s``).

    Raises:
        SessionError: the database has a migration newer than ``migrations``.

    >>> import sqlite3
    >>> conn = sqlite3.connect(":memory:")
    >>> table = "CREATE TABLE IF NOT EXISTS helikon_session_migrations (version INTEGER, description TEXT)"
    >>> steps = [(1, "create t", ("CREATE TABLE t (x INTEGER)",))]
    >>> run_migrations(conn.execute, steps, table=table, placeholder="?")
    (1,)
    >>> run_migrations(conn.execute, steps, table=table, placeholder="?")  # already applied
    ()
    """
    execute(table)
    applied = {int(row[0]) for row in execute("SELECT version FROM helikon_session_migrations")}
    known = {version for version, _, _ in migrations}
    if applied - known:
        raise SessionError.other(
            f"the database has session schema version {max(applied)}, newer than this helikon knows "
            f"({max(known)}); upgrade helikon"
        )
    record = (
        f"INSERT INTO helikon_session_migrations (version, description) VALUES ({placeholder}, {placeholder})"
    )
    done: list[int] = []
    for version, description, statements in migrations:
        if version not in applied:
            for statement in statements:
                execute(statement)
            execute(record, (version, description))
            done.append(version)
    return tuple(done)


__all__ = ["Execute", "Migration", "run_migrations"]
