// What vidagent's TensorFlow.js workers share: loading tfjs (wasm backend) from the models folder's
// node_modules, the framed request stream from the Python parent on stdin, and the whole life of a
// worker that runs one graph model on square RGB inputs (runModelWorker).
//
// Request framing (every worker): a 16-byte header, ASCII magic (4 bytes, one per worker kind),
// uint32 LE width, uint32 LE height, float32 LE parameter (its meaning is the worker's), then
// width*height*3 bytes of RGB. Replies are one JSON object per line on stdout; logging goes to stderr.
import { createRequire } from 'node:module';
import path from 'node:path';
import { loadArtifacts } from './tfjs_model.mjs';

const HEADER_BYTES = 16;

// Keep stdout clean for the protocol.
console.log = console.error;
console.info = console.error;
console.warn = console.error;

export function send(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// tfjs-core, -converter and -backend-wasm from <nodeDir>/node_modules, with the wasm backend ready.
// tfjs-backend-wasm 4.22 runs single-threaded under Node: its WASM_HAS_MULTITHREAD_SUPPORT flag is
// false there, and forcing it fails (Node workers cannot start from the blob: URL it builds).
export async function loadTf(nodeDir) {
  const require = createRequire(path.join(path.resolve(nodeDir), 'package.json'));
  const tf = require('@tensorflow/tfjs-core');
  const converter = require('@tensorflow/tfjs-converter');
  const wasm = require('@tensorflow/tfjs-backend-wasm');
  wasm.setWasmPaths(path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm')), path.sep));
  if (!(await tf.setBackend('wasm'))) throw new Error('could not initialise the tfjs wasm backend');
  await tf.ready();
  return { tf, converter, wasm };
}

// A graph model from its model.json on disk, and the [height, width] of its first input.
export async function loadModel(converter, modelJson) {
  const model = await converter.loadGraphModel({ load: async () => loadArtifacts(modelJson) });
  const dims = Object.values(model.modelSignature.inputs)[0].tensorShape.dim;
  return { model, height: Number.parseInt(dims[1].size, 10), width: Number.parseInt(dims[2].size, 10) };
}

// Calls handle(width, height, param, pixels) for each complete request on stdin (requests may
// arrive split or several at once); an exception in handle is answered as {"error": ...}.
// The process exits when stdin closes.
export function serveRequests(magic, handle) {
  let pending = Buffer.alloc(0);
  function drain() {
    while (pending.length >= HEADER_BYTES) {
      if (pending.toString('latin1', 0, 4) !== magic) throw new Error('bad request header');
      const width = pending.readUInt32LE(4);
      const height = pending.readUInt32LE(8);
      const need = HEADER_BYTES + width * height * 3;
      if (pending.length < need) break;
      try {
        handle(width, height, pending.readFloatLE(12), pending.subarray(HEADER_BYTES, need));
      } catch (err) {
        send({ error: String(err && err.stack ? err.stack : err) });
      }
      pending = pending.subarray(need);
    }
  }
  process.stdin.on('data', (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    drain();
  });
  process.stdin.on('end', () => process.exit(0));
}

// Runs an async main, printing its failure to stderr and exiting non-zero.
export function runMain(main) {
  main().catch((err) => {
    console.error(err && err.stack ? err.stack : String(err));
    process.exit(1);
  });
}

// The whole worker for a graph model with one square RGB input. Usage of the script:
//   node <script> <node_dir> <model_json>
// Loads tfjs and the model, runs it once on zeros (so that one-time allocations do not slow down
// the first real request), announces {"ready": true, "backend", "threads", "input": size,
// "load_ms"}, then answers each size x size request with {"ms": model_ms, ...reply(output, param)}.
//   magic    the worker's 4-byte request magic
//   item     what one request carries, for the error on a wrong size ("frame", "crop")
//   dtype    the input tensor's dtype ('float32' or 'int32'), values 0..255
//   execute  (model, input, tf) -> a plain array read from the output (runs inside tf.tidy)
//   reply    (output, param) -> the fields of the answer besides "ms"
export function runModelWorker({ magic, item, dtype, execute, reply }) {
  runMain(async () => {
    const [nodeDir, modelJson] = process.argv.slice(2);
    if (!nodeDir || !modelJson) {
      throw new Error(`usage: ${path.basename(process.argv[1])} <node_dir> <model_json>`);
    }
    const t0 = performance.now();
    const { tf, converter, wasm } = await loadTf(nodeDir);
    const { model, height: size } = await loadModel(converter, modelJson);
    const Values = dtype === 'int32' ? Int32Array : Float32Array;
    tf.tidy(() => execute(model, tf.zeros([1, size, size, 3], dtype), tf));
    send({ ready: true, backend: tf.getBackend(), threads: wasm.getThreadsCount(), input: size,
           load_ms: Math.round(performance.now() - t0) });

    serveRequests(magic, (width, height, param, pixels) => {
      if (width !== size || height !== size) {
        send({ error: `expected a ${size}x${size} ${item}, got ${width}x${height}` });
        return;
      }
      const start = performance.now();
      const output = tf.tidy(() => {
        const values = new Values(pixels.length);
        values.set(pixels); // uint8 RGB -> the model's input type, range 0..255
        return execute(model, tf.tensor4d(values, [1, size, size, 3], dtype), tf);
      });
      const ms = performance.now() - start;
      send({ ms: Math.round(ms * 10) / 10, ...reply(output, param) });
    });
  });
}
