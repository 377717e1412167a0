// vidagent's CenterNet worker: runs the CenterNet-MobileNetV3 COCO detector with TensorFlow.js
// (WebAssembly backend) for a Python parent process.
//
// Usage: node centernet_worker.mjs <node_dir> <model_json>
//   node_dir    folder whose node_modules holds @tensorflow/tfjs-core, -converter, -backend-wasm
//   model_json  centernet.json (its weight files lie beside it)
//
// tfjs-backend-wasm 4.22 runs single-threaded under Node: its WASM_HAS_MULTITHREAD_SUPPORT flag is
// false there, and forcing it fails (Node workers cannot start from the blob: URL it builds).
//
// Protocol. stdout carries only protocol lines; all logging goes to stderr.
//   startup   -> {"ready": true, "backend": ..., "threads": n, "input": size, "load_ms": t}
//   request   <- 16-byte header: ASCII "VDT1", uint32 LE width, uint32 LE height, float32 LE min_score,
//                then width*height*3 bytes of RGB (width = height = the model's input size).
//   reply     -> {"ms": model_ms, "det": [[x1, y1, x2, y2, score, class], ...]}  (input pixels,
//                rows with score >= min_score, best first) or {"error": "..."}.
// The worker exits when stdin closes.

import { createRequire } from 'node:module';
import path from 'node:path';
import { loadArtifacts } from './tfjs_model.mjs';

const MAGIC = 'VDT1';
const HEADER_BYTES = 16;
const OUTPUT_NAME = 'tower_0/detections';

// Keep stdout clean for the protocol.
console.log = console.error;
console.info = console.error;
console.warn = console.error;

function send(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function main() {
  const [nodeDir, modelJson] = process.argv.slice(2);
  if (!nodeDir || !modelJson) throw new Error('usage: centernet_worker.mjs <node_dir> <model_json>');
  const require = createRequire(path.join(path.resolve(nodeDir), 'package.json'));
  const tf = require('@tensorflow/tfjs-core');
  const converter = require('@tensorflow/tfjs-converter');
  const wasm = require('@tensorflow/tfjs-backend-wasm');

  const t0 = performance.now();
  wasm.setWasmPaths(path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm')), path.sep));
  if (!(await tf.setBackend('wasm'))) throw new Error('could not initialise the tfjs wasm backend');
  await tf.ready();

  const model = await converter.loadGraphModel({ load: async () => loadArtifacts(modelJson) });
  const dims = Object.values(model.modelSignature.inputs)[0].tensorShape.dim;
  const size = Number.parseInt(dims[1].size, 10);
  // Warm-up run, so that one-time allocations do not slow down the first real frame.
  tf.tidy(() => model.execute(tf.zeros([1, size, size, 3]), OUTPUT_NAME).dataSync());
  send({ ready: true, backend: tf.getBackend(), threads: wasm.getThreadsCount(), input: size,
         load_ms: Math.round(performance.now() - t0) });

  let pending = Buffer.alloc(0);

  function handle(header, pixels) {
    const width = header.readUInt32LE(4);
    const height = header.readUInt32LE(8);
    const minScore = header.readFloatLE(12);
    if (width !== size || height !== size) {
      send({ error: `expected a ${size}x${size} frame, got ${width}x${height}` });
      return;
    }
    const start = performance.now();
    const rows = tf.tidy(() => {
      const values = new Float32Array(pixels.length);
      values.set(pixels); // uint8 RGB -> float 0..255, the model's input range
      const input = tf.tensor4d(values, [1, height, width, 3], 'float32');
      return model.execute(input, OUTPUT_NAME).arraySync()[0];
    });
    const ms = performance.now() - start;
    const det = [];
    for (const r of rows) {
      if (r[4] < minScore) continue;
      det.push([r[0], r[1], r[2], r[3], r[4]].map((v) => Math.round(v * 1000) / 1000).concat([r[5]]));
    }
    send({ ms: Math.round(ms * 10) / 10, det });
  }

  // Handle every complete request in the buffer (requests may arrive split or several at once).
  function drain() {
    while (pending.length >= HEADER_BYTES) {
      if (pending.toString('latin1', 0, 4) !== MAGIC) throw new Error('bad request header');
      const need = HEADER_BYTES + pending.readUInt32LE(4) * pending.readUInt32LE(8) * 3;
      if (pending.length < need) break;
      try {
        handle(pending.subarray(0, HEADER_BYTES), pending.subarray(HEADER_BYTES, need));
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

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
