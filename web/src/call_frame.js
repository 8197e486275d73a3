// Forward and scaledDotProductAttention in one binding call each, the calls a
// decoder makes once per token. Their tensors and a call frame (addresses,
// shapes, flags; the layout of Frame in bindings/mha_binding.cc, which this
// file must match) go into one heap block: a scratch block kept per module
// instance for calls of up to SCRATCH_BYTES (a decoding step's), a block of
// their own for larger ones. The core leaves its results' addresses and
// shapes in the frame; they are copied out, then freed.
import { checkStatus, sharedResult } from './core_call.js';
import { alignUp, allocate, copyOutFloat32, heapViews, sourceBytes } from './heap.js';
import { checkShape, numElements } from './validate.js';

// Frame words (uint32). A tensor slot: address (0: absent), rank, 1 for a
// bool mask, index of its first dim; the dims follow the fixed words.
const SLOT_WORDS = 4;
const FLAGS = 20;
const SCALE = 21;
const OUTPUT = 22;
const MAX_RESULT_RANK = 4;
const WEIGHTS = OUTPUT + 2 + MAX_RESULT_RANK;
const DIMS = WEIGHTS + 2 + MAX_RESULT_RANK;

export const FLAG = { needWeights: 1, averageAttnWeights: 2, isCausal: 4, enableGqa: 8 };

// 64 KiB holds a decoding step of E = 4096 with its frame; larger calls
// compute for far longer than an allocation takes.
const SCRATCH_BYTES = 1 << 16;
const scratchBlocks = new WeakMap();   // wasm -> address

// tensors: [query, key, value, keyPaddingMask, attnMask], each a validated
// tensor or mask, or undefined. Reads every `data` and `shape` once (getters
// may run, and detach or resize buffers), then, with no JS left to run, lays
// out the block: [frame | each distinct data array once, 16-byte aligned].
function layOut(tensors) {
  const read = tensors.map((t) => (t === undefined ? undefined
    : { data: t.data, shape: checkShape(Array.from(t.shape), 'tensor') }));
  let words = DIMS;
  for (const t of read) {
    if (t === undefined) continue;
    t.dimWord = words;
    words += t.shape.length;
  }
  let bytes = alignUp(4 * words);
  const copies = new Map();   // data -> { offset, byteLength, source }
  for (const t of read) {
    if (t === undefined) continue;
    t.bool = t.data instanceof Uint8Array;
    const byteLength = numElements(t.shape) * (t.bool ? 1 : 4);
    let copy = copies.get(t.data);
    if (copy === undefined || copy.byteLength < byteLength) {
      copy = { offset: bytes, byteLength, source: sourceBytes(t.data, byteLength) };
      copies.set(t.data, copy);
      bytes += alignUp(byteLength);
    }
    t.offset = copy.offset;
  }
  return { read, copies: [...copies.values()], bytes };
}

function takeBlock(wasm, bytes) {
  if (bytes > SCRATCH_BYTES) return allocate(wasm, bytes);
  let block = scratchBlocks.get(wasm);
  if (block === undefined) {
    block = allocate(wasm, SCRATCH_BYTES);
    scratchBlocks.set(wasm, block);
  }
  return block;
}

// A result the core left in the frame, copied out; null when absent.
function resultAt(wasm, frameWord) {
  const u32 = heapViews(wasm, 4 * (frameWord + 2 + MAX_RESULT_RANK)).u32;
  const rank = u32[frameWord + 1];
  if (rank === 0) return null;
  const shape = Array.from(u32.subarray(frameWord + 2, frameWord + 2 + rank));
  return { data: copyOutFloat32(wasm, u32[frameWord], numElements(shape)), shape };
}

// Copies `tensors` (see layOut) and the frame into the heap, runs
// call(frameAddress, result) -> status and returns { output, weights }.
// flags: FLAG bits; scale: the frame's float.
export function callFrame(wasm, what, tensors, flags, scale, call) {
  const { read, copies, bytes } = layOut(tensors);
  const block = takeBlock(wasm, bytes);
  const result = sharedResult(wasm);
  try {
    const { u8, u32, f32 } = heapViews(wasm, block + bytes);
    for (const { offset, source } of copies) u8.set(source, block + offset);
    const frame = block >>> 2;
    u32.fill(0, frame, frame + DIMS);
    read.forEach((t, slot) => {
      if (t === undefined) return;
      const at = frame + SLOT_WORDS * slot;
      u32[at] = block + t.offset;
      u32[at + 1] = t.shape.length;
      u32[at + 2] = t.bool ? 1 : 0;
      u32[at + 3] = t.dimWord;
      u32.set(t.shape, frame + t.dimWord);
    });
    u32[frame + FLAGS] = flags;
    f32[frame + SCALE] = scale;
    checkStatus(call(block, result), result, what);
    return { output: resultAt(wasm, frame + OUTPUT), weights: resultAt(wasm, frame + WEIGHTS) };
  } finally {
    result.clear();
    if (bytes > SCRATCH_BYTES) wasm.free(block);
  }
}
