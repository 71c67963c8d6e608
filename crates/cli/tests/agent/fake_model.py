"""A scripted model for the `agent start` test: an OpenAI Responses API server on
127.0.0.1:PORT (streamed as server-sent events). The first turn asks the agent to run
`echo made-by-the-agent > proof.txt` with its `exec_command` tool; once the tool's
output comes back, it answers "done". Each request is logged as a JSON line to LOG.

    fake_model.py PORT LOG
"""
import http.server
import json
import sys

LOG = sys.argv[2]
STATE = {"n": 0}
def sse(handler, events):
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.end_headers()
    for ev in events:
        handler.wfile.write(("event: %s\ndata: %s\n\n" % (ev["type"], json.dumps(ev))).encode())
    handler.wfile.flush()
USAGE = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get("content-length", 0)); body = json.loads(self.rfile.read(n) or b"{}")
        STATE["n"] += 1
        with open(LOG, "a") as f:
            f.write(json.dumps({"n": STATE["n"], "path": self.path,
                                "authorization": self.headers.get("authorization"),
                                "tools": [t.get("name") or t.get("type") for t in body.get("tools", [])],
                                "input_types": [i.get("type") for i in body.get("input", [])]}) + "\n")
        rid = "resp_%d" % STATE["n"]
        has_output = any(i.get("type") == "function_call_output" for i in body.get("input", []))
        if not has_output:
            item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command",
                    "arguments": json.dumps({"cmd": "echo made-by-the-agent > proof.txt", "login": False})}
        else:
            item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "done", "annotations": []}]}
        sse(self, [
            {"type": "response.created", "response": {"id": rid}},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {"id": rid, "usage": USAGE}},
        ])
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
