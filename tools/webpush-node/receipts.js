// Delivery receipts for an application server (docs/receipts.md): the
// push sent with the npm web-push package, the receipts API called with
// Node's own fetch, its requests signed with web-push's VAPID headers.
//
//   node receipts.js poll VAPID.json SUBSCRIPTION.json MESSAGE [TTL]
//   node receipts.js webhook PORT VAPID.json SUBSCRIPTION.json MESSAGE [TTL]
//
// poll:    creates a receipt subscription, pushes MESSAGE asking for a
//          receipt (Push-Receipt), long-polls the subscription until the
//          push's receipt comes, acknowledges it.
// webhook: the same, but the receipt is POSTed to http://127.0.0.1:PORT/
//          (the server needs receipt-webhooks, and receipt-webhook-insecure
//          for a loopback http URL); its Webhook-Signature is checked.
//
// Prints the receipt as JSON and exits 0 once it came. An application
// creates one receipt subscription and keeps its URL for every push; this
// example makes one a run to stay self-contained.
const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const webpush = require('web-push');

const SUBJECT = 'mailto:you@example.com';

// vapidAuth signs a receipts call for the push service's origin, as a
// push to it is signed.
function vapidAuth(origin, keys) {
  return webpush.getVapidHeaders(origin, SUBJECT, keys.publicKey, keys.privateKey, 'aes128gcm').Authorization;
}

async function call(method, url, origin, keys, body) {
  const headers = { Authorization: vapidAuth(origin, keys) };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  return fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

// createReceipts makes a receipt subscription for this key: {receipts}
// (its URL), and {webhook_secret} when webhook is given.
async function createReceipts(origin, keys, webhook) {
  const res = await call('POST', origin + '/receipts', origin, keys, webhook ? { webhook } : undefined);
  if (res.status !== 201) throw new Error(`POST /receipts: ${res.status} ${await res.text()}`);
  return res.json();
}

// push sends the message asking for a receipt; its Location names it in
// the receipt.
async function push(subscription, keys, message, ttl, receiptsURL) {
  webpush.setVapidDetails(SUBJECT, keys.publicKey, keys.privateKey);
  const res = await webpush.sendNotification(subscription, message, { TTL: ttl, headers: { 'Push-Receipt': receiptsURL } });
  return res.headers.location;
}

// pollReceipt long-polls until the receipt for location comes, and
// acknowledges what it read (a receipt comes back until acknowledged).
async function pollReceipt(receiptsURL, origin, keys, location) {
  for (;;) {
    const res = await call('GET', receiptsURL + '?wait=30', origin, keys);
    if (res.status === 429) { // too many GETs waiting on this node
      await new Promise((r) => setTimeout(r, 1000 * (Number(res.headers.get('retry-after')) || 1)));
      continue;
    }
    if (res.status !== 200) throw new Error(`GET receipts: ${res.status} ${await res.text()}`);
    const { receipts } = await res.json();
    if (receipts.length > 0) {
      const ack = await call('POST', receiptsURL + '/ack', origin, keys, { ids: receipts.map((r) => r.id) });
      if (ack.status !== 204) throw new Error(`ack: ${ack.status}`);
    }
    const ours = receipts.find((r) => r.location === location);
    if (ours) return ours;
  }
}

// verifySignature checks a webhook POST's Webhook-Signature header,
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>", over
// the body's raw bytes, refusing one older than toleranceSec (a replay).
function verifySignature(secret, header, rawBody, toleranceSec = 300) {
  const fields = Object.fromEntries((header || '').split(',').map((p) => p.trim().split('=', 2)));
  const t = Number(fields.t);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceSec) return false;
  const want = crypto.createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest();
  const got = Buffer.from(fields.v1 || '', 'hex');
  return got.length === want.length && crypto.timingSafeEqual(got, want);
}

// webhookReceipt serves the webhook on 127.0.0.1:port until the receipt
// for the push that push() makes comes; a POST whose signature does not
// verify is refused (401) and its receipts are not taken.
async function webhookReceipt(port, origin, keys, send) {
  const server = http.createServer();
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  const sub = await createReceipts(origin, keys, `http://127.0.0.1:${port}/receipts`);
  let location;
  const receipt = new Promise((resolve) => {
    server.on('request', (req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        if (!verifySignature(sub.webhook_secret, req.headers['webhook-signature'], body)) {
          res.writeHead(401).end();
          return;
        }
        res.writeHead(204).end(); // taken: the service acknowledges them
        const ours = JSON.parse(body).receipts.find((r) => r.location === location);
        if (ours) resolve(ours);
      });
    });
  });
  location = await send(sub.receipts);
  const got = await receipt;
  server.close();
  return got;
}

async function main() {
  const args = process.argv.slice(2);
  const mode = args.shift();
  const port = mode === 'webhook' ? Number(args.shift()) : 0;
  const [keysFile, subFile, message, ttl = '60'] = args;
  if (!['poll', 'webhook'].includes(mode) || !message) {
    console.error('usage: node receipts.js poll|webhook [PORT] VAPID.json SUBSCRIPTION.json MESSAGE [TTL]');
    process.exit(2);
  }
  const keys = JSON.parse(fs.readFileSync(keysFile, 'utf8'));
  const subscription = JSON.parse(fs.readFileSync(subFile, 'utf8'));
  const origin = new URL(subscription.endpoint).origin;
  const send = (receiptsURL) => push(subscription, keys, message, Number(ttl), receiptsURL);
  let receipt;
  if (mode === 'poll') {
    const { receipts } = await createReceipts(origin, keys);
    receipt = await pollReceipt(receipts, origin, keys, await send(receipts));
  } else {
    receipt = await webhookReceipt(port, origin, keys, send);
  }
  console.log(JSON.stringify(receipt));
}

main().catch((err) => {
  console.error('receipts:', err.statusCode || '', err.body || err.message);
  process.exit(1);
});
