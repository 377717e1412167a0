// vidagent's CenterNet worker: runs the CenterNet-MobileNetV3 COCO detector with TensorFlow.js
// (WebAssembly backend) for a Python parent process.
//
// Usage: node centernet_worker.mjs <node_dir> <model_json>
//   node_dir    folder whose node_modules holds @tensorflow/tfjs-core, -converter, -backend-wasm
//   model_json  centernet.json (its weight files lie beside it)
//
// Protocol. stdout carries only protocol lines; all logging goes to stderr.
//   startup   -> {"ready": true, "backend": ..., "threads": n, "input": size, "load_ms": t}
//   request   <- 16-byte header: ASCII "VDT1", uint32 LE width, uint32 LE height, float32 LE min_score,
//                then width*height*3 bytes of RGB (width = height = the model's input size).
//   reply     -> {"ms": model_ms, "det": [[x1, y1, x2, y2, score, class], ...]}  (input pixels,
//                rows with score >= min_score, best first) or {"error": "..."}.
// The worker exits when stdin closes.

import { loadModel, loadTf, runMain, send, serveRequests } from './tfjs_runtime.mjs';

const OUTPUT_NAME = 'tower_0/detections';

async function main() {
  const [nodeDir, modelJson] = process.argv.slice(2);
  if (!nodeDir || !modelJson) throw new Error('usage: centernet_worker.mjs <node_dir> <model_json>');
  const t0 = performance.now();
  const { tf, converter, wasm } = await loadTf(nodeDir);
  const { model, height: size } = await loadModel(converter, modelJson);
  // Warm-up run, so that one-time allocations do not slow down the first real frame.
  tf.tidy(() => model.execute(tf.zeros([1, size, size, 3]), OUTPUT_NAME).dataSync());
  send({ ready: true, backend: tf.getBackend(), threads: wasm.getThreadsCount(), input: size,
         load_ms: Math.round(performance.now() - t0) });

  serveRequests('VDT1', (width, height, minScore, pixels) => {
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
  });
}

runMain(main);
