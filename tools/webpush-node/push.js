// An application server's push with the npm web-push package, written as
// its README writes it: setVapidDetails, then sendNotification. The
// README's quickstart runs it against the development server (https with
// its development CA in NODE_EXTRA_CA_CERTS).
//
//   node tools/webpush-node/push.js VAPID.json SUBSCRIPTION.json MESSAGE
//
// VAPID.json is `pushsend keys`' output, SUBSCRIPTION.json a
// PushSubscription's JSON (`pushsend listen -sub-file`).
const fs = require('fs');
const webpush = require('web-push');

const [keysFile, subFile, message] = process.argv.slice(2);
const keys = JSON.parse(fs.readFileSync(keysFile, 'utf8'));
const subscription = JSON.parse(fs.readFileSync(subFile, 'utf8'));

webpush.setVapidDetails('mailto:you@example.com', keys.publicKey, keys.privateKey);
webpush.sendNotification(subscription, message)
  .then((res) => console.log(res.statusCode, res.headers.location))
  .catch((err) => {
    console.error('web-push:', err.statusCode || '', err.body || err.message);
    process.exit(1);
  });
