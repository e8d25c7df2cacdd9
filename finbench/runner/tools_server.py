"""``finbench tools serve``: one task of an external agent (``kind = "mcp"``) served over the
Model Context Protocol (docs/spec.md §12.5), on stdio or streamable HTTP on 127.0.0.1.

The server offers the task's prompt (the MCP prompt ``forecast``, and the server's
instructions), the track's tools the model's config names, answered by the same gate as a
chat agent's at the task's ``now`` (:func:`finbench.tracks.tools.call_tool`), and
``submit_forecast``. Each call is receipted in the task's session folder before its answer
is sent (:mod:`finbench.runlog.sessions`); a call past ``max_tool_calls`` ends the task
without an answer, as a chat agent's budget does; a submitted forecast ends it too and is
journalled by the run's next pass, valid or not (what is wrong with an invalid one is said
to the agent, and counted). The session folder is locked while served: one server a task.

:class:`TaskTools` is the served task without a transport (what the MCP handlers call).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

from finbench.core.errors import ConfigError, RunError
from finbench.core.folder_lock import FolderLock
from finbench.forecasters.agent import budget_ending, receipt
from finbench.forecasters.external import SUBMIT
from finbench.runlog.rundir import load_run_config, read_manifest
from finbench.runlog.sessions import Session, waiting
from finbench.tracks import plugin_of
from finbench.tracks.tools import call_tool, canonical, instant_text

SUBMIT_DESCRIPTION = ("Submit your forecast of the task (the answer the prompt asks for, "
                      "under this schema). It is final: the task ends with it, and an answer "
                      "that breaks the schema is counted as invalid.")


def waiting_tasks(run_dir: Path, model: str | None = None) -> dict[str, list[str]]:
    """Per external agent of the run, the tasks waiting for it (``finbench tools tasks``)."""
    run_dir = Path(run_dir)
    read_manifest(run_dir)  # a RunError when this is no run directory
    return waiting(run_dir, model)


class TaskTools:
    """One waiting task of agent ``model`` in ``run_dir``: its prompt, tools and answer."""

    def __init__(self, run_dir: Path, model: str, task_id: str) -> None:
        self.run_dir = Path(run_dir)
        config = load_run_config(self.run_dir)
        agents = [m for m in config.models if m.kind == "mcp"]
        found = [m for m in agents if m.name == model]
        if not found:
            raise ConfigError(f"--model {model!r}: no agent of kind 'mcp' in the run's config "
                              f"(its agents: {', '.join(m.name for m in agents) or 'none'})")
        self.model = found[0]
        self.session = Session(self.run_dir, model, task_id)
        self.facts = self.session.prompt()
        if self.session.answer() is not None:
            raise RunError(f"{self.session.folder}: task {task_id!r} is answered already "
                           "(nothing more is served; the run journals it)")
        track = plugin_of(config).open(config)
        self.prompt = track.prompt.for_model(self.model)
        self.toolbox = track.tools()
        if self.toolbox.snapshot_sha256 != self.facts["snapshot_sha256"]:
            raise RunError(f"{config.data.store}: is snapshot "
                           f"{self.toolbox.snapshot_sha256[:12]}, not the run's "
                           f"({self.facts['snapshot_sha256'][:12]}): its data changed")
        rows = track.tasks[track.tasks["task_id"] == task_id]
        if rows.empty:
            raise RunError(f"task {task_id!r}: no task of the run's config")
        self.task = rows.iloc[0].to_dict()
        self.now = self.toolbox.now(self.task)
        if instant_text(self.now) != self.facts["now"]:
            raise RunError(f"{self.session.path('prompt.json')}: its now {self.facts['now']} "
                           f"is not the task's ({instant_text(self.now)})")
        self.calls = self.session.calls()
        self.ended = False

    @property
    def instructions(self) -> str:
        """The task's prompt as one text (what a client that reads no prompt sees)."""
        parts = [m["content"] for m in self.facts["messages"]]
        return "\n\n".join([*parts, f"Answer with the tool {SUBMIT} (once: it is final); "
                            f"at most {self.model.max_tool_calls} calls of the other tools."])

    def tools(self) -> list[dict]:
        """name, description and input schema of each tool served."""
        out = [{"name": t["function"]["name"], "description": t["function"]["description"],
                "input_schema": t["function"]["parameters"]} for t in self.facts["tools"]]
        return [*out, {"name": SUBMIT, "description": SUBMIT_DESCRIPTION,
                       "input_schema": self.facts["answer_schema"]}]

    def call(self, name: str, arguments: dict | None, client: dict | None = None
             ) -> tuple[str, bool]:
        """(the answer's text, whether it is an error) of one call; receipted first."""
        if self.ended:
            return (f"task {self.session.task_id!r} has ended: nothing more is served"), True
        if name == SUBMIT:
            return self._submit(arguments, client)
        asked = len(self.calls) + 1
        if asked > self.model.max_tool_calls:
            ending = budget_ending(asked, self.model.max_tool_calls)
            self.session.write_answer(arguments=None, ended=ending, client=client or {})
            self.ended = True
            return f"{ending}: the task ends without an answer", True
        text = canonical(arguments) if isinstance(arguments, dict) else canonical({})
        result = call_tool(self.toolbox, list(self.model.tools), name, text, self.now,
                           self.task)
        made = receipt(asked, {"id": f"call-{asked}", "function": {"name": name}}, text,
                       self.now, result)
        self.session.add_call(made, result.content)
        self.calls.append({"receipt": made, "content": result.content})
        return result.content, result.refusal is not None

    def _submit(self, arguments: dict | None, client: dict | None) -> tuple[str, bool]:
        arguments = arguments if isinstance(arguments, dict) else {}
        parsed = self.prompt.parse({"content": canonical(arguments), "finish_reason": "stop"},
                                   self.model)
        self.session.write_answer(arguments=arguments, ended=None, client=client or {})
        self.ended = True
        said = "valid" if parsed.valid else f"invalid ({parsed.error})"
        return (f"forecast received, {said}; the run journals it on its next pass. The task "
                "has ended."), not parsed.valid


