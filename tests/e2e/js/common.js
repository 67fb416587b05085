'use strict';
// Shared plumbing of the ali-ons drivers: JSON arguments on the first stdin line, JSON lines on
// stdout (one object each, the last with "event": "done"), the client's own logs on stderr.

const readline = require('readline');

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event }, fields || {})) + '\n');
}

// ali-ons logs through console by default; keep stdout for JSON only.
const logger = {
  info() {},
  debug() {},
  warn(...args) { console.error('[warn]', ...args); },
  error(...args) { console.error('[error]', ...args); },
};

// ali-ons insists on an HTTP client, used only to look up name servers over HTTP;
// the drivers always pass nameSrv, so this one must never be called.
const httpclient = {
  async request(url) { throw new Error(`unexpected HTTP lookup of ${url}`); },
};

// Resolves with the arguments; onStop runs on a "stop" line or at EOF.
function start(onStop) {
  return new Promise(resolve => {
    const rl = readline.createInterface({ input: process.stdin });
    let args = null;
    rl.on('line', line => {
      if (args === null) {
        args = JSON.parse(line);
        resolve(args);
      } else if (line.trim() === 'stop' && onStop) {
        onStop('stopped');
      }
    });
    rl.on('close', () => { if (onStop) onStop('stopped'); });
  });
}

// Every run ends by itself: a hard wall-clock limit exits even if a close() hangs.
function hardLimit(seconds) {
  const timer = setTimeout(() => {
    emit('done', { error: `hard deadline of ${seconds} s` });
    process.exit(3);
  }, seconds * 1000);
  timer.unref();
}

module.exports = { emit, logger, httpclient, start, hardLimit };
