// Argument checks that must happen in JS, before anything reaches the WASM
// heap: types, shapes arrays, element counts, option names. Shape rules that
// depend on the module (heads, kdim, mask sizes) are checked by the core.
import { MHAError } from './errors.js';

// "(2, 3, 4)", as the core prints shapes.
export function shapeString(shape) {
  return `(${shape.join(', ')})`;
}

function article(noun) {
  return /^[AEIOU]/.test(noun) ? 'an' : 'a';
}

// What a value is, for "received ..." in messages.
export function describe(value) {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return `an Array of length ${value.length}`;
  if (ArrayBuffer.isView(value)) {
    return `${article(value.constructor.name)} ${value.constructor.name} of length ${value.length}`;
  }
  if (typeof value === 'object') return `an object with keys {${Object.keys(value).join(', ')}}`;
  if (typeof value === 'string') return `the string '${value}'`;
  return `${typeof value} ${String(value)}`;
}

function isPositiveInteger(value) {
  return Number.isSafeInteger(value) && value > 0;
}

export function checkPositiveInteger(value, name) {
  if (!isPositiveInteger(value)) {
    throw new MHAError(`${name}: expected a positive integer, received ${describe(value)}`);
  }
  return value;
}

// undefined means the default (0 for the core).
export function checkOptionalDim(value, name) {
  return value === undefined ? 0 : checkPositiveInteger(value, name);
}

export function checkNumber(value, name) {
  if (typeof value !== 'number') {
    throw new MHAError(`${name}: expected a number, received ${describe(value)}`);
  }
  return value;
}

// A string option that is one of `values` (the first when undefined).
export function checkChoice(value, name, values) {
  if (value === undefined) return values[0];
  if (!values.includes(value)) {
    const names = values.map((v) => `'${v}'`);
    throw new MHAError(`${name}: expected ${names.slice(0, -1).join(', ')} or ${names.at(-1)}, ` +
                       `received ${describe(value)}`);
  }
  return value;
}

export function checkBoolean(value, name, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') {
    throw new MHAError(`${name}: expected true or false, received ${describe(value)}`);
  }
  return value;
}

export function checkOptionsObject(options, name, allowedKeys) {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new MHAError(`${name}: expected an options object, received ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!allowedKeys.includes(key)) {
      throw new MHAError(
        `${name}: unknown option '${key}', expected one of ${allowedKeys.join(', ')}`);
    }
  }
  return options;
}

// A tensor's dims are its `shape`, or its `dims` (onnxruntime-web's and
// transformers.js's Tensor): the name of the one it has (undefined: neither).
export const shapeKey = (tensor) => ['shape', 'dims'].find((key) => key in tensor);
export const shapeOf = (tensor) => tensor[shapeKey(tensor)];

export function checkShape(shape, name, key = 'shape') {
  if (!Array.isArray(shape) || shape.length === 0 || !shape.every(isPositiveInteger)) {
    const received = Array.isArray(shape) ? `[${shape.map(String).join(', ')}]` : describe(shape);
    throw new MHAError(
      `${name}.${key}: expected a non-empty array of positive integers, received ${received}`);
  }
  return shape;
}

// A tensor's dims, checked (named as the tensor names them).
function checkShapeOf(tensor, name) {
  const key = shapeKey(tensor);
  return checkShape(tensor[key], name, key);
}

export function numElements(shape) {
  return shape.reduce((product, dim) => product * dim, 1);
}

function checkElementCount(data, shape, name) {
  const expected = numElements(shape);
  if (data.length !== expected) {
    throw new MHAError(`${name}: expected ${expected} elements for shape ${shapeString(shape)}, ` +
                       `received ${data.length}`);
  }
}

function checkTensorObject(tensor, name) {
  if (tensor === null || typeof tensor !== 'object' || ArrayBuffer.isView(tensor) ||
      !('data' in tensor) || shapeKey(tensor) === undefined) {
    throw new MHAError(`${name}: expected a tensor {data, shape} or {data, dims}, received ` +
                       describe(tensor));
  }
}

// A float32 tensor {data: Float32Array, shape (or dims)}.
export function checkTensor(tensor, name) {
  checkTensorObject(tensor, name);
  if (!(tensor.data instanceof Float32Array)) {
    throw new MHAError(`${name}.data: expected a Float32Array, received ${describe(tensor.data)}`);
  }
  checkElementCount(tensor.data, checkShapeOf(tensor, name), name);
  return tensor;
}

// key and value: two tensors, or both null with a cache (attend it only).
export function checkKeyValue(key, value, cache) {
  const cached = cache !== undefined && cache !== null;
  if (key === null && value === null) {
    if (cached) return;
    throw new MHAError('key, value: both null attends the keys of a cache only, and there is ' +
                       'no cache: expected options.cache, or two tensors');
  }
  if ((key === null || value === null) && cached) {
    throw new MHAError('key, value: expected two tensors or both null (attend the cache ' +
                       `only), received key ${describe(key)} and value ${describe(value)}`);
  }
  checkTensor(key, 'key');
  checkTensor(value, 'value');
}

// undefined, or {data: Uint8Array (bool) | Float32Array (additive), shape (or dims)}.
export function checkMask(mask, name) {
  if (mask === undefined || mask === null) return undefined;
  checkTensorObject(mask, name);
  if (!(mask.data instanceof Uint8Array) && !(mask.data instanceof Float32Array)) {
    throw new MHAError(`${name}.data: expected a Uint8Array (bool) or a Float32Array ` +
                       `(additive), received ${describe(mask.data)}`);
  }
  checkElementCount(mask.data, checkShapeOf(mask, name), name);
  return mask;
}

// A state_dict entry: a tensor, or a bare Float32Array when the parameter's
// shape is known (`expectedShape`, undefined for other names).
export function checkParameter(value, name, expectedShape) {
  if (value instanceof Float32Array && expectedShape !== undefined) {
    checkElementCount(value, expectedShape, name);
    return { data: value, shape: expectedShape };
  }
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) {
    const expected = expectedShape === undefined
      ? 'a tensor {data, shape}'
      : `a Float32Array or a tensor {data, shape} of shape ${shapeString(expectedShape)}`;
    throw new MHAError(`${name}: expected ${expected}, received ${describe(value)}`);
  }
  return checkTensor(value, name);
}
