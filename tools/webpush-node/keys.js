#!/usr/bin/env node
// Prints a fresh VAPID key pair as JSON: {"publicKey": ..., "privateKey": ...}.
console.log(JSON.stringify(require('web-push').generateVAPIDKeys()));
