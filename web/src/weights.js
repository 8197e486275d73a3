// Loading weights from the modules people have (docs/design.md, "Weights from the
// modules people have"): the checks of the options { prefix, layout, names },
// of one .safetensors file or its shards, and of a state_dict's entries; and
// the heap copies, which hold only what the core reads: each shard's header,
// then the bytes of the tensors a load uses (a model's other layers never
// enter the WASM heap).
import { MHAError } from './errors.js';
import {
  checkBytes, checkOptionsObject, checkParameter, describe, shapeOf,
} from './validate.js';

const LAYOUTS = ['auto', 'torch', 'qkv-linear', 'gpt2', 'neox'];
const MAX_HEADER_BYTES = 100 * 2 ** 20;  // the core refuses longer headers
const ROLES = ['q', 'k', 'v', 'out', 'qkv'];

// The core's options: { prefix, layout, names }.
export function checkWeightOptions(options, name) {
  const o = checkOptionsObject(options, name, ['prefix', 'layout', 'names']);
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

// One .safetensors file's bytes, or an array of them (the shards of one
// checkpoint), as an array of Uint8Arrays.
export function checkShards(bytes, name) {
  if (!Array.isArray(bytes)) return [checkBytes(bytes, `${name}: bytes`)];
  if (bytes.length === 0) {
    throw new MHAError(`${name}: bytes: expected the bytes of a .safetensors file or an array ` +
                       'of them (shards), received an empty array');
  }
  return bytes.map((shard, i) => checkBytes(shard, `${name}: bytes[${i}]`));
}

// A shard's header in the heap, as the binding reads it: {ptr, size, fileSize}.
// Only the 8-byte length and the JSON header are copied (only the length when
// it is impossible: the core reports it); the core checks every offset
// against the whole file's size.
export function copyHeader(heap, bytes) {
  let size = bytes.byteLength;
  if (size >= 8) {
    const length = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
    size = length <= Math.min(size - 8, MAX_HEADER_BYTES) ? 8 + length : 8;
  }
  return { ptr: size === 0 ? 0 : heap.copyIn(bytes, size), size, fileSize: bytes.byteLength };
}

// The tensors a load reads, [{name, shard, begin, end}] from the core, copied
// into the heap: [{name, ptr}].
export function copySources(heap, shards, sources) {
  return sources.map(({ name, shard, begin, end }) => ({
    name,
    ptr: end > begin ? heap.copyIn(shards[shard].subarray(begin, end)) : 0,
  }));
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
