// Checks a linked .wasm for kernel-path functions too large for the engines'
// optimizing compilers, and writes it out without its function names:
//   node scripts/wasm_function_sizes.mjs <named.wasm> <out.wasm>
//
// V8 (Node 20 and Chromium) compiles a function with more than 8192 virtual
// registers with its mid-tier register allocator instead of the top-tier one
// (--turbo-use-mid-tier-regalloc-for-huge-functions, on by default). That
// made every one-shot forward 1.4-1.56x slower in 6387be0: binaryen's
// inliner (emcc's wasm-opt -O3) put the 12 typed GEMM tiles into one
// function of 58,227 bytes, where the float32 tile alone had been 11,999.
// SpiderMonkey and JavaScriptCore have thresholds of their own (see
// MAX_BODY_BYTES). The unit V8 uses is not visible in the binary, so the
// check is on body bytes, with the margin below.
//
// The build links with --profiling-funcs (a name section, the code
// unchanged); this script names the offenders from it, then drops it.
import fs from 'node:fs';

// Body bytes above which a kernel-path function fails the check: 58 KB went
// to V8's mid-tier allocator, 12 KB did not.
export const MAX_BODY_BYTES = 24 * 1024;

// Functions of the engine's hot path: the kernels and Highway's per-target
// namespaces (mha::N_WASM). Load-time code (checkpoint plans, JSON) may be
// larger: it runs once.
const KERNEL_PATH = /^mha::(kernels|N_[A-Z0-9_]+)::/;

function readLeb(bytes, at) {
  let value = 0;
  let shift = 0;
  let byte;
  do {
    byte = bytes[at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
  } while (byte & 0x80);
  return [value, at];
}

// [{ id, name?, start, end }] of the module's sections (start: after the size).
function sections(bytes) {
  const list = [];
  let at = 8;
  while (at < bytes.length) {
    const headerStart = at;
    const id = bytes[at];
    let size;
    [size, at] = readLeb(bytes, at + 1);
    const end = at + size;
    let name;
    if (id === 0) {
      let length;
      let nameAt;
      [length, nameAt] = readLeb(bytes, at);
      name = new TextDecoder().decode(bytes.subarray(nameAt, nameAt + length));
    }
    list.push({ id, name, headerStart, start: at, end });
    at = end;
  }
  return list;
}

function importedFunctionCount(bytes, section) {
  let [count, at] = readLeb(bytes, section.start);
  let functions = 0;
  for (let i = 0; i < count; i++) {
    for (let s = 0; s < 2; s++) {
      let length;
      [length, at] = readLeb(bytes, at);
      at += length;
    }
    const kind = bytes[at++];
    if (kind === 0) {
      functions++;
      [, at] = readLeb(bytes, at);
    } else if (kind === 1) {
      at++;
      const [flags, next] = readLeb(bytes, at);
      [, at] = readLeb(bytes, next);
      if (flags & 1) [, at] = readLeb(bytes, at);
    } else if (kind === 2) {
      const [flags, next] = readLeb(bytes, at);
      [, at] = readLeb(bytes, next);
      if (flags & 1) [, at] = readLeb(bytes, at);
    } else {
      at += 2;
    }
  }
  return functions;
}

// Map index -> name from the "name" section's function names (subsection 1).
function functionNames(bytes, section) {
  const names = new Map();
  let [, at] = readLeb(bytes, section.start);
  at += 4; // "name"
  while (at < section.end) {
    const kind = bytes[at];
    let size;
    [size, at] = readLeb(bytes, at + 1);
    if (kind === 1) {
      let [count, p] = readLeb(bytes, at);
      for (let i = 0; i < count; i++) {
        let index;
        let length;
        [index, p] = readLeb(bytes, p);
        [length, p] = readLeb(bytes, p);
        names.set(index, new TextDecoder().decode(bytes.subarray(p, p + length)));
        p += length;
      }
    }
    at += size;
  }
  return names;
}

// Emscripten's --emit-symbol-map file ("index:name" lines, characters
// escaped as \xx) as a Map.
export function readSymbols(text) {
  return new Map(text.split('\n').filter(Boolean).map((line) => {
    const colon = line.indexOf(':');
    const name = line.slice(colon + 1).replace(/\\([0-9a-f]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16)));
    return [Number(line.slice(0, colon)), name];
  }));
}

