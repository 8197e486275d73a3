// Written by scripts/option_rules.mjs from the core's table (src/core/option_rules.cc, through
// the binding's optionRules()): do not edit. A value is allowed when, as the float32 the core
// receives, it is finite and at least `min`; `call` is 'module' (a config) or 'sdpa'.
export const OPTION_RULES = Object.freeze([
  { call: 'module', name: 'scale', min: 0, expected: 'a positive finite number (or 0 for the default)' },
  { call: 'module', name: 'softcap', min: 0, expected: 'a positive finite number (or 0 for none)' },
  { call: 'sdpa', name: 'scale', min: -Infinity, expected: 'a finite number' },
  { call: 'sdpa', name: 'softcap', min: 0, expected: 'a positive finite number (or 0 for none)' },
]);
