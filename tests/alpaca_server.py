"""A loopback endpoint of Alpaca's market-data API (``GET /v2/stocks/bars``, as the official
``alpaca-py`` client asks it: symbols, 1-minute timeframe, start and end, a page token), serving
the bundled sample's bars as a live feed would: at any moment only the bars that have ended by
the tests' fake clock's ``now``. ``requests`` holds what was asked."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pandas as pd

BAR = pd.Timedelta(minutes=1)


class AlpacaBars:
    def __init__(self, sample: Path, clock) -> None:
        self.sample, self.clock = Path(sample), clock
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                server.requests.append({"path": url.path, **query})
                if url.path != "/v2/stocks/bars":
                    return self._send(404, {"message": "not found"})
                if not self.headers.get("APCA-API-KEY-ID"):
                    return self._send(401, {"message": "unauthorized"})
                return self._send(200, server.bars(query))

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def bars(self, query: dict) -> dict:
        start, end = pd.Timestamp(query["start"]), pd.Timestamp(query["end"])
        now = pd.Timestamp(self.clock())
        symbols = query["symbols"].split(",")
        out: dict[str, list] = {s: [] for s in symbols}
        for path in sorted((self.sample / "bars").glob("date=*/*.parquet")):
            day = pd.Timestamp(path.parent.name.removeprefix("date="), tz="UTC")
            if not (start - pd.Timedelta(days=1) <= day <= end + pd.Timedelta(days=1)):
                continue
            bars = pd.read_parquet(path)
            keep = (bars["ticker"].isin(symbols) & (bars["ts"] >= start) & (bars["ts"] < end)
                    & (bars["ts"] + BAR <= now))
            for row in bars[keep].itertuples():
                out[row.ticker].append({
                    "t": row.ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "o": row.open, "h": row.high,
                    "l": row.low, "c": row.close, "v": row.volume, "n": 1,
                    "vw": (row.high + row.low) / 2})
        return {"bars": out, "next_page_token": None}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
