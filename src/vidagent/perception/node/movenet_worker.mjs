// vidagent's MoveNet worker: runs MoveNet single-pose (17 COCO body keypoints of one person) with
// TensorFlow.js (WebAssembly backend) for a Python parent process.
//
// Usage: node movenet_worker.mjs <node_dir> <model_json>
//   node_dir    folder whose node_modules holds @tensorflow/tfjs-core, -converter, -backend-wasm
//   model_json  movenet-lightning.json or movenet-thunder.json (weights beside it)
//
// Model: input "input:0" int32 [1, S, S, 3] RGB 0..255 (S = 192 lightning, 256 thunder), output
// "Identity:0" float32 [1, 1, 17, 3]: y, x (0..1 of the input square) and score per keypoint.
//
// Protocol. stdout carries only protocol lines; all logging goes to stderr.
//   startup   -> {"ready": true, "backend": ..., "threads": n, "input": S, "load_ms": t}
//   request   <- 16-byte header: ASCII "VDP1", uint32 LE width, uint32 LE height, float32 LE (unused),
//                then width*height*3 bytes of RGB (width = height = S): one person's square crop.
//   reply     -> {"ms": model_ms, "kp": [[y, x, score], ... 17 rows]} or {"error": "..."}.
// The worker exits when stdin closes.

import { runModelWorker } from './tfjs_runtime.mjs';

runModelWorker({
  magic: 'VDP1',
  item: 'crop',
  dtype: 'int32',
  execute: (model, input) => model.execute(input).arraySync()[0][0],
  reply: (kp) => ({ kp: kp.map((row) => row.map((v) => Math.round(v * 10000) / 10000)) }),
});
