"""The sweep result store: one SQLite file in WAL mode.

One row per (design point, workload), keyed by the task's input hash (the base config's
content, the resolved overrides, the workload, the fidelity and the archsim version). Each
metric of :data:`archsim.explore.spec.METRICS` is a column; each swept axis is a column
(``units[0].rows`` -> ``units_0_rows``); ``result_json`` holds the whole
:meth:`archsim.result.Result.to_dict`. Designs that cannot be evaluated (infeasible
mappings, invalid combinations) are stored with ``status = 'error'`` and the message, so a
resumed sweep does not retry them.

Every write is its own short transaction with a busy timeout, so several processes (two
drivers on one file, or workers writing directly) can write concurrently.
"""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from archsim.explore.spec import METRICS, column_name
from archsim.workloads.errors import ArchsimError, Problem

__all__ = ["ResultStore", "Row", "BASE_COLUMNS"]

BASE_COLUMNS = ("hash", "design_id", "workload", "point", "status", "error") + METRICS + (
    "input_hash", "elapsed_s", "created", "result_json")

Row = dict[str, Any]

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS results (
    hash TEXT PRIMARY KEY,
    design_id TEXT NOT NULL,
    workload TEXT NOT NULL,
    point TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    {", ".join(f"{m} REAL" for m in METRICS)},
    input_hash TEXT,
    elapsed_s REAL,
    created REAL,
    result_json TEXT
);
CREATE INDEX IF NOT EXISTS results_design ON results(design_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS claims (hash TEXT PRIMARY KEY, owner TEXT NOT NULL,
                                   claimed REAL NOT NULL);
"""

#: A claim not refreshed for this long is considered abandoned (its driver hung or runs on
#: another host and died) and may be taken over. Drivers refresh their claims every time
#: they store a finished chunk; a chunk taking longer than this is far outside normal use.
CLAIM_LEASE_S = 3600.0


def owner_id() -> str:
    """This process's claim owner: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_alive(owner: str) -> bool:
    """False only when ``owner`` ran on this host and its process is gone."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:       # alive, owned by another user
        return True
    return True


class ResultStore:
    """A sweep database. Safe to open from several processes at once."""

    def __init__(self, path: str | Path, readonly: bool = False, timeout_s: float = 60.0) -> None:
        """Open (``readonly``: an existing store only) or create the store at ``path``.

        Raises:
            ArchsimError: the path is missing (read-only), a folder, in a missing or
                read-only folder, read-only itself, or not an archsim SQLite store.
        """
        self.path = str(path)
        p = Path(self.path)
        if p.is_dir():
            raise _store_error(self.path, "is a folder; expected a result store file")
        if readonly and not p.exists():
            raise _store_error(self.path, "no such result store (run 'archsim sweep' first)")
        if not readonly and not p.resolve().parent.is_dir():
            raise _store_error(self.path, f"no folder {str(p.resolve().parent)!r} to "
                               f"create the result store in")
        try:
            if readonly:
                self.conn = sqlite3.connect(f"file:{p.resolve().as_posix()}?mode=ro", uri=True,
                                            timeout=timeout_s, isolation_level=None)
                names = {r[0] for r in self.conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "results" not in names:
                    self.conn.close()
                    raise _store_error(self.path, "is an SQLite file without a 'results' "
                                       "table; expected a store written by 'archsim sweep'")
            else:
                self.conn = self._open_writable(timeout_s)
            self.conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        except sqlite3.DatabaseError as exc:
            msg = str(exc)
            if "not a database" in msg or "malformed" in msg:
                why = "is not an SQLite database; expected a result store written by " \
                      "'archsim sweep'"
            elif "readonly" in msg or "read-only" in msg:
                why = "is read-only; expected a writable result store (or a new file name)"
            elif "unable to open" in msg:
                why = "cannot be opened (check the folder exists and is writable)"
            else:
                why = f"cannot be used as a result store ({msg})"
            raise _store_error(self.path, why) from None
        self.conn.row_factory = sqlite3.Row
        self._known: set[str] = set()

    def _open_writable(self, timeout_s: float) -> sqlite3.Connection:
        """Connect, switch to WAL and create the schema. Two processes creating the same new
        store at once can see SQLITE_BUSY from the journal-mode switch without SQLite's busy
        handler being called; retry that until ``timeout_s`` like any other lock wait."""
        deadline = time.monotonic() + timeout_s
        while True:
            conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
                return conn
            except sqlite3.OperationalError as exc:
                conn.close()
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- schema --------------------------------------------------------------------------
    def columns(self) -> list[str]:
        return [r[1] for r in self.conn.execute("PRAGMA table_info(results)")]

    def add_axes(self, keys: Iterable[str]) -> None:
        """Add one column per axis (idempotent; tolerates a concurrent writer adding it)."""
        have = set(self.columns())
        for k in keys:
            col = column_name(k)
            if col in have:
                continue
            try:
                self.conn.execute(f'ALTER TABLE results ADD COLUMN "{col}"')
            except sqlite3.OperationalError as exc:  # added by another process meanwhile
                if "duplicate column" not in str(exc):
                    raise
            have.add(col)

    def set_meta(self, key: str, value: Any) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def meta(self, key: str, default: Any = None) -> Any:
        r = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(r[0]) if r else default

    # ---- writing -------------------------------------------------------------------------
    def put(self, row: Row) -> None:
        """Insert one row in its own transaction (a row already there is kept)."""
        self.put_many([row])

    def put_many(self, rows: list[Row]) -> None:
        """Insert rows in one transaction (rows already there are kept: the first finished
        result of a task wins, so concurrent duplicate work is harmless)."""
        if not rows:
            return
        point_cols: set[str] = set()
        for r in rows:
            point_cols.update(column_name(k) for k in json.loads(r["point"]))
        self.add_axes_cols(point_cols)
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for r in rows:
                r = dict(r)
                r.setdefault("created", time.time())
                for k, v in json.loads(r["point"]).items():
                    r[column_name(k)] = v
                cols = list(r)
                cur.execute(f"INSERT OR IGNORE INTO results ({', '.join(_q(c) for c in cols)}) "
                            f"VALUES ({', '.join('?' * len(cols))})", [r[c] for c in cols])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise

    def add_axes_cols(self, cols: Iterable[str]) -> None:
        cols = set(cols)
        if cols <= self._known:
            return
        have = set(self.columns())
        self._known |= have | cols
        for c in cols:
            if c not in have:
                try:
                    self.conn.execute(f'ALTER TABLE results ADD COLUMN "{c}"')
                except sqlite3.OperationalError as exc:
                    if "duplicate column" not in str(exc):
                        raise

    # ---- claims: two drivers on one store never compute the same point ---------------------
    def claim(self, hashes: Iterable[str], owner: str) -> set[str]:
        """Claim the points ``hashes`` for ``owner``; returns those now claimed by it.

        A point already stored, or claimed by a live driver, is not returned. Claims of a
        driver that died on this host, or not refreshed for :data:`CLAIM_LEASE_S`, are
        taken over."""
        hs = list(dict.fromkeys(hashes))
        if not hs:
            return set()
        now = time.time()
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            marks = ",".join("?" * len(hs))
            held = cur.execute(f"SELECT hash, owner, claimed FROM claims WHERE hash IN ({marks})",
                               hs).fetchall()
            stale = [h for h, o, t in held
                     if o != owner and (now - t > CLAIM_LEASE_S or not _owner_alive(o))]
            cur.executemany("DELETE FROM claims WHERE hash = ?", [(h,) for h in stale])
            done = {r[0] for r in cur.execute(f"SELECT hash FROM results WHERE hash IN ({marks})",
                                              hs)}
            cur.executemany("INSERT OR IGNORE INTO claims VALUES (?, ?, ?)",
                            [(h, owner, now) for h in hs if h not in done])
            mine = {r[0] for r in cur.execute(
                f"SELECT hash FROM claims WHERE owner = ? AND hash IN ({marks})", [owner, *hs])}
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return mine - done

    def refresh_claims(self, owner: str) -> None:
        """Renew the lease of every claim of ``owner``."""
        self.conn.execute("UPDATE claims SET claimed = ? WHERE owner = ?", (time.time(), owner))

    def release(self, owner: str) -> None:
        """Drop every claim of ``owner`` (its points are stored or given up)."""
        self.conn.execute("DELETE FROM claims WHERE owner = ?", (owner,))

    # ---- reading -------------------------------------------------------------------------
    def done_hashes(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT hash FROM results")}

    def count(self, where: str | None = None) -> int:
        q = "SELECT COUNT(*) FROM results" + (f" WHERE {where}" if where else "")
        return int(self.conn.execute(q).fetchone()[0])

    def rows(self, where: str | None = None, with_json: bool = False,
             hashes: Iterable[str] | None = None) -> list[Row]:
        """Rows (dicts) ordered by hash; ``where`` is an SQL boolean expression."""
        cols = [c for c in self.columns() if with_json or c != "result_json"]
        q = f"SELECT {', '.join(_q(c) for c in cols)} FROM results"
        if where:
            q += f" WHERE {where}"
        q += " ORDER BY hash"
        out = [dict(r) for r in self.conn.execute(q)]
        if hashes is not None:
            keep = set(hashes)
            out = [r for r in out if r["hash"] in keep]
        return out

    def iter_rows(self, where: str | None = None) -> Iterator[Row]:
        yield from self.rows(where)

    # ---- export --------------------------------------------------------------------------
    def export(self, fmt: str = "csv", where: str | None = None, with_json: bool = False,
               rows: list[Row] | None = None) -> str:
        """The table as CSV or JSON text."""
        rows = self.rows(where, with_json) if rows is None else rows
        if fmt == "json":
            for r in rows:
                if r.get("result_json"):
                    r["result"] = json.loads(r.pop("result_json"))
                r["point"] = json.loads(r["point"])
            return json.dumps(rows, indent=1, default=str)
        buf = io.StringIO()
        cols = list(rows[0]) if rows else [c for c in self.columns() if c != "result_json"]
        w = csv.DictWriter(buf, cols, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        return buf.getvalue()


def _store_error(path: str, why: str) -> ArchsimError:
    return ArchsimError(Problem(why, "", path))


def _q(col: str) -> str:
    return '"' + col.replace('"', '""') + '"'
