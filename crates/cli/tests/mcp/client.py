"""An MCP client built on the official Python SDK (`mcp` from PyPI), driving
`vectraguard mcp serve` for the end-to-end tests.

    client.py stdio VECTRAGUARD [SERVE ARGS...]   the server as a child, on stdio
    client.py http URL TOKEN                      streamable HTTP with a bearer token

Reads a JSON list of calls on stdin, [{"tool": NAME, "args": {...}}, ...] (or
{"pause": SECONDS}; a "handle" of "$last" is the one the previous call returned), or {"elicit": ANSWERS, "calls": [...]} to answer the server's
elicitations with each of ANSWERS in turn ("approve", "deny" or "decline"; the
questions are printed last as {"elicited": [...]}), makes them in order on one
connection and prints one JSON object per call:
{"tool", "is_error", "text", "structured"} or {"tool", "error"} for a protocol
error; the first line is {"tools": [names...]} from tools/list.
"""
import asyncio
import json
import os
import sys
import time

import httpx2
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def drive(session, calls):
    await session.initialize()
    listed = await session.list_tools()
    print(json.dumps({"tools": sorted(t.name for t in listed.tools),
                      "schemas": {t.name: t.input_schema for t in listed.tools}}), flush=True)
    last_handle = None
    for call in calls:
        if "pause" in call:  # {"pause": SECONDS}: nothing sent meanwhile
            await asyncio.sleep(call["pause"])
            continue
        started = time.time()
        args = dict(call.get("args", {}))
        if args.get("handle") == "$last":  # the handle the previous call returned
            args["handle"] = last_handle
        try:
            result = await session.call_tool(call["tool"], args,
                                             read_timeout_seconds=120)
            last_handle = (result.structured_content or {}).get("handle")
            text = "".join(getattr(c, "text", "") for c in result.content)
            print(json.dumps({"tool": call["tool"], "is_error": bool(result.is_error),
                              "text": text, "structured": result.structured_content,
                              "at": started}), flush=True)
        except Exception as e:  # a protocol error: the server refused the call
            print(json.dumps({"tool": call["tool"], "error": str(e)}), flush=True)


ELICITED = []


def elicitation(answers):
    async def answer(context, params):
        ELICITED.append(params.message)
        choice = answers.pop(0) if answers else "decline"
        if choice == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"approve": choice == "approve"})
    return answer


async def main():
    calls = json.load(sys.stdin)
    callback = None
    if isinstance(calls, dict):
        callback = elicitation(list(calls.get("elicit", [])))
        calls = calls["calls"]
    mode = sys.argv[1]
    if mode == "stdio":
        # The SDK gives the server a minimal environment; the records folder is kept.
        env = {k: v for k, v in os.environ.items() if k.startswith("VECTRAGUARD_")}
        params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, elicitation_callback=callback) as session:
                await drive(session, calls)
    else:
        url, token = sys.argv[2], sys.argv[3]
        client = httpx2.AsyncClient(headers={"Authorization": "Bearer " + token},
                                    timeout=httpx2.Timeout(120))
        async with client:
            async with streamable_http_client(url, http_client=client) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write, elicitation_callback=callback) as session:
                    await drive(session, calls)


asyncio.run(main())
if ELICITED:
    print(json.dumps({"elicited": ELICITED}), flush=True)
