#!/usr/bin/env node
// Sends one push with the real web-push library (RFC 8291 encryption and
// RFC 8292 VAPID, built by web-push's own generateRequestDetails) and
// prints the response as JSON on stdout:
//   node send.js '<json args>'
// args: {endpoint, p256dh, auth, payload (string or null), ttl, topic?,
//        urgency?, vapidPublic, vapidPrivate, subject, encoding?}
// web-push's sendNotification always speaks TLS; test servers on loopback
// speak plain HTTP, so the request web-push built is sent with the module
// the endpoint's scheme calls for.
const webpush = require('web-push');
const http = require('http');
const https = require('https');

function send(details) {
  return new Promise((resolve, reject) => {
    const url = new URL(details.endpoint);
    const mod = url.protocol === 'https:' ? https : http;
    const req = mod.request({
      method: details.method, hostname: url.hostname, port: url.port,
      path: url.pathname + url.search, headers: details.headers,
    }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('error', reject);
    if (details.body) req.write(details.body);
    req.end();
  });
}

async function main() {
  const a = JSON.parse(process.argv[2]);
  const sub = { endpoint: a.endpoint, keys: { p256dh: a.p256dh, auth: a.auth } };
  const opts = {
    TTL: a.ttl,
    vapidDetails: { subject: a.subject, publicKey: a.vapidPublic, privateKey: a.vapidPrivate },
    contentEncoding: a.encoding || 'aes128gcm',
  };
  if (a.topic) opts.topic = a.topic;
  if (a.urgency) opts.urgency = a.urgency;
  const details = webpush.generateRequestDetails(sub, a.payload === null ? null : a.payload, opts);
  console.log(JSON.stringify(await send(details)));
}
main().catch((err) => { console.error(err.stack || String(err)); process.exit(2); });
