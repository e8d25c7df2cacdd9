"""OpenAI Batch API mode: submit a model's calls as batch files, collect them on a later run.

State lives in the run directory (``batches/<model>.json`` plus a JSON-lines file of the
requests' receipts), written before and after every remote step, so a run killed at any point
resumes without submitting anything twice: a request file is uploaded once (its file id is
recorded), a batch is created once (its id is recorded), and results are journalled once (the
batch is marked collected). Results land in the same journal and forecast table as online
calls; failed lines become invalid rows with the API's reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

import pandas as pd

from finbench.core.errors import ModelStopped
from finbench.core.outputs import write_json, write_text
from finbench.forecasters.completion import completion_dict
from finbench.forecasters.llm import answer_record

MAX_REQUESTS = 50_000          # per batch file (the API's limit)
MAX_BYTES = 190 * 1024 * 1024  # under the API's 200 MB per file
FINISHED = ("completed", "failed", "expired", "cancelled")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


class BatchJob:
    """The batch state of one model in one run directory."""

    def __init__(self, run_dir: Path, forecaster) -> None:
        self.forecaster = forecaster
        self.folder = Path(run_dir) / "batches"
        self.state_path = self.folder / f"{_slug(forecaster.name)}.json"
        self.meta_path = self.folder / f"{_slug(forecaster.name)}-requests.jsonl"
        self.state = (json.loads(self.state_path.read_text()) if self.state_path.is_file()
                      else {"model": forecaster.name, "files": []})
        self.new: list[tuple[str, dict, dict]] = []  # custom_id, body, receipt

    # -- bookkeeping ---------------------------------------------------------------------
    def _save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json(self.state_path, self.state)

    def receipts(self) -> dict[str, dict]:
        if not self.meta_path.is_file():
            return {}
        out = {}
        for line in self.meta_path.read_text().splitlines():
            if line.endswith("}"):
                rec = json.loads(line)
                out[rec["custom_id"]] = rec
        return out

    def submitted_task_ids(self) -> set[str]:
        """Tasks already in a batch file (pending or collected): never requested again."""
        return {r["task_id"] for r in self.receipts().values()}

    def pending(self) -> list[dict]:
        return [f for f in self.state["files"] if not f.get("collected")]

    # -- building ------------------------------------------------------------------------
    def add(self, inputs) -> int:
        """Queue the requests of these tasks (prompts rendered from their gated contexts)."""
        f = self.forecaster
        times = inputs.contexts.max_input_time
        for i, (messages, sha) in enumerate(f.plan(inputs)):
            task_id = inputs.tasks["task_id"].iat[i]
            custom_id = f"{task_id}"
            body = f.request_body(messages)
            receipt = {"custom_id": custom_id, "task_id": task_id, "input_sha256": sha,
                       "max_input_time": times.iat[i].isoformat()
                       if not pd.isna(times.iat[i]) else None}
            self.new.append((custom_id, body, receipt))
        return len(self.new)

    def write_files(self) -> list[dict]:
        """Write queued requests as JSONL files (within the API's limits) and their receipts."""
        self.folder.mkdir(parents=True, exist_ok=True)
        files, lines, size = [], [], 0
        start = len(self.state["files"])

        def flush() -> None:
            nonlocal lines, size
            if not lines:
                return
            path = self.folder / f"{_slug(self.forecaster.name)}-{start + len(files):03d}.jsonl"
            write_text(path, "".join(lines))
            files.append({"path": path.name, "requests": len(lines)})
            lines, size = [], 0

        with open(self.meta_path, "a") as meta:
            for custom_id, body, receipt in self.new:
                line = json.dumps({"custom_id": custom_id, "method": "POST",
                                   "url": "/v1/chat/completions", "body": body}) + "\n"
                if len(lines) >= MAX_REQUESTS or size + len(line) > MAX_BYTES:
                    flush()
                lines.append(line)
                size += len(line)
                meta.write(json.dumps(receipt) + "\n")
        flush()
        self.new = []
        self.state["files"].extend(files)
        self._save()
        return files

    # -- remote steps --------------------------------------------------------------------
    def client(self):
        from openai import OpenAI

        f = self.forecaster
        return OpenAI(api_key=os.environ.get(f.config.api_key_env, ""), base_url=f.base_url,
                      timeout=f.config.timeout, max_retries=f.config.max_retries)

    @contextlib.contextmanager
    def _remote(self, step: str):
        """Around a call of the Batch API: a rejected key, model or path, or an endpoint that
        cannot be reached, stops this model (:class:`ModelStopped`); every step done is
        recorded, so the same command resumes."""
        import openai

        try:
            yield
        except (openai.AuthenticationError, openai.PermissionDeniedError,
                openai.NotFoundError, openai.APIConnectionError) as exc:
            key = os.environ.get(self.forecaster.config.api_key_env, "")
            text = str(exc).replace(key, "***") if key else str(exc)
            raise ModelStopped(f"{self.forecaster.name}: the Batch API refused to {step} "
                               f"({type(exc).__name__}: {text}); the batch files are kept and "
                               "the same command resumes once the key, model or base_url is "
                               "right") from None

    def submit(self, echo=print) -> None:
        """Upload every file not yet uploaded and create every batch not yet created."""
        with self._remote("take the batch"):
            self._submit(echo)

    def _submit(self, echo) -> None:
        client = self.client()
        for entry in self.pending():
            if not entry.get("input_file_id"):
                data = (self.folder / entry["path"]).read_bytes()
                uploaded = client.files.create(file=(entry["path"], data), purpose="batch")
                entry["input_file_id"] = uploaded.id
                self._save()
            if not entry.get("batch_id"):
                batch = client.batches.create(input_file_id=entry["input_file_id"],
                                              endpoint="/v1/chat/completions",
                                              completion_window="24h")
                entry["batch_id"], entry["status"] = batch.id, batch.status
                self._save()
                echo(f"{self.forecaster.name}: submitted batch {batch.id} "
                     f"({entry['requests']} requests)")

    def collect(self, journal, echo=print, cache=None) -> int:
        """Poll every pending batch; journal the results of finished ones. Returns how many
        batches are still pending."""
        if not self.pending():
            return 0
        self.submit(echo)  # finish any step a killed run left undone
        with self._remote("report on the batch"):
            return self._collect(journal, echo, cache)

    def _collect(self, journal, echo, cache) -> int:
        client = self.client()
        receipts = self.receipts()
        still = 0
        for entry in self.pending():
            batch = client.batches.retrieve(entry["batch_id"])
            entry["status"] = batch.status
            if batch.status not in FINISHED:
                still += 1
                counts = getattr(batch, "request_counts", None)
                done = f", {counts.completed}/{counts.total} done" if counts else ""
                echo(f"{self.forecaster.name}: batch {batch.id} is {batch.status}{done}")
                self._save()
                continue
            records, transcripts = self._records(client, batch, entry, receipts, cache)
            journal.append_records(records, transcripts=transcripts)
            entry["collected"] = True
            self._save()
            valid = sum(r["valid"] for r in records)
            echo(f"{self.forecaster.name}: collected batch {batch.id} ({batch.status}): "
                 f"{len(records)} answers, {valid} valid")
        return still

    def _records(self, client, batch, entry, receipts, cache) -> tuple[list[dict], list[dict]]:
        """The journal rows of a finished batch, and the transcripts of its calls."""
        f = self.forecaster
        sent = [json.loads(line) for line in (self.folder / entry["path"]).read_text().splitlines()]
        wanted = [line["custom_id"] for line in sent]
        messages = {line["custom_id"]: line["body"]["messages"] for line in sent}
        results: dict[str, dict] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for item in _result_items(client.files.content(file_id).text, file_id,
                                      f.name, set(wanted), results):
                response = item.get("response") or {}
                status = response.get("status_code")
                if item.get("error") or status != 200:
                    body = response.get("body")
                    err = item.get("error") or (body.get("error") if isinstance(body, dict)
                                                else None) or {}
                    message = err.get("message", "") if isinstance(err, dict) else str(err)
                    results[item["custom_id"]] = {
                        "transport_error": f"batch_error: http_{status}: {message}".strip()}
                    continue
                results[item["custom_id"]] = {**completion_dict(response.get("body")),
                                              "body": response.get("body")}
        records, transcripts = [], []
        for custom_id in wanted:
            receipt = receipts[custom_id]
            response = results.get(custom_id) or {
                "transport_error": f"batch_{batch.status}: no result for this request"}
            response = {**f.scrubbed(response), "batch_id": batch.id}
            if cache is not None and "transport_error" not in response:
                cache.put(f.cache_key(receipt["input_sha256"]), response)
            mit = pd.Timestamp(receipt["max_input_time"]) if receipt["max_input_time"] else pd.NaT
            records.append(answer_record(f, task_id=receipt["task_id"],
                                         sha=receipt["input_sha256"], max_input_time=mit,
                                         response=response, latency=0.0, from_cache=False))
            transcripts.append({"model": f.name, "task_id": receipt["task_id"], "attempt": 1,
                                "input_sha256": receipt["input_sha256"],
                                "messages": messages[custom_id], "response": response})
        return records, transcripts


def _result_items(text: str, file_id: str, model: str, wanted: set[str], seen: dict):
    """The result lines of one Batch API file, each checked before it is read. A line that
    is no JSON object, has no ``custom_id`` of this batch, answers a request twice (in either
    file: ``seen`` holds what the other gave) or holds a ``response`` or ``error`` of the
    wrong kind stops the model (:class:`ModelStopped`)
    naming the file and line: its requests cannot be told apart, so none is journalled, the
    batch stays uncollected and the same command reads the file again."""
    def bad(number: int, rule: str) -> ModelStopped:
        return ModelStopped(f"{model}: the Batch API's result file {file_id}, line {number}: "
                            f"{rule}; the batch is not collected and the same command reads "
                            "the file again")

    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise bad(number, "is no JSON") from None
        if not isinstance(item, dict):
            raise bad(number, "is no JSON object") from None
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or custom_id not in wanted:
            raise bad(number, f"custom_id {custom_id!r} is no request of this batch")
        if custom_id in seen:
            raise bad(number, f"custom_id {custom_id!r} is answered twice")
        if not isinstance(item.get("response"), dict | None):
            raise bad(number, "response is no JSON object")
        if not isinstance(item.get("error"), dict | str | None):
            raise bad(number, "error is no JSON object")
        yield item
