// Loading weights from the modules people have (docs/design.md, "Weights from the
// modules people have"): the checks of the options { prefix, layout, names },
// of one .safetensors file or its shards, and of a state_dict's entries; and
// the heap copy of a shard's header (the tensors a load uses follow it one at
// a time, safetensors_load.js: a model's other layers never enter the heap).
import { MHAError } from './errors.js';
import { checkSource } from './safetensors_sources.js';
import {
  checkOptionsObject, checkParameter, describe, shapeOf,
} from './validate.js';

const LAYOUTS = ['auto', 'torch', 'qkv-linear', 'gpt2', 'neox'];
const ROLES = ['q', 'k', 'v', 'out', 'qkv'];

// The core's options: { prefix, layout, names } (`more`: other keys the
// method takes, checked by it).
export function checkWeightOptions(options, name, more = []) {
  const o = checkOptionsObject(options, name, ['prefix', 'layout', 'names', ...more]);
  const { prefix = '', layout = 'auto', names = {} } = o;
  if (typeof prefix !== 'string') {
    throw new MHAError(`${name}: prefix: expected a string, received ${describe(prefix)}`);
  }
  if (!LAYOUTS.includes(layout)) {
    throw new MHAError(`${name}: layout: expected one of ${LAYOUTS.join(', ')}, received ` +
                       describe(layout));
  }
  if (names === null || typeof names !== 'object' || Array.isArray(names)) {
    throw new MHAError(`${name}: names: expected an object {role: module name}, received ` +
                       describe(names));
  }
  const checked = {};
  for (const [role, module] of Object.entries(names)) {
    if (!ROLES.includes(role)) {
      throw new MHAError(`${name}: names: unknown role '${role}', expected one of ` +
                         ROLES.join(', '));
    }
    if (typeof module !== 'string' || module === '') {
      throw new MHAError(`${name}: names.${role}: expected a module name, received ` +
                         describe(module));
    }
    checked[role] = module;
  }
  return { prefix, layout, names: checked };
}

// One .safetensors file's source (bytes, a Blob, a Response or a
// ReadableStream: safetensors_sources.js), or an array of them (the shards of
// one checkpoint), as an array of checked sources.
export function checkShards(bytes, name) {
  if (!Array.isArray(bytes)) return [checkSource(bytes, `${name}: bytes`)];
  if (bytes.length === 0) {
    throw new MHAError(`${name}: bytes: expected a .safetensors file's bytes, Blob, Response or ` +
                       'ReadableStream, or an array of them (shards), received an empty array');
  }
  return bytes.map((shard, i) => checkSource(shard, `${name}: bytes[${i}]`));
}

// A shard's header ({bytes, fileSize} from readHeader) in the heap, as the
// binding reads it: {ptr, size, fileSize}; the core checks every offset
// against the whole file's size.
export function copyHeader(heap, { bytes, fileSize }) {
  return { ptr: bytes.length === 0 ? 0 : heap.copyIn(bytes), size: bytes.length, fileSize };
}

// A 0-d tensor (a buffer such as GPT-2's masked_bias): no projection uses one.
function isScalar(value) {
  if (!(value?.data instanceof Float32Array) || value.data.length !== 1) return false;
  const shape = shapeOf(value);
  return Array.isArray(shape) && shape.length === 0;
}

// A state_dict's entries as the binding takes them: those under the prefix
// with their data ([name, tensor]); the others, and 0-d tensors, by shape
// only ([name, {shape}], for the error that lists the nearest modules),
// skipped when not tensors. A bare Float32Array is a parameter of known shape
// (`shapes`, nn.MultiheadAttention's names) or else a 1-D tensor. Errors are
// named `${name}: ${key}` (name: the method's).
export function checkStateDictEntries(stateDict, prefix, shapes, name) {
  const inside = [];
  const outside = [];
  for (const key of Object.keys(stateDict)) {
    const value = stateDict[key];
    if (isScalar(value)) {
      outside.push([key, { shape: [] }]);
    } else if (key.startsWith(prefix)) {
      const shape = shapes.get(key) ?? (value instanceof Float32Array && value.length > 0
        ? [value.length] : undefined);
      inside.push([key, checkParameter(value, `${name}: ${key}`, shape)]);
    } else if (value instanceof Float32Array && value.length > 0) {
      outside.push([key, { shape: [value.length] }]);
    } else if (value?.data instanceof Float32Array) {
      const shape = shapeOf(value);
      if (Array.isArray(shape) && shape.every((d) => Number.isSafeInteger(d) && d > 0)) {
        outside.push([key, { shape: [...shape] }]);
      }
    }
  }
  return { inside, outside };
}
