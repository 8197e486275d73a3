// The README's benchmark summary, made from bench/RESULTS.md so that the two cannot disagree:
// after a new bench/RESULTS.md, `node bench/lib/readme_summary.mjs --write` puts it between the
// README's bench-summary markers; tests/js/readme_examples.test.js checks that it is current.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const BEGIN = '<!-- bench-summary: made from bench/RESULTS.md by bench/lib/readme_summary.mjs -->';
export const END = '<!-- /bench-summary -->';

// The first table row of `engine` at `threads` after `heading` (a line that starts the section,
// e.g. '| **WebAssembly in Node**'), as { column header: cell } from the table's header line.
function row(results, heading, engine, threads) {
  const from = results.indexOf(heading);
  if (from < 0) throw new Error(`bench/RESULTS.md has no section ${heading}`);
  const cells = (line) => line.split('|').slice(1, -1).map((cell) => cell.trim());
  const header = results.slice(0, from).split('\n').filter((l) => l.startsWith('| engine |')).at(-1);
  const line = results.slice(from).split('\n')
    .find((l) => l.startsWith(`| ${engine} | ${threads} |`));
  if (header === undefined || line === undefined) {
    throw new Error(`bench/RESULTS.md has no row ${engine} ${threads} after ${heading}`);
  }
  const values = cells(line);
  return Object.fromEntries(cells(header).map((name, i) => [name, values[i]]));
}

// The cells of the columns named by a workload id of `prefix` (W1, W2, ... or D1, D2h, ...).
const workloadCells = (r, prefix) => Object.entries(r).filter(([name]) => new RegExp(`^${prefix}\\d`).test(name))
  .map(([, cell]) => cell);
const ids = (r, prefix) => Object.keys(r).filter((name) => new RegExp(`^${prefix}\\d+$`).test(name));
const ratios = (cells) => cells.flatMap((cell) => [...cell.matchAll(/×([\d.]+)/g)].map((m) => Number(m[1])));
const span = (values) => `${Math.min(...values).toFixed(1)} to ${Math.max(...values).toFixed(1)}`;
const mib = (cell) => Number(cell.match(/heap ([\d.]+) MiB/)[1]);
const column = (r, start) => r[Object.keys(r).find((name) => name.startsWith(start))];
const range = (list) => `${list[0]}-${list.at(-1)}`;

export function summary(results) {
  const header = results.split('\n')[2].split(' · ');
  const host = header[1];
  const minutes = header.find((field) => / min$/.test(field));
  const node = '| **WebAssembly in Node**';
  const ours = row(results, node, 'mha-wasm', 2);
  const ort = row(results, node, 'onnxruntime-web', 2);
  const native = ['1', '2'].flatMap((t) => ratios(workloadCells(row(results, '| **native**', 'onnxruntime-node', t), 'W')));
  const decoding = results.slice(results.indexOf('## Decoding'));
  const decodeRow = row(decoding, node, 'onnxruntime-web', 2);
  const decode = ratios(workloadCells(decodeRow, 'D'));
  const longest = (r) => column(r, 'longest').match(/^\d+/)?.[0];
  const forwards = ids(ours, 'W');
  return `The last run took ${minutes} on ${host}. There mha-wasm on 2 threads was ${span(ratios(workloadCells(ort, 'W')))} ` +
    `times as fast as onnxruntime-web on the ${forwards.length} workloads ${range(forwards)} in Node, with a ` +
    `${Math.round(mib(column(ours, 'W6 peak')))} MiB heap on W6 where onnxruntime-web needed ` +
    `${(mib(column(ort, 'W6 peak')) / 1024).toFixed(1)} GiB, and ran L = S = ${longest(ours)} where onnxruntime-web ` +
    `stopped at ${longest(ort)}; decoding (${range(ids(decodeRow, 'D'))}) it was ${span(decode)} times as fast. ` +
    `Native mha was ${span(native)} times as fast as onnxruntime-node (1 and 2 threads).${models(results)}`;
}

// Issue 22's rows, when bench/RESULTS.md holds them: a run of their own, whose header line
// (date · host · ...) comes before their section.
function models(results) {
  const at = results.indexOf('## Today\'s models');
  if (at < 0) return '';
  const header = results.slice(0, at).split('\n').filter((l) => /^\d{4}-\d\d-\d\dT/.test(l)).at(-1).split(' · ');
  const ort = ratios(Object.values(row(results.slice(at), '| **WebAssembly in Node**', 'onnxruntime-web', 2)));
  return ` In a run of issue 22's rows on ${header[1]}, mha-wasm on 2 threads was ${span(ort)} times as fast ` +
    'as onnxruntime-web\'s GroupQueryAttention with a sliding window and soft-capping (V1, V1f, V2).';
}

// The README with its summary replaced by `text`.
export function withSummary(readme, text) {
  const begin = readme.indexOf(BEGIN);
  const end = readme.indexOf(END);
  if (begin < 0 || end < begin) throw new Error('README.md has no bench-summary markers');
  return `${readme.slice(0, begin + BEGIN.length)}\n${text}\n${readme.slice(end)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv.includes('--write')) {
  const readmePath = `${ROOT}README.md`;
  const text = summary(readFileSync(`${ROOT}bench/RESULTS.md`, 'utf8'));
  writeFileSync(readmePath, withSummary(readFileSync(readmePath, 'utf8'), text));
  console.log(text);
}
