"""Open a results database and bring its schema up to date.

`--db URL` takes any SQLAlchemy URL (`sqlite:///path.db`, `postgresql://user@host/db`); a plain
path means a SQLite file. The default is `results.db` in the user's data directory. Migrations are
numbered and applied automatically, each in its own transaction, recorded in `agentx_schema`.

The database may live beside other programs: one holding tables agentx does not own and no
`agentx_schema` (another program's file) is refused before anything is created in it, unless
asked (`init=True`, the CLI's `--db-init`); a SQLite database another program holds locked is
waited on for `LOCK_TIMEOUT_S`, then `DatabaseBusy` (one line; an upload's 503).
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Callable

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, event, inspect, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError

from agentx.errors import AgentxError
from agentx.results import schema

SCHEMA_VERSION = 4
LOCK_TIMEOUT_S = 30.0  # how long a SQLite statement waits on another program's lock


class DatabaseBusy(AgentxError):
    """Another program holds the database's lock longer than we wait: try again later."""

_versions = Table("agentx_schema", MetaData(), Column("version", Integer, primary_key=True),
                  Column("applied_at", String(40), nullable=False))


def _v1(conn: Connection) -> None:
    """A new database: every table of `schema.py` as it is now (later migrations then find their
    change made)."""
    schema.metadata.create_all(conn)


def _v2(conn: Connection) -> None:
    """deployments.engine_settings, a deployment label (SPEC §8)."""
    if "engine_settings" not in {c["name"] for c in inspect(conn).get_columns("deployments")}:
        conn.exec_driver_sql("ALTER TABLE deployments ADD COLUMN engine_settings VARCHAR(300)")


def _v3(conn: Connection) -> None:
    """points: the measured power columns and power_valid (SPEC §8)."""
    have = {c["name"] for c in inspect(conn).get_columns("points")}
    for name in schema.POWER_COLUMNS:
        if name not in have:
            conn.exec_driver_sql(f"ALTER TABLE points ADD COLUMN {name} FLOAT")
    if "power_valid" not in have:
        conn.exec_driver_sql("ALTER TABLE points ADD COLUMN power_valid BOOLEAN")


def _v4(conn: Connection) -> None:
    """conversations.runs: how many imported runs replayed the conversation (SPEC §8)."""
    if "runs" not in {c["name"] for c in inspect(conn).get_columns("conversations")}:
        conn.exec_driver_sql("ALTER TABLE conversations ADD COLUMN runs INTEGER NOT NULL DEFAULT 1")


# version -> migration; a later schema change appends one (e.g. an ALTER TABLE) and bumps SCHEMA_VERSION
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1, 2: _v2, 3: _v3, 4: _v4}


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def default_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("agentx", appauthor=False)) / "results.db"


def resolve_url(url: str | None, say: Callable[[str], None] = lambda _: None) -> str:
    """The SQLAlchemy URL for `--db` (None: the default SQLite file, announced when it is new)."""
    if url is None:
        path = default_path()
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            say(f"results database: creating {path} (the default; --db URL chooses another)")
        return f"sqlite:///{path}"
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def connect(url: str | None = None, say: Callable[[str], None] = lambda _: None,
            pool_size: int | None = None, init: bool = False, lock_timeout_s: float = LOCK_TIMEOUT_S) -> Engine:
    """An engine on the database at `url`, its schema migrated to SCHEMA_VERSION. `pool_size`: at
    most this many connections (a server's worker threads), none beyond it. `init`: add agentx's
    tables to a database holding other programs' tables (refused otherwise)."""
    pool = {"pool_size": pool_size, "max_overflow": 0, "pool_timeout": 60} if pool_size else {}
    resolved = resolve_url(url, say)
    if resolved.startswith("sqlite"):
        pool["connect_args"] = {"timeout": lock_timeout_s}
    try:
        engine = create_engine(resolved, **pool)
    except (ArgumentError, ImportError) as e:
        raise AgentxError(f"--db: cannot use {url!r}: {e}") from None
    shown = engine.url.render_as_string(hide_password=True)
    try:
        if not init:  # before the pragmas: WAL mode would change another program's file
            _check_owned(engine, shown)
            engine.dispose()
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
            event.listen(engine, "handle_error", partial(_locked, shown, lock_timeout_s))
        migrate(engine)
    except DBAPIError as e:  # not a database, refused, no such database, no permission
        reason = "; ".join(line.strip() for line in str(e.orig).splitlines() if line.strip())
        raise AgentxError(f"--db {shown}: {reason}") from None
    return engine


def _check_owned(engine: Engine, shown: str) -> None:
    """Refuse a database that holds tables of another program and none of agentx's bookkeeping."""
    found = tables(engine)
    if not found or _versions.name in found:
        return
    foreign = sorted(found - set(schema.metadata.tables))
    if foreign:
        listed = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise AgentxError(f"--db {shown}: not an agentx results database (it holds tables agentx does not own: "
                          f"{listed}); nothing was changed. Pass --db-init to add agentx's tables to it")


def _locked(shown: str, waited_s: float, context) -> None:
    """SQLAlchemy's handle_error hook: SQLite's "database is locked" (after waiting) as one line."""
    if "database is locked" in str(context.original_exception):
        raise DatabaseBusy(f"--db {shown}: the database is locked by another program (waited {waited_s:g} s); "
                           "try again when it is done") from None


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def migrate(engine: Engine) -> int:
    """Apply the migrations this database lacks; return its version."""
    with engine.begin() as conn:
        _versions.create(conn, checkfirst=True)
    with engine.begin() as conn:
        current = conn.execute(select(_versions.c.version).order_by(_versions.c.version.desc())).scalar() or 0
    if current > SCHEMA_VERSION:
        raise AgentxError(f"the results database is at schema version {current}, newer than this agentx "
                          f"({SCHEMA_VERSION}): upgrade agentx")
    for version in range(current + 1, SCHEMA_VERSION + 1):
        with engine.begin() as conn:
            MIGRATIONS[version](conn)
            conn.execute(_versions.insert().values(version=version, applied_at=now()))
    return SCHEMA_VERSION


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())
