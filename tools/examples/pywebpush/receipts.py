"""Delivery receipts for an application server (docs/receipts.md): the
push sent with pywebpush's webpush(), the receipts API called with
requests, its requests signed with py_vapid (what pywebpush signs with).

    python receipts.py poll VAPID.json SUBSCRIPTION.json MESSAGE [TTL]
    python receipts.py webhook PORT VAPID.json SUBSCRIPTION.json MESSAGE [TTL]

poll:    creates a receipt subscription, pushes MESSAGE asking for a
         receipt (Push-Receipt), long-polls the subscription until the
         push's receipt comes, acknowledges it.
webhook: the same, but the receipt is POSTed to http://127.0.0.1:PORT/
         (the server needs receipt-webhooks, and receipt-webhook-insecure
         for a loopback http URL); its Webhook-Signature is checked.

Prints the receipt as JSON and exits 0 once it came. An application
creates one receipt subscription and keeps its URL for every push; this
example makes one a run to stay self-contained.
"""
import hashlib
import hmac
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import urlsplit

import requests
from py_vapid import Vapid
from pywebpush import webpush

SUBJECT = "mailto:you@example.com"


def vapid_auth(origin, keys):
    """Signs a receipts call for the push service's origin, as a push to
    it is signed."""
    vapid = Vapid.from_string(private_key=keys["privateKey"])
    claims = {"aud": origin, "sub": SUBJECT, "exp": int(time.time()) + 12 * 3600}
    return vapid.sign(claims)["Authorization"]


def call(method, url, origin, keys, body=None):
    headers = {"Authorization": vapid_auth(origin, keys)}
    return requests.request(method, url, headers=headers, json=body, timeout=40)


def create_receipts(origin, keys, webhook=None):
    """A receipt subscription for this key: {"receipts"} (its URL), and
    {"webhook_secret"} when webhook is given."""
    resp = call("POST", origin + "/receipts", origin, keys, {"webhook": webhook} if webhook else None)
    if resp.status_code != 201:
        raise RuntimeError("POST /receipts: %d %s" % (resp.status_code, resp.text))
    return resp.json()


def push(subscription, keys, message, ttl, receipts_url):
    """Sends the message asking for a receipt; its Location names it in
    the receipt."""
    resp = webpush(
        subscription_info=subscription,
        data=message,
        vapid_private_key=keys["privateKey"],
        vapid_claims={"sub": SUBJECT},
        ttl=ttl,
        headers={"Push-Receipt": receipts_url},
    )
    return resp.headers["Location"]


def poll_receipt(receipts_url, origin, keys, location):
    """Long-polls until the receipt for location comes, and acknowledges
    what it read (a receipt comes back until acknowledged)."""
    while True:
        resp = call("GET", receipts_url + "?wait=30", origin, keys)
        if resp.status_code == 429:  # too many GETs waiting on this node
            time.sleep(int(resp.headers.get("Retry-After", "1")))
            continue
        if resp.status_code != 200:
            raise RuntimeError("GET receipts: %d %s" % (resp.status_code, resp.text))
        receipts = resp.json()["receipts"]
        if receipts:
            ack = call("POST", receipts_url + "/ack", origin, keys, {"ids": [r["id"] for r in receipts]})
            if ack.status_code != 204:
                raise RuntimeError("ack: %d" % ack.status_code)
        for r in receipts:
            if r["location"] == location:
                return r


def verify_signature(secret, header, raw_body, tolerance=300):
    """Checks a webhook POST's Webhook-Signature header,
    "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>", over
    the body's raw bytes, refusing one older than tolerance (a replay)."""
    fields = dict(p.strip().split("=", 1) for p in (header or "").split(",") if "=" in p)
    try:
        t = int(fields.get("t", ""))
    except ValueError:
        return False
    if abs(time.time() - t) > tolerance:
        return False
    want = hmac.new(secret.encode(), b"%d." % t + raw_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, fields.get("v1", ""))


def webhook_receipt(port, origin, keys, send):
    """Serves the webhook on 127.0.0.1:port until the receipt for the push
    send() makes comes; a POST whose signature does not verify is refused
    (401) and its receipts are not taken."""
    state = {"location": None, "receipt": None, "secret": None}
    got = threading.Event()

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if not verify_signature(state["secret"], self.headers.get("Webhook-Signature"), body):
                self.send_response(401)
                self.end_headers()
                return
            self.send_response(204)  # taken: the service acknowledges them
            self.end_headers()
            for r in json.loads(body)["receipts"]:
                if r["location"] == state["location"]:
                    state["receipt"] = r
                    got.set()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", port), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sub = create_receipts(origin, keys, "http://127.0.0.1:%d/receipts" % port)
    state["secret"] = sub["webhook_secret"]
    state["location"] = send(sub["receipts"])
    got.wait()
    server.shutdown()
    return state["receipt"]


def main(args):
    mode = args.pop(0) if args else ""
    port = int(args.pop(0)) if mode == "webhook" and args else 0
    if mode not in ("poll", "webhook") or len(args) < 3:
        print("usage: python receipts.py poll|webhook [PORT] VAPID.json SUBSCRIPTION.json MESSAGE [TTL]", file=sys.stderr)
        return 2
    keys_file, sub_file, message = args[:3]
    ttl = int(args[3]) if len(args) > 3 else 60
    with open(keys_file) as f:
        keys = json.load(f)
    with open(sub_file) as f:
        subscription = json.load(f)
    u = urlsplit(subscription["endpoint"])
    origin = "%s://%s" % (u.scheme, u.netloc)

    def send(receipts_url):
        return push(subscription, keys, message, ttl, receipts_url)

    if mode == "poll":
        receipts_url = create_receipts(origin, keys)["receipts"]
        receipt = poll_receipt(receipts_url, origin, keys, send(receipts_url))
    else:
        receipt = webhook_receipt(port, origin, keys, send)
    print(json.dumps(receipt))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
