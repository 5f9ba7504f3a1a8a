// Preloaded (node --require) into server-everything's streamableHttp mode,
// which calls app.listen(PORT) with no host: bind 127.0.0.1 only, so the
// test server is never reachable from outside this machine.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === "number" || typeof args[0] === "string") && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
