"""An application server's push with pywebpush, written as its README
writes it: webpush() with the subscription, the data, the VAPID private
key and claims. The README's quickstart runs it against the development
server (https with its development CA in REQUESTS_CA_BUNDLE).

    python push.py VAPID.json SUBSCRIPTION.json MESSAGE

VAPID.json is `pushsend keys`' output, SUBSCRIPTION.json a
PushSubscription's JSON (`pushsend listen -sub-file`).
"""
import json
import sys

from pywebpush import WebPushException, webpush

keys_file, sub_file, message = sys.argv[1:4]
with open(keys_file) as f:
    keys = json.load(f)
with open(sub_file) as f:
    subscription = json.load(f)

try:
    resp = webpush(
        subscription_info=subscription,
        data=message,
        vapid_private_key=keys["privateKey"],
        vapid_claims={"sub": "mailto:you@example.com"},
    )
except WebPushException as e:
    print("pywebpush:", e, file=sys.stderr)
    sys.exit(1)
print(resp.status_code, resp.headers.get("Location"))
