// Preload (node --require ./loopback.cjs ...) that makes every TCP listen()
// without an explicit host bind to loopback instead of all interfaces.
// server-everything's HTTP modes call app.listen(PORT) with no host, which
// would otherwise listen on every interface; tests must stay on 127.0.0.1.
// Override the address with MANIFOLD_LISTEN_HOST (e.g. "::1").
'use strict';
const net = require('node:net');
const host = process.env.MANIFOLD_LISTEN_HOST || '127.0.0.1';
const orig = net.Server.prototype.listen;
const isPort = v => typeof v === 'number' || (typeof v === 'string' && /^\d+$/.test(v));
net.Server.prototype.listen = function (...args) {
  if (args.length > 0 && isPort(args[0]) && typeof args[1] !== 'string') {
    args.splice(1, 0, host);
  } else if (args.length > 0 && args[0] !== null && typeof args[0] === 'object' &&
             !('fd' in args[0]) && !('path' in args[0]) && !('_handle' in args[0]) &&
             args[0].host === undefined) {
    args[0] = { ...args[0], host };
  }
  return orig.apply(this, args);
};
