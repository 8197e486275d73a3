// A small .safetensors reader for the tests (the package itself hands the
// bytes to the core's reader). Returns the metadata and each tensor as
// {dtype, shape, data}: Float32Array for F32, Uint8Array for BOOL, raw bytes
// (Uint8Array) for F16/BF16.
export function readSafetensors(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
  const dataStart = 8 + headerLength;
  const tensors = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [begin, end] = entry.data_offsets;
    // A copy (new Uint8Array(view) copies; a Buffer's slice would not): the
    // data need not be 4-byte aligned in `bytes`.
    const raw = new Uint8Array(bytes.subarray(dataStart + begin, dataStart + end));
    const data = entry.dtype === 'F32' ? new Float32Array(raw.buffer) : raw;
    tensors[name] = { dtype: entry.dtype, shape: entry.shape, data };
  }
  return { metadata: header.__metadata__ ?? {}, tensors };
}

// A .safetensors file: {name: {shape, data: Float32Array}} (F32), or
// {name: {shape, dtype, bytes}} (bytes already in that dtype).
export function writeSafetensors(tensors) {
  const header = {};
  const chunks = [];
  let offset = 0;
  for (const [name, { shape, data, dtype = 'F32', bytes = new Uint8Array(Float32Array.from(data).buffer) }]
    of Object.entries(tensors)) {
    header[name] = { dtype, shape, data_offsets: [offset, offset + bytes.length] };
    offset += bytes.length;
    chunks.push(bytes);
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const file = new Uint8Array(8 + json.length + offset);
  new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
  file.set(json, 8);
  let at = 8 + json.length;
  for (const c of chunks) { file.set(c, at); at += c.length; }
  return file;
}
