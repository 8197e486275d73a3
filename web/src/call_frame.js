// Forward and scaledDotProductAttention in one binding call each, the calls a
// decoder makes once per token. Their tensors and a call frame (addresses,
// shapes, flags; the layout of Frame in bindings/mha_binding.cc, read from the
// binding) go into one heap block: a scratch block kept per module
// instance for calls of up to SCRATCH_BYTES (a decoding step's), a block of
// their own for larger ones. The core leaves its results' addresses and
// shapes in the frame; they are copied out, then freed.
import { checkStatus, sharedResult } from './core_call.js';
import { alignUp, allocate, copyOutFloat32, heapViews, sourceBytes } from './heap.js';
import { checkShape, numElements, shapeOf } from './validate.js';

// The frame's layout in uint32 words (Frame::Layout, its one definition),
// read once per module instance: { slots: the tensors' names in slot order,
// slotWords, flags: {name: bit}, flagsWord, numberWords: {name: word of a
// float}, integerWords: {name: word of an int32}, outputWord,
// weightsWord, maxResultRank, fixedWords }. A tensor slot: address (0:
// absent), rank, 1 for a bool mask, index of its first dim; the dims follow
// the fixed words.
const layouts = new WeakMap();   // wasm -> layout

function layoutOf(wasm) {
  let layout = layouts.get(wasm);
  if (layout === undefined) {
    layout = wasm.frameLayout();
    layouts.set(wasm, layout);
  }
  return layout;
}

// 64 KiB holds a decoding step of E = 4096 with its frame; larger calls
// compute for far longer than an allocation takes.
const SCRATCH_BYTES = 1 << 16;
const scratchBlocks = new WeakMap();   // wasm -> address

// tensors: {query, key, value, keyPaddingMask, attnMask}, each a validated
// tensor or mask, or absent. Reads every `data` and shape once (getters may
// run, and detach or resize buffers), then, with no JS left to run, lays out
// the block: [frame | each distinct data array once, 16-byte aligned], the
// tensors in the layout's slot order.
function layOut(layout, tensors) {
  const read = layout.slots.map((name) => (tensors[name] == null ? undefined
    : { data: tensors[name].data, shape: checkShape(Array.from(shapeOf(tensors[name])), 'tensor') }));
  let words = layout.fixedWords;
  for (const t of read) {
    if (t === undefined) continue;
    t.dimWord = words;
    words += t.shape.length;
  }
  let bytes = alignUp(4 * words);
  // Every copy is written; a data array seen before shares its largest copy
  // so far, and one that needs more bytes gets its own (the earlier tensors
  // keep theirs).
  const copies = [];   // { offset, byteLength, source }
  const largest = new Map();   // data -> its largest copy
  for (const t of read) {
    if (t === undefined) continue;
    t.bool = t.data instanceof Uint8Array;
    const byteLength = numElements(t.shape) * (t.bool ? 1 : 4);
    let copy = largest.get(t.data);
    if (copy === undefined || copy.byteLength < byteLength) {
      copy = { offset: bytes, byteLength, source: sourceBytes(t.data, byteLength) };
      largest.set(t.data, copy);
      copies.push(copy);
      bytes += alignUp(byteLength);
    }
    t.offset = copy.offset;
  }
  return { read, copies, bytes };
}

// A heap block of at least `bytes`: the scratch block, or one of its own for
// a larger call. Give it back with returnBlock once the call is done.
export function takeBlock(wasm, bytes) {
  if (bytes > SCRATCH_BYTES) return allocate(wasm, bytes);
  let block = scratchBlocks.get(wasm);
  if (block === undefined) {
    block = allocate(wasm, SCRATCH_BYTES);
    scratchBlocks.set(wasm, block);
  }
  return block;
}

export function returnBlock(wasm, block, bytes) {
  if (bytes > SCRATCH_BYTES) wasm.free(block);
}

// A result the core left in the frame, copied out; null when absent.
function resultAt(wasm, frameWord, maxRank) {
  const u32 = heapViews(wasm, 4 * (frameWord + 2 + maxRank)).u32;
  const rank = u32[frameWord + 1];
  if (rank === 0) return null;
  const shape = Array.from(u32.subarray(frameWord + 2, frameWord + 2 + rank));
  return { data: copyOutFloat32(wasm, u32[frameWord], numElements(shape)), shape };
}

// Copies `tensors` (see layOut) and the frame into the heap, runs
// call(frameAddress, result) -> status and returns { output, weights }.
// flags: {name: boolean} of the layout's flags; numbers: {name: number} of
// the layout's floats and int32s (absent: 0).
export function callFrame(wasm, what, tensors, flags, numbers, call) {
  const layout = layoutOf(wasm);
  const { read, copies, bytes } = layOut(layout, tensors);
  const block = takeBlock(wasm, bytes);
  const result = sharedResult(wasm);
  try {
    const { u8, u32, f32 } = heapViews(wasm, block + bytes);
    for (const { offset, source } of copies) u8.set(source, block + offset);
    const frame = block >>> 2;
    u32.fill(0, frame, frame + layout.fixedWords);
    read.forEach((t, slot) => {
      if (t === undefined) return;
      const at = frame + layout.slotWords * slot;
      u32[at] = block + t.offset;
      u32[at + 1] = t.shape.length;
      u32[at + 2] = t.bool ? 1 : 0;
      u32[at + 3] = t.dimWord;
      u32.set(t.shape, frame + t.dimWord);
    });
    u32[frame + layout.flagsWord] = Object.keys(flags)
      .reduce((bits, name) => (flags[name] ? bits | layout.flags[name] : bits), 0);
    for (const [name, value] of Object.entries(numbers)) {
      if (name in layout.integerWords) {
        u32[frame + layout.integerWords[name]] = value;   // as int32: -1 is 0xffffffff
      } else {
        f32[frame + layout.numberWords[name]] = value;
      }
    }
    checkStatus(call(block, result), result, what);
    return {
      output: resultAt(wasm, frame + layout.outputWord, layout.maxResultRank),
      weights: resultAt(wasm, frame + layout.weightsWord, layout.maxResultRank),
    };
  } finally {
    result.clear();
    returnBlock(wasm, block, bytes);
  }
}
