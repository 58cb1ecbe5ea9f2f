#!/usr/bin/env node
// Sends one push with the real web-push library (RFC 8291 aes128gcm +
// RFC 8292 VAPID) and prints the response as JSON on stdout:
//   node send.js '<json args>'
// args: {endpoint, p256dh, auth, payload (string or null), ttl, topic?,
//        urgency?, vapidPublic, vapidPrivate, subject, encoding?}
const webpush = require('web-push');

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
  try {
    const res = await webpush.sendNotification(sub, a.payload === null ? null : a.payload, opts);
    console.log(JSON.stringify({ status: res.statusCode, headers: res.headers, body: res.body }));
  } catch (err) {
    if (err.statusCode) {
      console.log(JSON.stringify({ status: err.statusCode, headers: err.headers, body: err.body }));
      return;
    }
    console.error(err.stack || String(err));
    process.exit(2);
  }
}
main();
