// Reads a .safetensors file's header and tensors in the page, to find out what a dropped file is:
// a PyTorch state_dict (weights only) or one of the project's fixtures (config, inputs, masks and
// expected results; see notes on the fixture format). The weights themselves are loaded by the
// engine's own mha.loadSafetensors; this only reads what the page needs to set up the forward.

const DTYPE_BYTES = {
  F32: 4, F16: 2, BF16: 2, BOOL: 1, U8: 1, I8: 1, F8_E5M2: 1, F8_E4M3: 1, I16: 2, U16: 2, I32: 4, U32: 4, F64: 8, I64: 8, U64: 8,
};

export function parseSafetensors(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new Error('expected the file as a Uint8Array');
  if (bytes.length < 8) throw new Error(`not a .safetensors file: it has ${bytes.length} bytes, a header needs 8 or more`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  if (headerLength > bytes.length - 8) {
    throw new Error(`not a .safetensors file: its header claims ${headerLength} bytes but the file has ${bytes.length}`);
  }
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
  } catch {
    throw new Error('not a .safetensors file: its header is not JSON');
  }
  const dataStart = 8 + headerLength;
  const tensors = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const { dtype, shape, data_offsets: [begin, end] = [] } = entry ?? {};
    const count = Array.isArray(shape) ? shape.reduce((a, b) => a * b, 1) : NaN;
    if (!(dtype in DTYPE_BYTES) || count * DTYPE_BYTES[dtype] !== end - begin || dataStart + end > bytes.length) {
      throw new Error(`bad .safetensors entry "${name}": dtype ${dtype}, shape [${shape}], bytes ${begin}..${end}`);
    }
    tensors[name] = { dtype, shape, bytes: bytes.subarray(dataStart + begin, dataStart + end) };
  }
  return { metadata: header.__metadata__ ?? {}, tensors };
}

// A tensor as the engine API takes it: F32 -> Float32Array, BOOL -> Uint8Array (copies, aligned).
export function toApiTensor(name, tensor) {
  const { dtype, shape, bytes } = tensor;
  if (dtype === 'BOOL' || dtype === 'U8') return { data: bytes.slice(), shape };
  if (dtype === 'F32') return { data: new Float32Array(bytes.slice().buffer), shape };
  throw new Error(`tensor "${name}" is ${dtype}; the demo reads inputs and masks as F32 or BOOL`);
}
