// A W row's inputs as every runner reads them: the files writeInputs
// (workloads.mjs) leaves in build/bench/data, <id>.query.f32, .key.f32,
// .value.f32 and .kpm.u8. No Node code: bench/child.mjs reads the files,
// the browser page (bench/browser) fetches them, and both go through this.
//   read(name): the bytes of <id>.<name> (a Uint8Array, or a Promise of one).
// Returns { query, key, value, keyPaddingMask }; self-attention gets the
// query object itself back as key and value.
export async function inputsFrom(w, read) {
  const floats = async (name) => new Float32Array(new Uint8Array(await read(name)).buffer);
  const query = await floats('query.f32');
  return {
    query,
    key: w.cross ? await floats('key.f32') : query,
    value: w.cross ? await floats('value.f32') : query,
    keyPaddingMask: w.kpmLengths ? new Uint8Array(await read('kpm.u8')) : null,
  };
}
