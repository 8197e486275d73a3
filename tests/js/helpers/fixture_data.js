// A fixture from its bytes, and its module options in the JS API's names: no
// Node modules, so that browser tests load it too.
import { readSafetensors } from './safetensors.js';

export function fixtureFromBytes(name, bytes) {
  const { metadata, tensors } = readSafetensors(bytes);
  return { name, bytes, config: JSON.parse(metadata.config), tensors };
}

// The fixture's module options in the JS API's names (0 = default).
export function moduleConfig(c) {
  return {
    embedDim: c.embed_dim, numHeads: c.num_heads, bias: c.bias, addBiasKV: c.add_bias_kv,
    addZeroAttn: c.add_zero_attn, kdim: c.kdim || undefined, vdim: c.vdim || undefined,
    batchFirst: c.batch_first, qkHeadDim: c.qk_head_dim || undefined,
    vHeadDim: c.v_head_dim || undefined,
  };
}
