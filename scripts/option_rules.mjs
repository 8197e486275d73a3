// web/src/option_rules.js: the core's option rules and size limits (src/core/option_rules.cc)
// as the binding's optionRules() and sizeLimits() give them, for the JS package's checks in the
// caller's thread (through the proxy too, where the engine is in another).
// tests/js/option_rules.test.js fails when it is stale.
//   node scripts/option_rules.mjs           writes web/src/option_rules.js (from the simd build)
//   node scripts/option_rules.mjs --check   fails when it is not what the build gives
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as env from '../web/src/env_node.js';

const FILE = fileURLToPath(new URL('../web/src/option_rules.js', import.meta.url));

const quoted = (text) => `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

// The file's text for `rules` and `limits` (the binding's optionRules() and sizeLimits()).
export function optionRulesFile(rules, limits) {
  const rows = rules.map(({ call, name, min, minExcluded, max, expected }) =>
    `  { call: ${quoted(call)}, name: ${quoted(name)}, min: ${min}, minExcluded: ${minExcluded}, ` +
    `max: ${max},\n    expected: ${quoted(expected)} },`);
  return '// Written by scripts/option_rules.mjs from the core\'s table (src/core/option_rules.cc, through\n' +
    '// the binding\'s optionRules()): do not edit. A value is allowed when, as the float32 the core\n' +
    '// receives, it is finite, at least `min` (above it when minExcluded) and below `max`; `call` is\n' +
    '// \'module\' (a config) or \'sdpa\'.\n' +
    `export const OPTION_RULES = Object.freeze([\n${rows.join('\n')}\n]);\n` +
    '// The sizes it refuses: any dim of a module\'s config above maxDim, a cache\'s maxLength above\n' +
    '// maxCacheLength or storage of addressSpace bytes or more (the build\'s SIZE_MAX).\n' +
    `export const LIMITS = Object.freeze({ ${Object.entries(limits).map(([key, value]) =>
      `${key}: ${value}`).join(', ')} });\n`;
}

// The file's text from `wasm` (a build's binding).
export const optionRulesOf = (wasm) => optionRulesFile(wasm.optionRules(), wasm.sizeLimits());

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = optionRulesOf(await env.instantiate(env.fileUrls().simd, {}));
  if (process.argv.includes('--check')) {
    if (readFileSync(FILE, 'utf8') !== text) {
      console.error('web/src/option_rules.js is stale: run node scripts/option_rules.mjs');
      process.exit(1);
    }
  } else {
    writeFileSync(FILE, text);
  }
}
