// Preloaded into the gateway process (node --require) by a shutdown test: once SIGTERM has
// arrived, the next write to stdout throws synchronously, as a log write to a broken stdout
// can. This listener is added before the gateway's own, so the gateway's handler meets it.
const fs = require('node:fs');

let armed = false;
process.on('SIGTERM', () => {
  armed = true;
});

for (const name of ['write', 'writeSync']) {
  const original = fs[name];
  fs[name] = function (fd, ...rest) {
    if (armed && fd === 1) {
      armed = false;
      throw Object.assign(new Error('injected fault: stdout write failed'), { code: 'EIO' });
    }
    return original.call(this, fd, ...rest);
  };
}
