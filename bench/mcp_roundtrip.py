"""code_execute of print(1) in Python through `vectraguard mcp serve` (stdio), with
the official MCP Python SDK: the first call of a connection (cold: it makes the
sandbox) and the calls after it (warm), client to result.

    bench/mcp_roundtrip.py VECTRAGUARD [RUNS]     (run with target/test-tools/mcp/bin/python)
"""
import asyncio
import os
import statistics
import sys
import time

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

CALL = {"language": "python", "code": "print(1)"}


async def connection(vg, warm_runs, pool):
    env = {k: v for k, v in os.environ.items() if k.startswith("VECTRAGUARD_")}
    params = StdioServerParameters(command=vg, args=["mcp", "serve", "--ask", "never",
                                                     "--pool", str(pool),
                                                     "--", "--best-effort-limits"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            if pool:
                await asyncio.sleep(1.0)  # the pool fills while the client starts up
            t0 = time.perf_counter()
            first = await session.call_tool("code_execute", CALL)
            cold = (time.perf_counter() - t0) * 1000
            assert not first.is_error, first
            warm = []
            for _ in range(warm_runs):
                t0 = time.perf_counter()
                r = await session.call_tool("code_execute", CALL)
                warm.append((time.perf_counter() - t0) * 1000)
                assert not r.is_error, r
            await session.call_tool("code_destroy_sandbox", {})
            return cold, warm


async def main():
    vg = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    colds, warms, pooled = [], [], []
    for _ in range(5):
        cold, warm = await connection(vg, runs, 0)
        colds.append(cold)
        warms.extend(warm)
        first, _ = await connection(vg, 0, 1)
        pooled.append(first)
    print("code_execute print(1), client to result:")
    print("  warm: median %.1f ms, p90 %.1f ms over %d calls (target <= 30 ms)"
          % (statistics.median(warms), sorted(warms)[int(0.9 * (len(warms) - 1))], len(warms)))
    print("  cold (first call of a connection, makes the sandbox): median %.1f ms over %d"
          % (statistics.median(colds), len(colds)))
    print("  first call with --pool 1 (a sandbox made ahead): median %.1f ms over %d"
          % (statistics.median(pooled), len(pooled)))


asyncio.run(main())
