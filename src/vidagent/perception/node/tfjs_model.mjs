// Loading a TensorFlow.js graph model from its model.json and weight files on disk (no fetch).
import { readFileSync } from 'node:fs';
import path from 'node:path';

// The artifacts object that tfjs-converter's loadGraphModel takes from a custom IO handler.
export function loadArtifacts(modelJson) {
  const spec = JSON.parse(readFileSync(modelJson, 'utf8'));
  const dir = path.dirname(modelJson);
  const weightSpecs = [];
  const buffers = [];
  for (const group of spec.weightsManifest) {
    weightSpecs.push(...group.weights);
    for (const p of group.paths) buffers.push(readFileSync(path.join(dir, p)));
  }
  const all = Buffer.concat(buffers);
  return {
    modelTopology: spec.modelTopology,
    format: spec.format,
    generatedBy: spec.generatedBy,
    convertedBy: spec.convertedBy,
    signature: spec.signature,
    userDefinedMetadata: spec.userDefinedMetadata,
    modelInitializer: spec.modelInitializer,
    weightSpecs,
    weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength),
  };
}
