"""A real MCP client (the official Python SDK, `pip install mcp`) driving
`orchestrator mcp` over stdio, for crates/cli/tests/mcp_server.rs.

usage: client.py [--modern] ORCHESTRATOR REPO PLAN.json [URL]

With --modern the SDK's high-level `mcp.Client` connects in its default
mode (protocol 2026-07-28 where the server offers it: no handshake, and a
server asks through `InputRequiredResult` answers the client retries);
without, a `ClientSession` does the initialize handshake (2025-11-25).

With URL the client connects to a server already listening there
(`orchestrator mcp --listen`) over streamable HTTP instead of starting
`ORCHESTRATOR mcp --repo REPO` on stdio.

PLAN is a list of calls: {"tool": name, "arguments": {...}} and optionally
"cancel_after": seconds (the call is cancelled by the client after that
long) or "repeat": n (the call is made n times; the round-trip times are
reported) or "progress": true (the call asks for progress notifications,
which are reported) or "elicit": "accept" | "accept_false" | "decline" |
"cancel" (how the client's user answers an elicitation request during the
call; each request's message and schema are reported under "elicited").
The client declares the elicitation capability only when some call of the
plan has "elicit". Prints one JSON object: the server's name, every tool with its
schemas (each input and output schema checked against the JSON Schema
meta-schema), one entry per call, then every resource the server lists
with its text, and what a read of a file it does not list gave.
"""

import json
import sys
import time
from contextlib import asynccontextmanager

import anyio
import jsonschema
import mcp.types as types
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def content_text(result):
    return "\n".join(getattr(c, "text", "") for c in (result.content or []))


async def main():
    argv = sys.argv[1:]
    modern = "--modern" in argv
    argv = [a for a in argv if a != "--modern"]
    program, repo, plan_file = argv[0], argv[1], argv[2]
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    url = argv[3] if len(argv) > 3 else None
    params = StdioServerParameters(command=program, args=["mcp", "--repo", repo])
    out = {"tools": [], "calls": []}
    # How the user answers elicitation requests during the current call, and
    # what was asked.
    elicit = {"answer": None, "asked": []}

    async def on_elicit(context, request):
        elicit["asked"].append(
            {"mode": request.mode, "message": request.message,
             "schema": getattr(request, "requested_schema", None)}
        )
        answer = elicit["answer"]
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        if answer == "accept_false":
            return types.ElicitResult(action="accept", content={"approve": False})
        if answer in ("decline", "cancel"):
            return types.ElicitResult(action=answer)
        return types.ErrorData(code=-32600, message="this call expected no elicitation")

    elicitation_callback = on_elicit if any("elicit" in call for call in plan) else None

    @asynccontextmanager
    async def connect():
        if modern:
            target = url if url else params
            async with Client(target, elicitation_callback=elicitation_callback) as client:
                info = client.server_info
                yield client, info.name if info else None, client.protocol_version
            return
        transport = streamable_http_client(url) if url else stdio_client(params)
        async with transport as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicitation_callback) as session:
                init = await session.initialize()
                yield session, init.server_info.name, init.protocol_version

    async with connect() as (session, server, protocol_version):
        out["server"] = server
        out["protocol_version"] = protocol_version
        listed = await session.list_tools()
        for tool in listed.tools:
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            if tool.output_schema is not None:
                jsonschema.Draft202012Validator.check_schema(tool.output_schema)
            out["tools"].append(
                {
                    "name": tool.name,
                    "input_schema": tool.input_schema,
                    "output_schema": tool.output_schema,
                    "input_schema_bytes": len(json.dumps(tool.input_schema)),
                    "output_schema_bytes": len(json.dumps(tool.output_schema or {})),
                }
            )
        for call in plan:
            entry = {"tool": call["tool"]}
            elicit["answer"] = call.get("elicit")
            elicit["asked"] = entry["elicited"] = []
            if "cancel_after" in call:
                started = time.monotonic()
                with anyio.move_on_after(call["cancel_after"]) as scope:
                    result = await session.call_tool(call["tool"], call["arguments"])
                    entry["is_error"] = bool(result.is_error)
                    entry["text"] = content_text(result)
                entry["cancelled"] = scope.cancelled_caught
                entry["seconds"] = time.monotonic() - started
                out["calls"].append(entry)
                continue
            times = []
            progress = []

            async def on_progress(done, total, message):
                progress.append({"progress": done, "total": total, "message": message})

            callback = on_progress if call.get("progress") else None
            for _ in range(call.get("repeat", 1)):
                started = time.monotonic()
                result = await session.call_tool(
                    call["tool"], call["arguments"], progress_callback=callback
                )
                times.append((time.monotonic() - started) * 1000.0)
            entry["is_error"] = bool(result.is_error)
            entry["structured"] = result.structured_content
            entry["text"] = content_text(result)
            if callback is not None:
                entry["progress"] = progress
            if len(times) > 1:
                times.sort()
                entry["median_ms"] = times[len(times) // 2]
            out["calls"].append(entry)
        listed = await session.list_resources()
        out["resources"] = []
        for resource in listed.resources:
            read = await session.read_resource(resource.uri)
            out["resources"].append(
                {
                    "uri": str(resource.uri),
                    "name": resource.name,
                    "mime_type": resource.mime_type,
                    "text": "".join(getattr(c, "text", "") for c in read.contents),
                }
            )
        try:
            await session.read_resource("file:///etc/passwd")
            out["outside_resource"] = "read"
        except Exception as e:  # the server must refuse it
            out["outside_resource"] = str(e)
    print(json.dumps(out))


anyio.run(main)
