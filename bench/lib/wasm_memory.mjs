// Records every WebAssembly memory this process creates or instantiates, so
// that the heap of any engine (ours or a peer's) can be read after a run.
// Import this module before the engines: it wraps the WebAssembly API.
const memories = new Set();

function remember(instance) {
  for (const value of Object.values(instance.exports)) {
    if (value instanceof WebAssembly.Memory) memories.add(value);
  }
}

const NativeMemory = WebAssembly.Memory;
WebAssembly.Memory = function Memory(descriptor) {
  const memory = new NativeMemory(descriptor);
  memories.add(memory);
  return memory;
};
WebAssembly.Memory.prototype = NativeMemory.prototype;

const nativeInstantiate = WebAssembly.instantiate;
WebAssembly.instantiate = async (source, imports) => {
  const result = await nativeInstantiate(source, imports);
  remember(result.instance ?? result);
  return result;
};

const nativeInstantiateStreaming = WebAssembly.instantiateStreaming;
if (nativeInstantiateStreaming) {
  WebAssembly.instantiateStreaming = async (source, imports) => {
    const result = await nativeInstantiateStreaming(source, imports);
    remember(result.instance);
    return result;
  };
}

const NativeInstance = WebAssembly.Instance;
WebAssembly.Instance = function Instance(module, imports) {
  const instance = new NativeInstance(module, imports);
  remember(instance);
  return instance;
};
WebAssembly.Instance.prototype = NativeInstance.prototype;

// Bytes of the largest WebAssembly memory (memories never shrink: this is the peak).
export function wasmHeapBytes() {
  let largest = 0;
  for (const memory of memories) largest = Math.max(largest, memory.buffer.byteLength);
  return largest;
}
