// Written by scripts/option_rules.mjs from the core's table (src/core/option_rules.cc, through
// the binding's optionRules()): do not edit. A value is allowed when, as the float32 the core
// receives, it is finite, at least `min` (above it when minExcluded) and below `max`; `call` is
// 'module' (a config) or 'sdpa'.
export const OPTION_RULES = Object.freeze([
  { call: 'module', name: 'scale', min: 0, minExcluded: false, max: Infinity,
    expected: 'a positive finite number (or 0 for the default)' },
  { call: 'module', name: 'softcap', min: 0, minExcluded: false, max: Infinity,
    expected: 'a positive finite number (or 0 for none)' },
  { call: 'sdpa', name: 'scale', min: -Infinity, minExcluded: false, max: Infinity,
    expected: 'a finite number' },
  { call: 'sdpa', name: 'softcap', min: 0, minExcluded: false, max: Infinity,
    expected: 'a positive finite number (or 0 for none)' },
  { call: 'module', name: 'dropout', min: 0, minExcluded: false, max: 1,
    expected: 'a probability in [0, 1)' },
  { call: 'module', name: 'qk_norm.eps', min: 0, minExcluded: true, max: Infinity,
    expected: 'a positive finite number' },
  { call: 'module', name: 'qk_norm.weight_offset', min: -Infinity, minExcluded: false, max: Infinity,
    expected: 'a finite number' },
]);
// The sizes it refuses: any dim of a module's config above maxDim, a cache's maxLength above
// maxCacheLength or storage of addressSpace bytes or more (the build's SIZE_MAX).
export const LIMITS = Object.freeze({ maxDim: 16777216, maxCacheLength: 1099511627776, addressSpace: 4294967295 });