def mcp_server(served: TaskTools, on_end=None):
    """The MCP SDK's low-level server over ``served`` (``on_end()``: called once the task
    has ended)."""
    try:
        import mcp_types as types
        from mcp.server.lowlevel import Server
    except ImportError:  # pragma: no cover - the extra is installed with [dev]
        raise ConfigError("finbench tools serve needs the MCP SDK: pip install "
                          "'finbench[mcp]'") from None

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(**t) for t in served.tools()])

    async def call_tool_(ctx, params):
        info = getattr(ctx.session.client_params, "client_info", None) \
            if getattr(ctx.session, "client_params", None) else None
        client = {"name": info.name, "version": info.version} if info else {}
        text, error = served.call(params.name, params.arguments, client)
        if served.ended and on_end is not None:
            on_end()
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)

    async def list_prompts(ctx, params):
        return types.ListPromptsResult(prompts=[types.Prompt(
            name="forecast", description=f"the task {served.session.task_id}")])

    async def get_prompt(ctx, params):
        if params.name != "forecast":
            raise ValueError(f"no prompt {params.name!r} (the one prompt: forecast)")
        return types.GetPromptResult(description=f"the task {served.session.task_id}",
                                     messages=[types.PromptMessage(
                                         role="user", content=types.TextContent(text=text))
                                         for text in _prompt_texts(served)])

    from finbench.core.version import code_version

    return Server("finbench", version=code_version()["package_version"],
                  instructions=served.instructions, on_list_tools=list_tools,
                  on_call_tool=call_tool_, on_list_prompts=list_prompts,
                  on_get_prompt=get_prompt)


def _prompt_texts(served: TaskTools) -> list[str]:
    """The prompt's messages as MCP prompt messages (which have no system role: the system
    message is the first user message)."""
    return [m["content"] for m in served.facts["messages"]]


def serve(run_dir: Path, model: str, task_id: str, *, http_port: int | None = None,
          echo=None) -> None:
    """Serve the task until its client goes (stdio) or it has ended (HTTP: the server stops
    a moment after the answer that ends it)."""
    echo = echo or (lambda text: print(text, file=sys.stderr, flush=True))
    served = TaskTools(run_dir, model, task_id)
    with FolderLock(served.session.folder, command=f"finbench tools serve {task_id}"):
        if served.session.answer() is not None:  # answered while this one started
            raise RunError(f"{served.session.folder}: task {task_id!r} is answered already")
        served.calls = served.session.calls()  # as the lock found them
        if http_port is None:
            asyncio.run(_stdio(served))
        else:
            asyncio.run(_http(served, http_port, echo))


async def _stdio(served: TaskTools) -> None:
    from mcp.server.stdio import stdio_server

    server = mcp_server(served)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _http(served: TaskTools, port: int, echo) -> None:
    import uvicorn

    loop = asyncio.get_running_loop()
    holder: dict = {}

    def stop_soon() -> None:  # after the answer that ended the task has gone out
        loop.call_later(0.5, lambda: setattr(holder["server"], "should_exit", True))

    app = mcp_server(served, on_end=stop_soon).streamable_http_app(host="127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # listening before the address is printed: a client that connects at once (the server
    # may still be starting) waits in the backlog instead of being refused
    sock.listen(128)
    server = holder["server"] = uvicorn.Server(uvicorn.Config(
        app, log_level="warning", timeout_graceful_shutdown=2, lifespan="on"))
    echo(f"serving task {served.session.task_id} of {served.model.name} at "
         f"http://127.0.0.1:{sock.getsockname()[1]}/mcp")
    await server.serve(sockets=[sock])
