// Draws a finished run: the attention maps (with the mass a sink takes), the output, the timing
// and the check against a fixture's expected output or the JS reference.
import { compareTensors } from './compare.js';
import { attachTooltip, drawHeatmap, drawLegend, scaleRange } from './heatmap.js';
import { referenceForward } from './reference.js';
import { appendMissingMassStrip, missingMass } from './row-mass.js';

const byId = (id) => document.getElementById(id);
// Cell size in CSS pixels so `count` cells span about `span` pixels: whole pixels up to `largest`,
// fractions (a shrunk, smoothed map) when there are more cells than pixels.
const cellSize = (span, count, largest) => (count > span ? span / count : Math.min(Math.floor(span / count), largest));

function formatValue(v) {
  if (Number.isNaN(v)) return 'NaN';
  if (v === 0) return '0';
  return Math.abs(v) >= 1e4 || Math.abs(v) < 1e-3 ? v.toExponential(3) : v.toPrecision(4);
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function formatTime(ms) {
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  return ms < 100 ? `${ms.toFixed(2)} ms` : `${ms.toFixed(0)} ms`;
}

// The weights of batch item n as L x S' maps: each head and their average, or the engine's average.
function weightMaps(view, weights, headNames, n) {
  const size = view.queryLength * view.keyLength;
  const slice = (i) => weights.data.subarray(i * size, (i + 1) * size);
  if (view.averaged) return [{ title: 'average over heads', values: slice(n), average: true }];
  const heads = headNames.map((title, h) => ({ title, values: slice(n * view.heads + h) }));
  const mean = new Float32Array(size);
  for (const { values } of heads) {
    for (let i = 0; i < size; i++) mean[i] += values[i] / view.heads;
  }
  return [...heads, { title: 'average over heads', values: mean, average: true }];
}

// Batch item n of the output as an L x E matrix, whatever the layout.
function outputMatrix(view, output, n) {
  const { queryLength: l, embedDim: e } = view;
  if (!view.batched) return output.data;
  if (view.batchFirst) return output.data.subarray(n * l * e, (n + 1) * l * e);
  const rows = new Float32Array(l * e);
  for (let i = 0; i < l; i++) rows.set(output.data.subarray((i * view.batch + n) * e, (i * view.batch + n + 1) * e), i * e);
  return rows;
}

function keyLabel(view, col) {
  const firstExtra = view.keyLength - view.extraKeys.length;
  return col < firstExtra ? `key ${col}` : `key ${col} (${view.extraKeys[col - firstExtra]})`;
}

function renderWeights({ view, headNames }, weights, n, tooltip) {
  const container = byId('weights-maps');
  const note = byId('weights-note');
  container.replaceChildren();
  if (!weights) {
    byId('weights-legend').replaceChildren();
    note.hidden = false;
    note.textContent = '"Need weights" is off: the engine ran its flash-style path and never built the L x S matrix.';
    return;
  }
  note.hidden = true;
  const maps = weightMaps(view, weights, headNames, n);
  const values = maps.flatMap((m) => [...m.values]);
  const range = scaleRange(values, 'sequential');
  drawLegend(byId('weights-legend'), { scale: 'sequential', range, label: 'weight', hasNaN: values.some(Number.isNaN) });
  const longest = Math.max(view.queryLength, view.keyLength);
  const cell = cellSize(maps.length > 3 ? 240 : 320, longest, 24);
  for (const map of maps) {
    const figure = document.createElement('figure');
    figure.className = map.average ? 'map average' : 'map';
    figure.style.margin = '0';
    const caption = document.createElement('figcaption');
    caption.className = 'map-title';
    caption.textContent = map.title;
    const canvas = document.createElement('canvas');
    canvas.className = 'heatmap';
    drawHeatmap(canvas, map.values, view.queryLength, view.keyLength, { scale: 'sequential', range, cellWidth: cell });
    attachTooltip(canvas, tooltip, view.queryLength, view.keyLength, (r, c) =>
      `${map.title} · query ${r} → ${keyLabel(view, c)}: ${formatValue(map.values[r * view.keyLength + c])}`);
    const row = document.createElement('div');
    row.className = 'map-row';
    row.append(canvas);
    const missing = missingMass(map.values, view.queryLength, view.keyLength);
    if (missing) {
      appendMissingMassStrip(row, missing, cell, tooltip);
      const finite = missing.filter(Number.isFinite);
      caption.textContent += ` · the sink takes ${formatValue(Math.min(...finite))}–${formatValue(Math.max(...finite))} of a row`;
    }
    figure.append(caption, row);
    container.append(figure);
  }
}

function renderOutput({ view }, output, n, tooltip) {
  const values = outputMatrix(view, output, n);
  const range = scaleRange(values, 'diverging');
  drawLegend(byId('output-legend'), { scale: 'diverging', range, label: 'value', hasNaN: values.some(Number.isNaN) });
  const canvas = byId('output-canvas');
  const cellWidth = cellSize(720, view.embedDim, 18);
  const cellHeight = cellSize(280, view.queryLength, 18);
  drawHeatmap(canvas, values, view.queryLength, view.embedDim, { scale: 'diverging', range, cellWidth, cellHeight });
  attachTooltip(canvas, tooltip, view.queryLength, view.embedDim, (r, c) =>
    `output · query ${r}, feature ${c}: ${formatValue(values[r * view.embedDim + c])}`);
  byId('output-note').textContent = `batch item ${n}: ${view.queryLength} queries x ${view.embedDim} features`;
}

function renderStats(problem, reply) {
  const ms = median(reply.timesMs);
  byId('stat-time').textContent = formatTime(ms);
  byId('stat-time-note').textContent = `median of ${reply.timesMs.length} run${reply.timesMs.length > 1 ? 's' : ''}`;
  byId('stat-gflops').textContent = (problem.flops / (ms * 1e6)).toFixed(2);
  const { view } = problem;
  byId('stat-shape').textContent = `N ${view.batch} · L ${view.queryLength} · S ${view.keyLength} · E ${view.embedDim} · H ${view.heads}`;
  byId('stat-shape-note').textContent = `${(problem.flops / 1e6).toFixed(2)} MFLOP per forward`;
  return renderCheck(problem, reply);
}

// What the run is checked against: a fixture's expected results, else the JS reference (computed
// once per run), or why neither applies.
function expectationOf(problem) {
  problem.expectation ??= problem.expected?.output
    ? { against: 'expected in file', ...problem.expected }
    : { against: 'JS reference', ...referenceForward(problem.request) };
  return problem.expectation;
}

// Shows the check and returns it: { against, ok, maxAbsError } or { against, skipped }.
function renderCheck(problem, reply) {
  const expected = expectationOf(problem);
  byId('stat-check-label').textContent = `vs. ${expected.against}`;
  const value = byId('stat-check');
  if (expected.skipped) {
    value.textContent = 'not checked';
    value.className = 'stat-value small';
    byId('stat-check-note').textContent = expected.skipped;
    return { against: expected.against, skipped: expected.skipped };
  }
  const checks = [['output', reply.output, expected.output], ['weights', reply.weights, expected.weights]]
    .filter(([, actual, wanted]) => actual && wanted)
    .map(([name, actual, wanted]) => ({ name, ...compareTensors(actual, wanted) }));
  const ok = checks.every((c) => c.ok);
  value.textContent = ok ? `✓ matches (${checks.map((c) => c.name).join(' + ')})` : '✗ differs';
  value.className = `stat-value small ${ok ? 'good' : 'bad'}`;
  byId('stat-check-note').textContent = checks.map((c) => `${c.name}: max |err| ${c.maxAbsError.toExponential(1)}${c.ok ? '' : `, ${c.message}`}`).join('; ');
  return { against: expected.against, ok, maxAbsError: Math.max(...checks.map((c) => c.maxAbsError)) };
}

// Returns the check of the run (renderCheck's).
export function renderResults(problem, reply, batchItem, tooltip) {
  renderWeights(problem, reply.weights, batchItem, tooltip);
  renderOutput(problem, reply.output, batchItem, tooltip);
  return renderStats(problem, reply);
}

export function medianTime(reply) {
  return median(reply.timesMs);
}
