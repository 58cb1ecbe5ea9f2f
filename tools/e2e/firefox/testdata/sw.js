'use strict';
// Reports every push event to the test: its data byte for byte (base64),
// or null when the push had no payload.
const report = (kind, body) =>
  fetch('/report', { method: 'POST', body: JSON.stringify({ kind, ...body }) });

function base64(buf) {
  let s = '';
  for (const b of new Uint8Array(buf)) s += String.fromCharCode(b);
  return btoa(s);
}

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('push', (e) => {
  e.waitUntil(report('push', { data: e.data ? base64(e.data.arrayBuffer()) : null }));
});
// Firefox fires this when it drops its registrations, as it does when the
// server hands it a new uaid: the test fails on it.
self.addEventListener('pushsubscriptionchange', (e) => e.waitUntil(report('pushsubscriptionchange', {})));
