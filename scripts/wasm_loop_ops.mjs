// Counts the SIMD operations of each loop of one function of a .wasm, from
// binaryen's disassembly (wasm-dis), to compare kernels' inner loops by what
// they execute: prints, per loop (outermost first, indented by depth), the
// SIMD operations of its own body (nested loops excluded) by opcode, its
// scalar loads and stores, and its scalar integer arithmetic (indices,
// pointers, loop counters: they take issue slots too). The relaxed build's
// placeholder import call (mul_add-inl.h) counts as one SIMD operation, as
// it becomes one.
//
//   node scripts/wasm_loop_ops.mjs <module.wasm> <module.mjs.symbols> <name substring>
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const [wasm, symbols, wanted] = process.argv.slice(2);
if (!wanted) {
  console.error('usage: node scripts/wasm_loop_ops.mjs <module.wasm> <module.mjs.symbols> <name substring>');
  process.exit(2);
}
const wat = execFileSync('wasm-dis', [wasm], { maxBuffer: 1 << 30 }).toString();
// The symbol map numbers functions imports first; wasm-dis prints the
// defined ones in that order after the imports (named $N, or by the name
// section's names when the module has one).
const imports = (wat.match(/^ \(import "[^"]*" "[^"]*" \(func /gm) || []).length;
// The placeholder as named in the relaxed build's named.wasm (build_wasm.sh).
const RELAXED = /\(call \$mha_relaxed_madd\b/g;
// The map escapes characters as \xx (hex).
const unescape = (name) => name.replace(/\\([0-9a-f]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16)));
const matches = readFileSync(symbols, 'utf8').split('\n')
  .map((line) => line.split(/:(.*)/s)).map(([i, name]) => [i, name && unescape(name)])
  .filter(([, name]) => name && name.includes(wanted));
if (matches.length !== 1) {
  console.error(`${matches.length} functions match "${wanted}":\n${matches.map((m) => m[1]).join('\n')}`);
  process.exit(1);
}
const functions = wat.split(/\n(?= \(func )/).slice(1);
const body = functions[Number(matches[0][0]) - imports].split('\n\n')[0].split('\n');
const SIMD = /\((v128|f32x4|i32x4|i16x8|i8x16|i64x2|f64x2)\.[a-z0-9_]+/g;
const loops = [];
const INTEGER = /\((i32|i64)\.(add|sub|mul|shl|shr_[su]|and|or|xor|eqz?|ne|[lg][te]_[su])\b/g;
const stack = [{ depth: 0, ops: new Map(), scalar: 0, integer: 0, line: 0 }];
let depth = 0;
body.forEach((text, i) => {
  const indent = text.search(/\S/);
  // Close loops whose indentation we left.
  while (stack.length > 1 && indent <= stack[stack.length - 1].indent) loops.push(stack.pop());
  const top = stack[stack.length - 1];
  if (/^\s*\(loop /.test(text)) {
    stack.push({ depth: ++depth, indent, ops: new Map(), scalar: 0, integer: 0, line: i + 1 });
    return;
  }
  for (const m of text.matchAll(SIMD)) top.ops.set(m[0].slice(1), (top.ops.get(m[0].slice(1)) || 0) + 1);
  for (const _ of text.matchAll(RELAXED)) top.ops.set('relaxed_madd', (top.ops.get('relaxed_madd') || 0) + 1);
  if (/\((i32|i64|f32|f64)\.(load|store)/.test(text)) top.scalar += 1;
  top.integer += (text.match(INTEGER) || []).length;
  depth = stack.length - 1;
});
while (stack.length > 1) loops.push(stack.pop());
console.log(matches[0][1]);
for (const loop of loops.sort((a, b) => a.line - b.line)) {
  const total = [...loop.ops.values()].reduce((a, b) => a + b, 0);
  if (total === 0) continue;
  const detail = [...loop.ops].sort((a, b) => b[1] - a[1]).map(([op, n]) => `${op} ${n}`).join(', ');
  console.log(`${'  '.repeat(loop.depth - 1)}loop at line ${loop.line}: ${total} SIMD (${detail}); scalar loads/stores ${loop.scalar}; integer ops ${loop.integer}`);
}