function leb(value) {
  const out = [];
  do {
    let byte = value & 0x7f;
    value = Math.floor(value / 128);
    if (value) byte |= 0x80;
    out.push(byte);
  } while (value);
  return out;
}

// The bytes of a "name" section naming functions by `names` (index -> name).
function nameSection(names) {
  const text = (string) => {
    const bytes = new TextEncoder().encode(string);
    return [...leb(bytes.length), ...bytes];
  };
  const entries = [...names].sort((a, b) => a[0] - b[0]).flatMap(([index, name]) => [...leb(index), ...text(name)]);
  const functions = [...leb(names.size), ...entries];
  const payload = [...text('name'), 1, ...leb(functions.length), ...functions];
  return Uint8Array.from([0, ...leb(payload.length), ...payload]);
}

// { functions: [{ index, name, bytes }] of every defined function, largest
// first; named: whether names were found; withoutNames, withNames(): the
// module without a name section and with one }. Names come from the
// module's name section, else from `symbols` (readSymbols).
export function functionSizes(bytes, symbols = new Map()) {
  const list = sections(bytes);
  const imports = list.find((s) => s.id === 2);
  const code = list.find((s) => s.id === 10);
  const nameSec = list.find((s) => s.id === 0 && s.name === 'name');
  if (!code) throw new Error('no code section');
  const base = imports ? importedFunctionCount(bytes, imports) : 0;
  const names = nameSec ? functionNames(bytes, nameSec) : symbols;
  const functions = [];
  let [count, at] = readLeb(bytes, code.start);
  for (let i = 0; i < count; i++) {
    let size;
    [size, at] = readLeb(bytes, at);
    functions.push({ index: base + i, name: names.get(base + i) ?? `function ${base + i}`, bytes: size });
    at += size;
  }
  functions.sort((a, b) => b.bytes - a.bytes);
  let withoutNames = bytes;
  if (nameSec) {
    const { headerStart, end } = nameSec;
    withoutNames = new Uint8Array(bytes.length - (end - headerStart));
    withoutNames.set(bytes.subarray(0, headerStart));
    withoutNames.set(bytes.subarray(end), headerStart);
  }
  const withNames = () => {
    const section = nameSection(names);
    const out = new Uint8Array(withoutNames.length + section.length);
    out.set(withoutNames);
    out.set(section, withoutNames.length);
    return out;
  };
  return { functions, named: names.size > 0, withoutNames, withNames };
}

const USAGE = 'usage: node scripts/wasm_function_sizes.mjs <in.wasm> <out.wasm> [<in.symbols>] [--keep-names]';

if (import.meta.url === `file://${process.argv[1]}`) {
  const keepNames = process.argv.includes('--keep-names');
  const [input, output, symbolsFile] = process.argv.slice(2).filter((a) => a !== '--keep-names');
  if (!input || !output) {
    console.error(USAGE);
    process.exit(2);
  }
  const symbols = symbolsFile ? readSymbols(fs.readFileSync(symbolsFile, 'utf8')) : undefined;
  const { functions, named, withoutNames, withNames } = functionSizes(fs.readFileSync(input), symbols);
  if (!named) {
    console.error(`wasm_function_sizes: no names for ${input} (a name section or a symbol map)`);
    process.exit(1);
  }
  const kernels = functions.filter((f) => KERNEL_PATH.test(f.name));
  const over = kernels.filter((f) => f.bytes > MAX_BODY_BYTES);
  if (over.length) {
    console.error(`wasm_function_sizes: ${input}: kernel-path functions above ${MAX_BODY_BYTES} bytes ` +
      '(the engines compile them with cheaper register allocators or not at all with their best tier; ' +
      'keep them apart, e.g. called through function pointers as GemmKernel does):');
    for (const f of over) console.error(`  ${f.bytes} bytes  ${f.name}`);
    process.exit(1);
  }
  const largest = kernels.slice(0, 2).map((f) => `${f.name.replace(/\(.*/, '')} ${f.bytes}`).join(', ');
  console.log(`wasm_function_sizes: ${output}: largest kernel-path functions ${largest} (limit ${MAX_BODY_BYTES})`);
  fs.writeFileSync(output, keepNames ? withNames() : withoutNames);
}
