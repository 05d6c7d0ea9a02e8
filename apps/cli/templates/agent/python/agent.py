"""{{name}}: a backend for the control plane's `http` runtime (docs/runtimes.md), in Python with
the standard library only. Run it with

    AAAS_WEBHOOK_SECRET=whsec_... PORT={{port}} python3 agent.py

For each execution of a run the control plane POSTs a signed JSON request here; this backend
verifies the Standard Webhooks signature, then answers with NDJSON runtime operations, one per
line, applied by the control plane as they arrive:
- a message containing "{{keyword}}" asks the caller for a confirmation; the answer comes back as a
  new request (trigger `interaction_responded`) and the run completes (or is rejected);
- anything else: a `working` status, an artifact streamed in two chunks, then `completed`.
"""
import base64
import hashlib
import hmac
import json
import os
import re
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ.get("AAAS_WEBHOOK_SECRET", "")
PORT = int(os.environ.get("PORT", "{{port}}"))
HOST = os.environ.get("HOST", "127.0.0.1")
KEYWORD = "{{keyword}}"
# Requests signed longer ago (or further ahead) than this are refused: a replay guard.
TOLERANCE_SECONDS = 5 * 60
MAX_BODY_BYTES = 1024 * 1024

if not SECRET.startswith("whsec_"):
    sys.exit("AAAS_WEBHOOK_SECRET must be the whsec_... value printed by `aaas secrets create NAME --generate`")
KEY = base64.b64decode(SECRET[len("whsec_"):])


def verified(headers, body):
    """Standard Webhooks: `webhook-signature` holds space-separated `v1,<base64 HMAC-SHA256>` values
    over `<webhook-id>.<webhook-timestamp>.<body>`; one must match, and the timestamp must be recent."""
    msg_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not msg_id or not timestamp or not signatures:
        return False
    if not re.fullmatch(r"\d+", timestamp) or abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        return False
    expected = hmac.new(KEY, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    for signature in signatures.split(" "):
        version, _, value = signature.partition(",")
        if version != "v1" or not value:
            continue
        try:
            given = base64.b64decode(value, validate=True)
        except ValueError:
            continue
        if hmac.compare_digest(given, expected):
            return True
    return False


def text_of(message):
    return "".join(part.get("text", "") for part in (message or {}).get("parts", []))


def say(text):
    return {"parts": [{"text": text}]}


def operations(request):
    """The operations answering one request (see the table in docs/runtimes.md)."""
    trigger = request["trigger"]
    if trigger["kind"] == "interaction_responded":
        what = (trigger["interaction"].get("state") or {}).get("request", "")
        if trigger["interaction"].get("decision") == "approved":
            return [{"op": "status", "status": "completed", "message": say(f"Confirmed, done: {what}")}]
        return [{"op": "status", "status": "rejected", "message": say(f"Called off: {what}")}]
    if trigger["kind"] == "interaction_expired":
        return [{"op": "status", "status": "failed", "message": say("Nobody confirmed in time.")}]
    text = text_of(request.get("input"))
    if KEYWORD in text.lower():
        return [{
            "op": "interaction",
            "kind": "confirmation",
            "message": say(f'Shall I go ahead with "{text}"?'),
            "options": [
                {"id": "approve", "label": "Go ahead", "kind": "approve"},
                {"id": "reject", "label": "Cancel", "kind": "reject"},
            ],
            "state": {"request": text},
        }]
    return [
        {"op": "status", "status": "working", "message": say(f'Working on "{text}"...')},
        {"op": "artifact", "artifactId": "answer", "name": "answer.txt", "parts": [{"text": "You said: "}]},
        {"op": "artifact", "artifactId": "answer", "parts": [{"text": text}], "append": True, "lastChunk": True},
        {"op": "status", "status": "completed", "message": say("Done.")},
    ]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, text=""):
        body = text.encode()
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        try:
            length = int(self.headers.get("content-length", "0"))
        except ValueError:
            return self.reply(400, "bad content-length\n")
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            return self.reply(413)
        body = self.rfile.read(length)
        if not verified(self.headers, body):
            return self.reply(401, "invalid signature\n")
        try:
            request = json.loads(body)
        except ValueError:
            return self.reply(400, "invalid JSON\n")
        # a canceled task: the control plane POSTs {"runId","canceled":true} to the revision's cancelUrl
        if request.get("canceled") is True:
            return self.reply(204)
        self.send_response(200)
        self.send_header("content-type", "application/x-ndjson")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for op in operations(request):
            line = (json.dumps(op) + "\n").encode()
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()
            time.sleep(0.05)  # stand-in for real work: each line is applied as it arrives
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format, *args):
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


if __name__ == "__main__":
    server = ThreadingHTTPServer((HOST, PORT), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"{{slug}} listening on http://{HOST}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        server.server_close()
