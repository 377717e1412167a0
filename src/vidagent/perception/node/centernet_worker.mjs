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

import { runModelWorker } from './tfjs_runtime.mjs';

const OUTPUT_NAME = 'tower_0/detections';

runModelWorker({
  magic: 'VDT1',
  item: 'frame',
  dtype: 'float32', // RGB 0..255: the model folds the /255 scaling into its first convolution
  execute: (model, input) => model.execute(input, OUTPUT_NAME).arraySync()[0],
  reply: (rows, minScore) => {
    const det = [];
    for (const r of rows) {
      if (r[4] < minScore) continue;
      det.push([r[0], r[1], r[2], r[3], r[4]].map((v) => Math.round(v * 1000) / 1000).concat([r[5]]));
    }
    return { det };
  },
});
