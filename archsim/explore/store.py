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
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from archsim.explore.spec import METRICS, column_name

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
"""


class ResultStore:
    """A sweep database. Safe to open from several processes at once."""

    def __init__(self, path: str | Path, readonly: bool = False, timeout_s: float = 60.0) -> None:
        self.path = str(path)
        if readonly:
            if not Path(self.path).exists():
                raise FileNotFoundError(self.path)
            self.conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                                        timeout=timeout_s, isolation_level=None)
        else:
            self.conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
        self.conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        self.conn.row_factory = sqlite3.Row
        self._known: set[str] = set()

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


def _q(col: str) -> str:
    return '"' + col.replace('"', '""') + '"'
