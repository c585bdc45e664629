// What client.mjs and ws_client.mjs share: the command line
// (URL WANT [TIMEOUT_MS] …), the output object, the timeout, and how a run
// ends — one JSON object on stdout, exit code 0 once the event with id WANT
// has arrived, 1 at the timeout.

// start reads the command line of script (usage: node SCRIPT URL WANT
// [TIMEOUT_MS]usageTail), makes the output object — ids, frames, then the
// script's own fields, opens, errors, ms — and arms the timeout. close runs
// first when the run ends (it closes the stream). It returns the URL, the
// arguments after TIMEOUT_MS, the output object, finish(code), and record(env),
// which counts one envelope: an event's id in ids (finishing the run at WANT),
// a synthetic frame's type in frames.
export function start(script, usageTail, fields, close) {
  const [url, wantArg, timeoutArg = '30000', ...rest] = process.argv.slice(2);
  if (!url || !wantArg) {
    console.error(`usage: node ${script} URL WANT [TIMEOUT_MS]${usageTail}`);
    process.exit(2);
  }
  const want = Number(wantArg);
  const started = Date.now();
  const out = { ids: [], frames: [], ...fields, opens: 0, errors: 0, ms: 0 };

  function finish(code) {
    close();
    clearTimeout(timer);
    out.ms = Date.now() - started;
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exitCode = code;
  }

  const timer = setTimeout(() => {
    console.error(`timeout: ${out.ids.length} ids after ${timeoutArg} ms`);
    finish(1);
  }, Number(timeoutArg));

  function record(env) {
    if (env.id) {
      out.ids.push(env.id);
      if (env.id >= want) finish(0);
    } else {
      out.frames.push(env.type);
    }
  }
  return { url, rest, out, finish, record };
}
